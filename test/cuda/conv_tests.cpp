// GPU test of the convolution builder (runtime/cuda/conv*.cpp): forward, data gradient and
// filter gradient (also with an accumulated gradient added) in f16, bf16 and f32, NCHW and
// channels-last, through the cuDNN graph API and
// through the legacy API, each against a naive host reference in double precision — within a
// norm-wise relative error of 1e-2 (f16/bf16) and 1e-4 (f32: no TF32) — run directly and
// replayed from a captured CUDA graph. Then the tuning cache: the first round times every layer
// and writes the cache file; a second round, pointed at a copy of that file, must take every
// layer from it without timing, and still agree with the reference. A third round, on an empty
// cache, builds the cases while their runtime-compiled engines compile ahead on worker threads.
//
//   castor_conv_tests [--keep-cache]     (exit status 0 when everything passes)
//
// The cache lives in a fresh directory under $TMPDIR (removed at the end unless --keep-cache).

#include "cuda/cudnn/builders.h"
#include "cuda/cudnn/convolution.h"
#include "cuda/tuning/compile_ahead.h"
#include "cuda/tuning/tuner.h"
#include "cuda/tuning/tuning_cache.h"
#include "conv_reference.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>
#include <unistd.h>

using namespace castor;
using namespace castor::cuda;
using namespace castor::cuda::convtest;
namespace fs = std::filesystem;

namespace {

int failures = 0;

struct Geometry {
  const char *name;
  int64_t N, C, H, W, K, R, S, pad, stride, dilation, groups;
};

struct Case {
  Geometry g;
  conv::Pass pass;
  plan::DType dtype;
  bool nhwc;
  bool bias;
  bool accumulate = false; // data gradient plus an accumulated gradient (castor-fuse-gradient-add)
};

// The naive convolution in double: every (n, k, p, q, c, r, s) of the forward sum, accumulated
// into y, dx or dw.
void reference(const Case &cs, const Shape &ys, const std::vector<float> &x, const std::vector<float> &w,
               const std::vector<float> &y, const std::vector<float> &bias, std::vector<double> &out) {
  const Geometry &g = cs.g;
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups, P = ys[2], Q = ys[3];
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          const size_t yi = size_t(((n * g.K + k) * P + p) * Q + q);
          double acc = 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < g.R; ++r)
              for (int64_t s = 0; s < g.S; ++s) {
                const int64_t h = p * g.stride - g.pad + r * g.dilation;
                const int64_t ww = q * g.stride - g.pad + s * g.dilation;
                if (h < 0 || h >= g.H || ww < 0 || ww >= g.W)
                  continue;
                const int64_t ci = (k / Kg) * Cg + c;
                const size_t xi = size_t(((n * g.C + ci) * g.H + h) * g.W + ww);
                const size_t wi = size_t(((k * Cg + c) * g.R + r) * g.S + s);
                if (cs.pass == conv::Pass::Forward)
                  acc += double(x[xi]) * w[wi];
                else if (cs.pass == conv::Pass::BackwardData)
                  out[xi] += double(y[yi]) * w[wi];
                else
                  out[wi] += double(y[yi]) * x[xi];
              }
          if (cs.pass == conv::Pass::Forward)
            out[yi] = acc + (cs.bias ? double(bias[size_t(k)]) : 0.0);
        }
}

struct Result {
  double error = 0;
  bool ok = false;
};

double relativeError(const std::vector<float> &got, const std::vector<double> &want) {
  double d2 = 0, n2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - want[i];
    d2 += std::isfinite(got[i]) ? d * d : 1e300;
    n2 += want[i] * want[i];
  }
  return std::sqrt(d2 / (n2 > 0 ? n2 : 1));
}

