// Seeded mutation fuzzing of what the runtime reads from disk, built with AddressSanitizer and
// UndefinedBehaviorSanitizer: plans (container, decoding, validation, loading on the CPU backend),
// safetensors files (weights and training states), images (JPEG and PNG decoding, then the
// augmentations) and the CUDA backend's tuning cache (its text format, which needs no GPU).
//
// Usage: castor-runtime-fuzz plan|safetensors|image|tuning-cache ITERATIONS SEED_FILE... [--messages FILE]
// Each iteration mutates one seed: its bytes (bit flips, edge bytes, insertions, deletions,
// truncation, splices with another seed), or its structure where a checksum or length field would
// make byte mutations stop at the first check (a plan's fields re-encoded into a valid container;
// a safetensors header's JSON with the length fixed up). A crash or sanitizer report ends the run;
// the reader may accept or refuse, but must return. Prints the inputs, accepted and refused, the
// rate and the number of distinct refusals (each listed with its count with --messages). Fails
// when nothing is accepted or nothing refused: the mutations would then test nothing.
#include "castor/backend.h"
#include "cuda/tuning/cache_format.h"
#include "data/image_augment.h"
#include "data/image_decode.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"
#include "weights/safetensors.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace {

using castor::Status;
using Rng = std::mt19937_64;
using Bytes = std::vector<uint8_t>;

const int64_t kEdgeInts[] = {0, 1, -1, 2, 3, 255, 256, 65535, int64_t(1) << 31, int64_t(1) << 40, int64_t(1) << 62,
                             INT64_MAX, INT64_MIN};

int64_t edgeInt(Rng &rng) {
  if (rng() % 2)
    return kEdgeInts[rng() % (sizeof(kEdgeInts) / sizeof(kEdgeInts[0]))];
  return int64_t(rng() % 9) - 2;
}

Bytes readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Byte-level mutations, one to four of them.
void mutateBytes(Bytes &b, const std::vector<Bytes> &seeds, Rng &rng) {
  const int n = 1 + int(rng() % 4);
  for (int k = 0; k < n; ++k) {
    const size_t at = b.empty() ? 0 : rng() % b.size();
    switch (rng() % 7) {
    case 0:
      if (!b.empty())
        b[at] ^= uint8_t(1u << (rng() % 8));
      break;
    case 1: {
      static const uint8_t edge[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE};
      if (!b.empty())
        b[at] = edge[rng() % sizeof(edge)];
      break;
    }
    case 2:
      b.insert(b.begin() + long(at), 1 + rng() % 8, uint8_t(rng()));
      break;
    case 3:
      if (!b.empty())
        b.erase(b.begin() + long(at), b.begin() + long(std::min(b.size(), at + 1 + rng() % 64)));
      break;
    case 4:
      b.resize(at);
      break;
    case 5: { // a run of the input copied elsewhere
      if (b.size() < 2)
        break;
      const size_t from = rng() % b.size(), len = 1 + rng() % std::min<size_t>(64, b.size() - from);
      Bytes run(b.begin() + long(from), b.begin() + long(from + len));
      b.insert(b.begin() + long(rng() % b.size()), run.begin(), run.end());
      break;
    }
    case 6: { // the tail of another seed
      const Bytes &other = seeds[rng() % seeds.size()];
      if (other.empty())
        break;
      b.resize(at);
      b.insert(b.end(), other.begin() + long(rng() % other.size()), other.end());
      break;
    }
    }
  }
}

