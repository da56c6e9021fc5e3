// castor-run bench: the speed and memory of a training plan on one device, with synthetic data
// resident on it. One batch is uploaded once; after --warmup steps (on cuda the first runs
// eagerly and the second captures the step as a CUDA graph), --steps steps are timed one by one
// (CUDA events on cuda) and the median gives img/s. One more step runs kernel by kernel to time
// each kernel category. Peak memory is what the backend allocated (arena, workspaces, buffers),
// not the driver's context: comparable to torch.cuda.max_memory_allocated. The backend's
// kernelChoices give the way of each fused kernel and the tuner's choice of each tuned kernel
// (README.md, "bench").
#include "cli_output.h"
#include "commands.h"
#include "device.h"

#include "castor/backend.h"
#include "castor/state_names.h"
#include "core/session.h"
#include "data/image_encoding.h"
#include "data/synthetic.h"
#include "plan/fused_elementwise.h"
#include "plan/op_attrs.h"
#include "plan/plan_io.h"
#include "train/plan_index.h"
#include "train/scalar_output.h"
#include "train/training_signature.h"
#include "weights/init.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace castor::run {
namespace {

// Whether the run keeps to deterministic kernels: asked for (--deterministic or
// CASTOR_DETERMINISTIC, which the cuda backend reads), or the CPU reference, which always is.
bool runsDeterministic(const BenchOptions &o, const Backend &b) {
  const char *v = std::getenv("CASTOR_DETERMINISTIC");
  return o.deterministic || (v && *v && std::strcmp(v, "0") != 0) || b.name() == "cpu";
}

// bench's errors name the command.
int benchFail(const std::string &message) { return fail(message, "castor-run bench"); }

// One kernel in the report of how the backend runs the plan: its index, name and op, and the
// way or the tuner's choice.
struct KernelNote {
  int kernel = 0;
  std::string name, op, value;
};

// How the backend runs the plan (Backend::kernelChoices): the way of every fused kernel and the
// kernels with a tuner's choice.
struct ChoiceReport {
  std::vector<KernelNote> fused, tuned;
  std::map<std::string, int> ways;     // way -> fused kernels
  std::map<std::string, int> families; // the tuner's choices by the name's part before ':'
};

ChoiceReport reportChoices(const plan::Plan &p, const Backend &b) {
  const std::vector<KernelChoice> choices = b.kernelChoices();
  ChoiceReport r;
  for (int i = 0; i < p.kernels_size(); ++i) {
    const plan::Kernel &k = p.kernels(i);
    const KernelChoice c = size_t(i) < choices.size() ? choices[size_t(i)] : KernelChoice{};
    if (plan::isFusedKernel(k)) {
      const std::string way = c.way.empty() ? "unknown" : c.way;
      r.fused.push_back({i, k.name(), k.op(), way});
      ++r.ways[way];
    }
    if (!c.tuned.empty()) {
      r.tuned.push_back({i, k.name(), k.op(), c.tuned});
      for (size_t from = 0; from <= c.tuned.size();) {
        size_t to = c.tuned.find(", ", from);
        if (to == std::string::npos)
          to = c.tuned.size();
        const std::string one = c.tuned.substr(from, to - from);
        ++r.families[one.substr(0, one.find(':'))];
        from = to + 2;
      }
    }
  }
  return r;
}

// "a 3, b 1" of counts by name.
std::string countList(const std::map<std::string, int> &counts) {
  std::string out;
  for (const auto &[name, n] : counts)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, n);
  return out;
}

// The report's JSON members: "fusion": {...}, "tuning": [...].
// Generated kernels that move at least this much in a step count as large (the bandwidth target
// is set on large tensors; small groups are bound by their launch and tail).
constexpr uint64_t kLargeGroupBytes = uint64_t(64) << 20;

// Kernels, bytes, milliseconds of a set of generated kernels.
struct GroupTotals {
  int64_t kernels = 0;
  uint64_t bytes = 0;
  double ms = 0;
  std::string json() const {
    // No time where the backend profiles no kernel times (the CPU reference): null, not zero.
    const std::string time = ms > 0 ? fmt::format("{:.3f}", ms) : "null";
    const std::string rate = ms > 0 ? fmt::format("{:.1f}", double(bytes) / (ms * 1e6)) : "null";
    return fmt::format("\"kernels\": {}, \"bytes\": {}, \"ms\": {}, \"gb_per_s\": {}", kernels, bytes, time, rate);
  }
};