class Harness {
public:
  Harness() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "no CUDA device\n");
      std::exit(2);
    }
    const cudaDeviceProp prop = openContext(ctx);
    std::printf("device %s (%d SMs), cuDNN %zu\n", prop.name, prop.multiProcessorCount, cudnnGetVersion());
  }
  ~Harness() { closeContext(ctx); }

  // The case's kernel and operands (x, w, y, bias, accumulated gradient) in one arena (see
  // conv_reference.h); sets the context's layout for the case.
  void makeLayer(const Case &cs, Layer &layer) {
    const Geometry &g = cs.g;
    const int64_t P = (g.H + 2 * g.pad - g.dilation * (g.R - 1) - 1) / g.stride + 1;
    const int64_t Q = (g.W + 2 * g.pad - g.dilation * (g.S - 1) - 1) / g.stride + 1;
    ctx.channelsLastEnabled = cs.nhwc;
    convtest::makeLayer(LayerSpec{cs.pass, cs.dtype, Shape{g.N, g.C, g.H, g.W}, Shape{g.K, g.C / g.groups, g.R, g.S},
                                  Shape{g.N, g.K, P, Q}, g.stride, g.pad, g.dilation, g.groups, cs.bias,
                                  cs.accumulate, g.name},
                        layer);
  }

  // The compilations the case's build would start (an accumulating data gradient's), as jobs.
  std::vector<tuning::CompileJob> compileJobs(const Case &cs) {
    Layer layer;
    makeLayer(cs, layer);
    return compileAheadConvolution(ctx, layer.k, layer.in, layer.out);
  }

  // Builds and runs one case through `api` ("graph" or "legacy"); true when it agrees.
  bool run(const Case &cs, const char *api, std::mt19937 &rng) {
    const Geometry &g = cs.g;
    Layer layer;
    makeLayer(cs, layer);
    const plan::Kernel &k = layer.k;
    std::vector<plan::Tensor> &tensors = layer.tensors;
    const TensorList &in = layer.in, &out = layer.out;
    const uint64_t offset = layer.arenaBytes;
    const Shape &ys = layer.shapes[2];
    const plan::Tensor *x = &tensors[0], *w = &tensors[1], *y = &tensors[2], *b = &tensors[3], *acc = &tensors[4];

    // Inputs: uniform in [-1, 1], rounded to the dtype; the output filled with NaN bytes.
    auto random = [&](const plan::Tensor &t) { return randomValues(cs.dtype, size_t(countOf(t)), rng); };
    std::vector<float> xv = random(*x), wv = random(*w), yv = random(*y), bv = random(*b), av = random(*acc);
    uint8_t *arena = nullptr;
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void **>(&arena), offset));
    ctx.arena = arena;
    CHECK_CUDA(cudaMemset(arena, 0xff, offset));
    auto upload = [&](const plan::Tensor *t, const std::vector<float> &v) {
      auto bytes = encode(cs.dtype, v, shapeOf(*t), ctx.channelsLast(t));
      CHECK_CUDA(cudaMemcpy(ctx.ptr(t), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    };
    for (const plan::Tensor *t : in)
      upload(t, t == x ? xv : t == w ? wv : t == y ? yv : t == acc ? av : bv);
    const plan::Tensor *result = out[0];
    const Shape rs = shapeOf(*result);
    std::vector<double> want(size_t(countOf(*result)), 0.0);
    reference(cs, ys, xv, wv, yv, bv, want);
    if (cs.accumulate)
      for (size_t i = 0; i < want.size(); ++i)
        want[i] += av[i];
    auto download = [&]() {
      std::vector<uint8_t> bytes(result->bytes());
      CHECK_CUDA(cudaMemcpy(bytes.data(), ctx.ptr(result), bytes.size(), cudaMemcpyDeviceToHost));
      return decode(cs.dtype, bytes, rs, ctx.channelsLast(result));
    };

    // Build (the graph path times its engines here), then run with a workspace of the size asked.
    ctx.workspaceBytes = 0;
    ctx.workspace = nullptr;
    const auto before = tuning::counts();
    Expected<RunFn> fn = Status::error("unbuilt");
    if (std::strcmp(api, "legacy") == 0 && cs.accumulate) {
      setenv("CASTOR_CONV_API", "legacy", 1); // the legacy convolution, then the add
      fn = buildConvolution(ctx, k, in, out);
      unsetenv("CASTOR_CONV_API");
    } else if (std::strcmp(api, "legacy") == 0) {
      auto p = conv::parse(ctx, k, in, out);
      fn = p ? conv::buildLegacy(ctx, *p) : Expected<RunFn>(p.status());
      if (fn && p)
        fn = conv::withBias(ctx, *p, std::move(*fn));
    } else {
      fn = buildConvolution(ctx, k, in, out);
    }
    const auto after = tuning::counts();
    std::string how = std::strcmp(api, "legacy") == 0   ? "legacy"
                      : after.fallback > before.fallback ? "FELL BACK to legacy"
                      : after.timed > before.timed       ? "timed"
                      : after.fromCache > before.fromCache ? "from cache"
                                                           : "?";
    lastHow = how;
    std::string label = std::string(g.name) + " " + k.op() + " " + plan::dtypeName(cs.dtype) +
                        (cs.nhwc ? " nhwc" : " nchw") + (cs.bias ? " +bias" : "") + (cs.accumulate ? " +acc" : "") + " [" + api + "]";
    bool ok = true;
    if (!fn) {
      std::printf("FAIL %-60s build: %s\n", label.c_str(), fn.message().c_str());
      ok = false;
    } else {
      if (ctx.workspaceBytes > 0)
        CHECK_CUDA(cudaMalloc(&ctx.workspace, ctx.workspaceBytes));
      const double tol = cs.dtype == plan::F32 ? 1e-4 : 1e-2;
      // Direct, then replayed from a captured CUDA graph.
      Status s;
      double e1 = 1e300, e2 = 1e300;
      const Capture capture = runDirectAndReplayed(
          ctx, *fn, result,
          [&](const Status &st) {
            s = st;
            e1 = s ? relativeError(download(), want) : 1e300;
          },
          [&] { e2 = relativeError(download(), want); });
      Status sc = capture.status;
      if (capture.ended != cudaSuccess && sc)
        sc = Status::error(std::string("cudaStreamEndCapture: ") + cudaGetErrorString(capture.ended));
      ok = s && sc && e1 <= tol && e2 <= tol;
      std::printf("%s %-60s %-20s error %.2e, graph replay %.2e (tol %.0e)%s%s\n", ok ? "ok  " : "FAIL", label.c_str(),
                  how.c_str(), e1, e2, tol, s ? "" : (" run: " + s.message()).c_str(),
                  sc ? "" : (" capture: " + sc.message()).c_str());
      if (ctx.workspace)
        CHECK_CUDA(cudaFree(ctx.workspace));
    }
    fn = Status::error("released"); // the RunFn's cuDNN objects die before the arena
    CHECK_CUDA(cudaFree(arena));
    ctx.arena = nullptr;
    ctx.workspace = nullptr;
    if (!ok)
      ++failures;
    return ok;
  }

  DeviceContext ctx;
  std::string lastHow;
};