// Plans: fields mutated and re-encoded (a valid container with a correct checksum).
void mutatePlan(castor::plan::Plan &p, Rng &rng) {
  const int n = 1 + int(rng() % 3);
  for (int k = 0; k < n; ++k) {
    switch (rng() % 12) {
    case 0:
      if (p.tensors_size()) {
        auto *t = p.mutable_tensors(int(rng() % p.tensors_size()));
        if (t->shape_size())
          t->set_shape(int(rng() % t->shape_size()), edgeInt(rng));
        else
          t->add_shape(edgeInt(rng));
      }
      break;
    case 1:
      if (p.tensors_size())
        p.mutable_tensors(int(rng() % p.tensors_size()))->set_dtype(castor::plan::DType(rng() % 9));
      break;
    case 2:
      if (p.tensors_size())
        p.mutable_tensors(int(rng() % p.tensors_size()))->set_offset(uint64_t(edgeInt(rng)));
      break;
    case 3:
      if (p.tensors_size())
        p.mutable_tensors(int(rng() % p.tensors_size()))->set_bytes(uint64_t(edgeInt(rng)));
      break;
    case 4:
      p.set_arena_bytes(uint64_t(edgeInt(rng)));
      break;
    case 5:
      if (p.kernels_size()) {
        auto *kk = p.mutable_kernels(int(rng() % p.kernels_size()));
        if (kk->inputs_size())
          kk->set_inputs(int(rng() % kk->inputs_size()), uint32_t(rng() % (p.tensors_size() + 2)));
      }
      break;
    case 6:
      if (p.kernels_size()) {
        auto *kk = p.mutable_kernels(int(rng() % p.kernels_size()));
        if (kk->outputs_size())
          kk->set_outputs(int(rng() % kk->outputs_size()), uint32_t(rng() % (p.tensors_size() + 2)));
      }
      break;
    case 7:
      if (p.kernels_size() > 1)
        p.mutable_kernels()->SwapElements(int(rng() % p.kernels_size()), int(rng() % p.kernels_size()));
      break;
    case 8:
      if (p.kernels_size())
        p.mutable_kernels(int(rng() % p.kernels_size()))
            ->set_op(p.kernels(int(rng() % p.kernels_size())).op());
      break;
    case 9:
      if (p.kernels_size()) {
        auto *attrs = p.mutable_kernels(int(rng() % p.kernels_size()))->mutable_attrs();
        if (!attrs->empty()) {
          auto it = attrs->begin();
          std::advance(it, long(rng() % attrs->size()));
          castor::plan::Attr &a = it->second;
          if (a.has_ints() && a.ints().values_size())
            a.mutable_ints()->set_values(int(rng() % a.ints().values_size()), edgeInt(rng));
          else if (a.has_floats() && a.floats().values_size())
            a.mutable_floats()->set_values(int(rng() % a.floats().values_size()), double(edgeInt(rng)));
          else if (rng() % 2)
            a.mutable_ints()->add_values(edgeInt(rng)); // another kind of value than the op expects
          else
            a.set_s("");
        }
      }
      break;
    case 10:
      p.set_batch(edgeInt(rng));
      break;
    case 11:
      if (p.kernels_size())
        p.mutable_kernels()->DeleteSubrange(int(rng() % p.kernels_size()), 1);
      break;
    }
  }
}

// Safetensors: the header's numbers and strings changed, the length prefix kept right.
bool mutateSafetensorsHeader(Bytes &b, Rng &rng) {
  if (b.size() < 8)
    return false;
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t(b[size_t(i)]) << (8 * i);
  if (len > b.size() - 8)
    return false;
  std::string header(b.begin() + 8, b.begin() + 8 + long(len));
  const Bytes data(b.begin() + 8 + long(len), b.end());
  static const std::regex number("[0-9]+"), dtype("\"(F32|F16|BF16|F64|I64)\"");
  std::vector<std::pair<size_t, size_t>> spots;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), rng() % 3 ? number : dtype);
       it != std::sregex_iterator(); ++it)
    spots.push_back({size_t(it->position()), size_t(it->length())});
  if (spots.empty())
    return false;
  const auto [at, n] = spots[rng() % spots.size()];
  static const char *dtypes[] = {"\"F32\"", "\"F16\"", "\"BF16\"", "\"I64\"", "\"U8\"", "\"F8\"", "\"\"", "1"};
  std::string with = header[at] == '"' ? dtypes[rng() % 8] : std::to_string(uint64_t(edgeInt(rng)));
  header.replace(at, n, with);
  b.assign(8, 0);
  for (int i = 0; i < 8; ++i)
    b[size_t(i)] = uint8_t(uint64_t(header.size()) >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return true;
}

// One input through a reader: "" when accepted, else the refusal.
std::string runPlan(const Bytes &b) {
  auto p = castor::plan::decodePlan(b.data(), b.size());
  if (!p)
    return p.message();
  if (Status v = castor::plan::validatePlan(*p); !v)
    return v.message();
  // A valid plan whose arena a mutation made large would be allocated and zero-filled for real
  // (the backend refuses only what exceeds the machine's memory): that measures the page
  // allocator, not the reader. Such plans stop after validation.
  if (p->arena_bytes() > (uint64_t(64) << 20))
    return "valid, arena over the fuzzer's 64 MiB: not loaded";
  auto cpu = castor::createCpuBackend();
  if (Status s = cpu->load(*p); !s)
    return s.message();
  return "";
}