// The generated kernels (fused_elementwise) as a whole: how many, the bytes they read and write
// once each in a step, their time in the profiled step and the bandwidth that makes; then the same
// by group kind (plan::fusedGroupKind), and for each kind its large groups alone.
std::string generatedJson(const plan::Plan &p, const std::vector<std::pair<std::string, double>> &byOp,
                          const std::map<int, double> &byKernel) {
  GroupTotals all;
  std::map<std::string, GroupTotals> byKind;
  for (int i = 0; i < p.kernels_size(); ++i) {
    const plan::Kernel &k = p.kernels(i);
    if (k.op() != "fused_elementwise")
      continue;
    const uint64_t bytes = plan::fusedBytesMoved(p, k);
    auto t = byKernel.find(i);
    const double ms = t == byKernel.end() ? 0.0 : t->second;
    const std::string kind = plan::fusedGroupKind(p, k);
    for (GroupTotals *g : {&byKind[kind], bytes >= kLargeGroupBytes ? &byKind[kind + "_large"] : nullptr})
      if (g)
        g->kernels += 1, g->bytes += bytes, g->ms += ms;
    all.kernels += 1, all.bytes += bytes;
  }
  for (const auto &[op, t] : byOp)
    if (op == "fused_elementwise")
      all.ms = t;
  std::string kinds;
  for (const auto &[kind, g] : byKind)
    kinds += fmt::format("{}\"{}\": {{{}}}", kinds.empty() ? "" : ", ", kind, g.json());
  return fmt::format("\"generated\": {{{}, \"by_kind\": {{{}}}}}", all.json(), kinds);
}

std::string choicesJson(const ChoiceReport &r) {
  std::string ways, layers, tuned;
  for (const auto &[way, n] : r.ways)
    ways += fmt::format("{}{}: {}", ways.empty() ? "" : ", ", jsonString(way), n);
  auto entry = [](const KernelNote &n, const char *key) {
    return fmt::format("{{\"kernel\": {}, \"name\": {}, \"op\": {}, \"{}\": {}}}", n.kernel, jsonString(n.name),
                       jsonString(n.op), key, jsonString(n.value));
  };
  for (const KernelNote &n : r.fused)
    layers += (layers.empty() ? "" : ", ") + entry(n, "way");
  for (const KernelNote &n : r.tuned)
    tuned += (tuned.empty() ? "" : ", ") + entry(n, "choice");
  return fmt::format("\"fusion\": {{\"fused_kernels\": {}, \"ways\": {{{}}}, \"layers\": [{}]}}, \"tuning\": [{}]",
                     r.fused.size(), ways, layers, tuned);
}

} // namespace