std::vector<Case> cases() {
  const Geometry geometries[] = {
      // name, N, C, H, W, K, R, S, pad, stride, dilation, groups
      {"3x3 pad 1", 2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1},
      {"1x1 stride 2", 2, 32, 14, 14, 64, 1, 1, 0, 2, 1, 1},
      {"3x3 grouped 4", 2, 32, 10, 10, 32, 3, 3, 1, 1, 1, 4},
      {"3x3 stride 2 dilation 2", 2, 8, 13, 13, 16, 3, 3, 2, 2, 2, 1},
      {"7x7 stem C=3", 2, 3, 32, 32, 16, 7, 7, 3, 2, 1, 1},
  };
  struct Variant {
    plan::DType dtype;
    bool nhwc;
  };
  const Variant variants[] = {{plan::F16, true}, {plan::F16, false}, {plan::F32, true},
                              {plan::F32, false}, {plan::BF16, true}};
  std::vector<Case> out;
  for (const Geometry &g : geometries)
    for (const Variant &v : variants)
      for (conv::Pass pass : {conv::Pass::Forward, conv::Pass::BackwardData, conv::Pass::BackwardFilter})
        out.push_back(Case{g, pass, v.dtype, v.nhwc, false});
  // The bias, added in either layout.
  out.push_back(Case{geometries[0], conv::Pass::Forward, plan::F32, true, true});
  out.push_back(Case{geometries[0], conv::Pass::Forward, plan::F32, false, true});
  out.push_back(Case{geometries[1], conv::Pass::Forward, plan::F16, true, true});
  // The data gradient with an accumulated gradient: fused engines (f16, bf16) against the
  // convolution and the add; f32 and NCHW take the latter.
  for (int gi : {0, 1, 2})
    for (const Variant &v : {Variant{plan::F16, true}, Variant{plan::BF16, true}, Variant{plan::F32, false}})
      out.push_back(Case{geometries[gi], conv::Pass::BackwardData, v.dtype, v.nhwc, false, true});
  return out;
}

size_t cacheLines(const std::string &path) {
  std::ifstream in(path);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#')
      ++n;
  return n;
}

} // namespace