std::string runSafetensors(const Bytes &b) {
  auto f = castor::weights::parseSafetensors(b.data(), b.size(), "input");
  return f ? "" : f.message();
}

std::string runTuningCache(const Bytes &b) {
  const auto entries = castor::cuda::tuning::parseCacheText(std::string(b.begin(), b.end()));
  for (const auto &[key, e] : entries)
    if (key.empty() || e.candidate.empty() || key.find('\n') != std::string::npos)
      std::abort(); // the parser let a malformed line through
  return entries.empty() ? "no entry" : "";
}

std::string runImage(const Bytes &b) {
  auto size = castor::data::imageSize(b.data(), b.size(), "input");
  if (!size)
    return size.message();
  auto image = castor::data::decodeImage(b.data(), b.size(), 3, "input");
  if (!image)
    return image.message();
  std::vector<uint8_t> out(24 * 24 * 3);
  castor::data::resizedCrop(*image, {0, 0, image->width, image->height}, 24, 24, true, out.data());
  castor::data::resizeCenterCrop(*image, 28, 24, out.data());
  return "";
}

// Refusals with their numbers taken out, so that one kind of refusal counts once.
std::string messageKind(const std::string &m) {
  static const std::regex digits("[0-9]+");
  return std::regex_replace(m, digits, "N");
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: castor-runtime-fuzz plan|safetensors|image|tuning-cache ITERATIONS SEED... [--messages FILE]\n");
    return 2;
  }
  const std::string target = argv[1];
  const long iterations = std::atol(argv[2]);
  std::vector<Bytes> seeds;
  std::string messagesPath;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--messages") == 0 && i + 1 < argc) {
      messagesPath = argv[++i];
      continue;
    }
    seeds.push_back(readFile(argv[i]));
    if (seeds.back().empty()) {
      std::fprintf(stderr, "cannot read the seed %s\n", argv[i]);
      return 2;
    }
  }
  std::string (*run)(const Bytes &) = target == "plan"          ? runPlan
                                      : target == "safetensors" ? runSafetensors
                                      : target == "image"       ? runImage
                                      : target == "tuning-cache" ? runTuningCache
                                                                : nullptr;
  if (!run || seeds.empty()) {
    std::fprintf(stderr, "unknown target '%s' or no seeds\n", target.c_str());
    return 2;
  }
  std::vector<castor::plan::Plan> plans;
  if (target == "plan")
    for (const Bytes &s : seeds)
      if (auto p = castor::plan::decodePlan(s.data(), s.size()))
        plans.push_back(*p);
  Rng rng(20261201);
  long accepted = 0, refused = 0;
  std::map<std::string, long> kinds;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) {
    Bytes input = seeds[rng() % seeds.size()];
    const unsigned way = rng() % 4;
    if (target == "plan" && !plans.empty() && way != 0) {
      castor::plan::Plan p = plans[rng() % plans.size()];
      mutatePlan(p, rng);
      auto encoded = castor::plan::encodePlan(p);
      if (encoded)
        input = std::move(*encoded);
    } else if (!(target == "safetensors" && way != 0 && mutateSafetensorsHeader(input, rng))) {
      mutateBytes(input, seeds, rng);
    }
    const std::string m = run(input);
    if (m.empty()) {
      ++accepted;
    } else {
      ++refused;
      ++kinds[messageKind(m)];
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %ld inputs, %ld accepted, %ld refused, %zu distinct refusals, %.0f inputs/s, no crash\n",
              target.c_str(), iterations, accepted, refused, kinds.size(), seconds > 0 ? iterations / seconds : 0.0);
  if (!messagesPath.empty()) {
    std::FILE *f = std::fopen(messagesPath.c_str(), "w");
    for (const auto &[m, n] : kinds)
      std::fprintf(f, "%ld\t%s\n", n, m.c_str());
    if (f)
      std::fclose(f);
  }
  if (accepted == 0 || refused == 0) {
    std::printf("FAIL: the mutations %s\n", accepted == 0 ? "never produced an input the reader accepts"
                                                          : "never produced an input the reader refuses");
    return 1;
  }
  return 0;
}