int bench(const BenchOptions &o) {
  if (o.steps <= 0 || o.warmup < 0)
    return benchFail("--steps must be positive and --warmup non-negative");
  // The cold start: reading the plan, loading it (the tuning of its layers included), first step.
  const auto started = std::chrono::steady_clock::now();
  auto secondsSinceStart = [&]() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  // Where the load's seconds go: "plan", "backend", "session" (the backend's load: tuning and
  // compilation included; then the weights' initialization) and "inputs" (the synthetic batch).
  std::string loadPhases;
  double lastMark = 0;
  auto markPhase = [&](const char *phase) {
    const double now = secondsSinceStart();
    loadPhases += fmt::format("{}\"{}\": {:.2f}", loadPhases.empty() ? "" : ", ", phase, now - lastMark);
    lastMark = now;
  };
  auto read = plan::readPlanFile(o.plan);
  if (!read)
    return benchFail(read.message());
  plan::Plan p = std::move(*read);
  const train::PlanIndex index(p);
  const uint64_t predicted = p.predicted_peak_bytes(); // p moves into the session below
  auto bound = train::TrainingBindings::find(index);
  if (!bound)
    return benchFail("bench runs training plans: inputs \"images\" and \"labels\", output \"loss\"");
  if (!bound->batchAgrees())
    return benchFail("the plan's images and labels must share the batch (labels i64 [N])");
  const std::vector<int64_t> imageShape = train::shapeOf(*bound->images);
  const int64_t batch = imageShape[0];
  const int64_t perImage = *plan::elementCount(*bound->images) / batch;
  int64_t classes = train::lossClasses(index, bound->labels->id());
  if (classes <= 0)
    classes = 10;

  markPhase("plan");
  BackendOptions options;
  options.deterministic = o.deterministic;
  auto backend = createBackend(o.device, options);
  if (!backend)
    return benchFail(backend.message());
  markPhase("backend");
  SessionOptions so;
  so.seed = o.seed;
  auto paired = plan::weightsFileFor(p, o.plan, "");
  if (!paired)
    return benchFail(paired.message());
  so.weightsPath = *paired;
  auto created = Session::create(std::move(p), std::move(*backend), so);
  if (!created)
    return benchFail(created.message());
  Session &s = **created;
  markPhase("session");

  std::vector<double> imageValues;
  std::vector<int64_t> labelValues;
  data::syntheticBatch(o.seed, 0, batch, perImage, classes, imageValues, labelValues);
  // In the images input's dtype already, so that the session uploads it as it is.
  HostTensor in{names::kImages, data::hostImageDType(bound->images->dtype()), imageShape, {}};
  weights::encodeValues(in.dtype, imageValues, in.data);
  HostTensor lb{names::kLabels, plan::I64, {batch}, std::vector<uint8_t>(labelValues.size() * 8)};
  std::memcpy(lb.data.data(), labelValues.data(), lb.data.size());
  if (Status st = s.setInput(names::kImages, in); !st)
    return benchFail(st.message());
  if (Status st = s.setInput(names::kLabels, lb); !st)
    return benchFail(st.message());

  Backend &b = s.backend();
  markPhase("inputs");
  const double loadSeconds = secondsSinceStart();
  const ChoiceReport choices = reportChoices(s.plan(), b);
  const bool deterministic = runsDeterministic(o, b);
  double firstStepSeconds = 0; // when the first step's results were ready
  for (int64_t i = 0; i < o.warmup; ++i) {
    if (Status st = b.run(); !st)
      return benchFail(st.withContext(fmt::format("warm-up step {}", i + 1)).message());
    if (i == 0) {
      if (auto loss = train::scalarOutput(s, names::kLoss); !loss) // waits for the step
        return benchFail(loss.message());
      firstStepSeconds = secondsSinceStart();
    }
  }
  auto firstLoss = train::scalarOutput(s, names::kLoss);
  if (!firstLoss)
    return benchFail(firstLoss.message());
  std::vector<double> ms;
  for (int64_t i = 0; i < o.steps; ++i) {
    auto t = b.timedRun();
    if (!t)
      return benchFail(t.status().withContext(fmt::format("timed step {}", i + 1)).message());
    ms.push_back(*t);
    if (firstStepSeconds == 0)
      firstStepSeconds = secondsSinceStart(); // timedRun waits for its step
  }
  auto lastLoss = train::scalarOutput(s, names::kLoss);
  if (!lastLoss)
    return benchFail(lastLoss.message());
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                          : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  const double imgPerS = double(batch) * 1000.0 / median;
  auto categories = b.profileRun();
  std::vector<std::pair<std::string, double>> byCategory, byOp;
  std::map<int, double> byKernel;
  std::string profileNote;
  if (categories) {
    for (const auto &[name, t] : *categories)
      if (name.rfind("op:", 0) == 0)
        byOp.push_back({name.substr(3), t});
      else if (name.rfind("kernel:", 0) == 0)
        byKernel[std::atoi(name.c_str() + 7)] = t;
      else
        byCategory.push_back({name, t});
    std::sort(byOp.begin(), byOp.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  } else {
    profileNote = categories.status().message();
  }
  double kernelTotal = 0;
  for (const auto &[name, t] : byCategory)
    kernelTotal += t;
  const uint64_t peak = b.allocatedBytes();
  const double gib = double(peak) / double(uint64_t(1) << 30);
  // What the backend allocated by purpose, beside what the compiler predicted.
  std::string allocations;
  for (const auto &[purpose, bytes] : b.allocatedBytesByPurpose())
    allocations += fmt::format("{}\"{}\": {}", allocations.empty() ? "" : ", ", purpose, bytes);

  // Launches of one step, as the captured step holds them (null where no step was captured).
  const auto launches = b.launchesPerStep();
  const std::string launchesJson =
      launches ? fmt::format("{{\"kernels\": {}, \"memsets\": {}, \"copies\": {}, \"other\": {}}}", launches->kernels,
                             launches->memsets, launches->copies, launches->other)
               : "null";
  if (o.json) {
    std::string cats, ops;
    for (const auto &[name, t] : byCategory)
      cats += fmt::format("{}\"{}\": {:.3f}", cats.empty() ? "" : ", ", name, t);
    for (const auto &[name, t] : byOp)
      ops += fmt::format("{}\"{}\": {:.3f}", ops.empty() ? "" : ", ", name, t);
    fmt::print("{{\"plan\": \"{}\", \"device\": \"{}\", \"batch\": {}, \"steps\": {}, \"median_ms\": {:.3f}, "
               "\"min_ms\": {:.3f}, \"max_ms\": {:.3f}, \"img_per_s\": {:.1f}, \"peak_bytes\": {}, "
               "\"peak_gib\": {:.3f}, \"kernel_ms\": {{{}}}, \"op_ms\": {{{}}}, \"kernel_total_ms\": {:.3f}, "
               "\"allocated_bytes\": {{{}}}, \"predicted_peak_bytes\": {}, \"loss_first\": {}, "
               "\"loss_last\": {}, \"deterministic\": {}, \"load_s\": {:.2f}, \"load_phases_s\": {{{}}}, \"first_step_s\": {:.2f}, "
               "\"launches\": {}, {}, {}}}\n",
               o.plan, b.name(), batch, o.steps, median, sorted.front(), sorted.back(), imgPerS, peak, gib, cats, ops,
               kernelTotal, allocations, predicted, std::isfinite(*firstLoss) ? fmt::format("{:.6g}", *firstLoss) : "null",
               std::isfinite(*lastLoss) ? fmt::format("{:.6g}", *lastLoss) : "null", deterministic, loadSeconds,
               loadPhases, firstStepSeconds, launchesJson, choicesJson(choices), generatedJson(s.plan(), byOp, byKernel));
    return 0;
  }
  fmt::print("{} on {}: batch {}, {} timed steps after {} warm-up\n", o.plan, b.name(), batch, o.steps, o.warmup);
  fmt::print("  start      loaded in {:.2f} s (tuning included), first step done at {:.2f} s\n", loadSeconds,
             firstStepSeconds);
  fmt::print("  step time  median {:.3f} ms (min {:.3f}, max {:.3f})\n", median, sorted.front(), sorted.back());
  fmt::print("  throughput {:.1f} img/s{}\n", imgPerS, deterministic ? " (deterministic)" : "");
  fmt::print("  peak device memory {:.3f} GiB ({} bytes allocated by the backend)\n", gib, peak);
  if (predicted > 0 && peak > 0)
    fmt::print("  predicted by the compiler {:.3f} GiB (measured/predicted {:.3f})\n",
               double(predicted) / double(uint64_t(1) << 30), double(peak) / double(predicted));
  fmt::print("  loss {:.6g} after warm-up, {:.6g} at the end\n", *firstLoss, *lastLoss);
  if (launches)
    fmt::print("  a step launches {} kernels, {} memsets, {} copies ({} other graph nodes)\n", launches->kernels,
               launches->memsets, launches->copies, launches->other);
  if (choices.fused.empty())
    fmt::print("  fused kernels: none\n");
  else
    fmt::print("  fused kernels {} by way: {}\n", choices.fused.size(), countList(choices.ways));
  if (choices.tuned.empty())
    fmt::print("  tuned kernels: none\n");
  else
    fmt::print("  tuned kernels {} (choices: {})\n", choices.tuned.size(), countList(choices.families));
  if (!profileNote.empty())
    fmt::print("  kernel times: {}\n", profileNote);
  else {
    fmt::print("  kernel time by category (one step, kernel by kernel, {:.3f} ms in all):\n", kernelTotal);
    for (const auto &[name, t] : byCategory)
      fmt::print("    {:<12} {:9.3f} ms  {:5.1f}%\n", name, t, kernelTotal > 0 ? 100.0 * t / kernelTotal : 0.0);
    fmt::print("  the most expensive ops:\n");
    for (size_t i = 0; i < byOp.size() && i < 8; ++i)
      fmt::print("    {:<32} {:9.3f} ms\n", byOp[i].first, byOp[i].second);
  }
  return 0;
}

} // namespace castor::run