int main(int argc, char **argv) {
  const bool keep = argc > 1 && std::strcmp(argv[1], "--keep-cache") == 0;
  const fs::path root = fs::temp_directory_path() / ("castor-conv-tests-" + std::to_string(::getpid()));
  const fs::path dir1 = root / "first", dir2 = root / "second";
  fs::create_directories(dir1);
  setenv("CASTOR_TUNING_CACHE", dir1.c_str(), 1);
  unsetenv("CASTOR_CONV_API");

  Harness h;
  std::mt19937 rng(1234);
  const std::vector<Case> all = cases();

  std::printf("== legacy convolution API\n");
  for (const Case &cs : all)
    h.run(cs, "legacy", rng);

  std::printf("== cuDNN graph API, first round (cache in %s)\n", dir1.c_str());
  const auto start = tuning::counts();
  for (const Case &cs : all)
    h.run(cs, "graph", rng);
  const auto first = tuning::counts();
  const int timed1 = first.timed - start.timed, fellBack = first.fallback - start.fallback;
  const std::string path1 = tuning::cachePath(h.ctx);
  const size_t lines = cacheLines(path1);
  std::printf("%s; cache file %s: %zu entries\n", tuning::tuningSummary().c_str(), path1.c_str(), lines);
  // One entry per distinct layer signature (the bias cases share their convolution's).
  if (timed1 == 0 || !fs::exists(path1) || int(lines) != timed1) {
    std::printf("FAIL the cache file should hold one entry per layer timed (%d)\n", timed1);
    ++failures;
  }
  for (const auto &e : fs::directory_iterator(dir1))
    if (e.path().string().find(".tmp.") != std::string::npos) {
      std::printf("FAIL temporary file left behind: %s\n", e.path().c_str());
      ++failures;
    }
  if (fellBack > 0)
    std::printf("NOTE %d layers fell back to the legacy API (see the lines above)\n", fellBack);

  // Second round from a copy of the file in another directory: what it finds can only come from
  // reading the file (the in-memory cache is per directory).
  fs::create_directories(dir2);
  if (fs::exists(path1))
    fs::copy_file(path1, dir2 / fs::path(path1).filename(), fs::copy_options::overwrite_existing);
  // With the compiled engines' plans (tuning/compiled_plans.h): the second round's fused layers
  // run plans read back from disk, and must still agree with the reference.
  const fs::path plans1 = path1.substr(0, path1.size() - 4) + ".plans";
  size_t compiledPlans = 0;
  if (fs::exists(plans1)) {
    fs::copy(plans1, dir2 / plans1.filename(), fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    for (const auto &e : fs::directory_iterator(plans1))
      compiledPlans += e.path().extension() == ".bin";
  }
  std::printf("compiled engines kept on disk: %zu\n", compiledPlans);
  setenv("CASTOR_TUNING_CACHE", dir2.c_str(), 1);
  std::printf("== cuDNN graph API, second round (cache read from %s)\n", dir2.c_str());
  const auto before = tuning::counts();
  for (const Case &cs : all)
    h.run(cs, "graph", rng);
  const auto after = tuning::counts();
  std::printf("%s\n", tuning::tuningSummary().c_str());
  // One choice per case, two for a data gradient with an accumulated gradient (its plain
  // convolution's, then the group's).
  int expected = int(all.size()) - fellBack;
  for (const Case &cs : all)
    expected += cs.accumulate;
  if (after.timed != before.timed || after.fromCache - before.fromCache != expected ||
      after.fallback - before.fallback != fellBack) {
    std::printf("FAIL second round: %d layers timed, %d from cache, %d fallbacks (expected 0, %d, %d)\n",
                after.timed - before.timed, after.fromCache - before.fromCache, after.fallback - before.fallback,
                expected, fellBack);
    ++failures;
  }

  // Third round, on an empty cache: the compilations the builds would start, handed to a
  // CompileAhead (tuning/compile_ahead.h) whose workers compile them while the cases are built
  // and timed; each build waits for its layer's jobs, so the builds compile nothing themselves,
  // still agree with the reference, and the jobs leave the compiled plans the first round's
  // builds left.
  const fs::path dir3 = root / "ahead";
  fs::create_directories(dir3);
  setenv("CASTOR_TUNING_CACHE", dir3.c_str(), 1);
  std::vector<tuning::CompileJob> jobs;
  for (const Case &cs : all)
    for (auto &job : h.compileJobs(cs))
      jobs.push_back(std::move(job));
  const size_t jobCount = jobs.size();
  const auto before3 = tuning::counts();
  tuning::CompileAheadReport report;
  {
    tuning::CompileAhead ahead(std::move(jobs));
    for (const Case &cs : all)
      h.run(cs, "graph", rng);
    report = ahead.finish();
  }
  const auto after3 = tuning::counts();
  std::printf("%s\n", tuning::tuningSummary().c_str());
  auto planFiles = [](const fs::path &dir) {
    std::set<std::string> names;
    if (fs::exists(dir))
      for (const auto &e : fs::directory_iterator(dir))
        if (e.path().extension() == ".bin")
          names.insert(e.path().filename().string());
    return names;
  };
  const std::set<std::string> ahead = planFiles(dir3 / plans1.filename());
  std::printf("== compiled ahead: %zu jobs (%zu ran on %zu threads) in %.2f s, %zu plans on disk (the first round's "
              "builds left %zu)\n",
              jobCount, report.jobs, report.threads, report.seconds, ahead.size(), compiledPlans);
  if (ahead != planFiles(plans1) || ahead.empty() || report.jobs == 0) {
    std::printf("FAIL the compilations run ahead should leave the first round's compiled plans\n");
    ++failures;
  }
  if (after3.compiled != before3.compiled) {
    std::printf("FAIL third round: %d engines compiled by the builds beside the compilations ahead (expected 0)\n",
                after3.compiled - before3.compiled);
    ++failures;
  }

  if (!keep) {
    std::error_code ec;
    fs::remove_all(root, ec);
  } else {
    std::printf("cache kept in %s\n", root.c_str());
  }
  std::printf("%s: %d failure(s)\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
