// GPU test of grouped convolutions (group width 24 as RegNet's, and 8; groups = C, depthwise, is
// depthwise_conv_tests.cpp's) through the convolution builder (runtime/cuda/cudnn/convolution.cpp)
// as a plan runs them, channels-last, f16/bf16/f32, stride 1 and 2, the three passes, the
// forward with a bias and the data gradient with an accumulated gradient, in three modes:
//   CASTOR_CONV_LEGACY=only  the legacy API's algorithms alone (the tuner's choice must be one:
//                            "legacy:..." or, with the add, "unfused:legacy:...");
//   CASTOR_CONV_LEGACY=off   the graph API's engines (the choice must not be a legacy one);
//   CASTOR_CONV_LEGACY=race  both race; either may win (unset is off).
// Each result, run directly and replayed from a captured CUDA graph, is checked element by
// element against a double-precision loop within the bound of its computation:
//   |got - want| <= u_T (|want| + g) + g + a_T + k_T u_T Smax,   g = (n + 1) 2^-24 S
// where S is the sum of the magnitudes of the element's n terms and Smax the largest S of the
// output: fp32 accumulation in any order (g), one rounding into T (u_T = 2^-11 f16, 2^-8 bf16,
// 2^-24 f32; a_T = 2^-25 for f16's subnormals), and an allowance for what cuDNN may do beyond
// that: reduced-precision reductions of partial sums in f16/bf16 (k = 4) and the transforms of
// FFT and Winograd algorithms in f32 (k = 16). The bound cannot hide a bug: every case also
// checks that the comparison fails against the reference with an off-by-one column.
// Then the tuning cache by name: each layer built again in the `only` mode must be rebuilt from
// its cached choice (the legacy candidate of that name), untimed, and still agree.
//
//   castor_grouped_conv_tests        (exit status 0 when everything passes)
#include "cuda/cudnn/builders.h"
#include "cuda/cudnn/convolution.h"
#include "cuda/tuning/tuner.h"
#include "conv_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace castor;
using namespace castor::cuda;
using namespace castor::cuda::convtest;

namespace {

int failures = 0;

// cuDNN's allowance beyond the bound of one fp32 accumulation (conv_reference.h's k): reduced-
// precision reductions of partial sums in f16/bf16, FFT and Winograd transforms in f32.
double allowance(plan::DType dt) { return dt == plan::F32 ? 16.0 : 4.0; }

struct Case {
  std::string name;
  conv::Pass pass;
  plan::DType dt;
  int64_t N, C, H, W, K, groupWidth;
  int R, stride, pad;
  bool bias, accumulate;
};

int64_t outDim(const Case &b, int64_t in) { return (in + 2 * b.pad - b.R) / b.stride + 1; }

// The case's result in double (logical NCHW x/dy/dx/y, KCRS w); `shift` moves the column of x
// every tap reads (0: the convolution; 1: a planted off-by-one).
Reference reference(const Case &b, const std::vector<float> &x, const std::vector<float> &w,
                    const std::vector<float> &y, const std::vector<float> &bias, const std::vector<float> &acc,
                    int shift) {
  const int64_t P = outDim(b, b.H), Q = outDim(b, b.W), groups = b.C / b.groupWidth, Cg = b.groupWidth,
                Kg = b.K / groups;
  Reference out(b.pass == conv::Pass::Forward ? y.size() : b.pass == conv::Pass::BackwardData ? x.size() : w.size());
  for (int64_t n = 0; n < b.N; ++n)
    for (int64_t k = 0; k < b.K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          const size_t yi = size_t(((n * b.K + k) * P + p) * Q + q);
          for (int64_t c = 0; c < Cg; ++c)
            for (int r = 0; r < b.R; ++r)
              for (int s = 0; s < b.R; ++s) {
                const int64_t h = p * b.stride - b.pad + r, ww = q * b.stride - b.pad + s + shift;
                if (h < 0 || h >= b.H || ww < 0 || ww >= b.W)
                  continue;
                const int64_t ci = (k / Kg) * Cg + c;
                const size_t xi = size_t(((n * b.C + ci) * b.H + h) * b.W + ww);
                const size_t wi = size_t(((k * Cg + c) * b.R + r) * b.R + s);
                addTap(out, b.pass, x, w, y, xi, wi, yi);
              }
        }
  if (b.pass == conv::Pass::Forward && b.bias)
    for (size_t i = 0; i < out.value.size(); ++i)
      out.add(i, bias[i / size_t(P * Q) % size_t(b.K)]);
  if (b.pass == conv::Pass::BackwardData && b.accumulate)
    addAccumulated(out, acc);
  return out;
}

void makeLayer(const Case &b, Layer &layer) {
  const int64_t P = outDim(b, b.H), Q = outDim(b, b.W);
  convtest::makeLayer(LayerSpec{b.pass, b.dt, Shape{b.N, b.C, b.H, b.W}, Shape{b.K, b.groupWidth, b.R, b.R},
                                Shape{b.N, b.K, P, Q}, b.stride, b.pad, 1, b.C / b.groupWidth, b.bias, b.accumulate,
                                b.name},
                      layer);
}

// Whether the layer's choice is a legacy algorithm: the last of the choices noted for it (the
// data gradient with the add notes its plain convolution's, then the group's).
bool isLegacy(const std::string &chosen) {
  const size_t comma = chosen.rfind(", ");
  std::string name = comma == std::string::npos ? chosen : chosen.substr(comma + 2);
  if (name.rfind("unfused:", 0) == 0)
    name = name.substr(8);
  return bool(conv::parseLegacyCandidateName(name));
}

class Harness {
public:
  Harness() {
    openContext(ctx);
    configureDevice(ctx.smCount);
    ctx.channelsLastEnabled = true;
  }
  ~Harness() { closeContext(ctx); }

  // Builds and runs the case in `mode` (CASTOR_CONV_LEGACY's value, null: unset); `wantLegacy`:
  // 1 the tuner's choice must be a legacy algorithm, 0 it must not be, -1 either; `wantCached`:
  // the choice must come from the cache, named `cachedName`. Returns the choice's name.
  std::string run(const Case &b, const char *mode, int wantLegacy, std::mt19937 &rng, bool wantCached = false,
                  const std::string &cachedName = "") {
    Layer layer;
    makeLayer(b, layer);
    uint8_t *arena = nullptr;
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void **>(&arena), layer.arenaBytes));
    CHECK_CUDA(cudaMemset(arena, 0xff, layer.arenaBytes));
    ctx.arena = arena;
    std::vector<std::vector<float>> host(5);
    for (size_t i = 0; i < 5; ++i) {
      host[i] = randomValues(b.dt, size_t(countOf(layer.tensors[i])), rng);
      auto bytes = encode(b.dt, host[i], layer.shapes[i], true);
      CHECK_CUDA(cudaMemcpy(ctx.ptr(&layer.tensors[i]), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    }
    Reference want = reference(b, host[0], host[1], host[2], host[3], host[4], 0);
    Reference planted = reference(b, host[0], host[1], host[2], host[3], host[4], 1);
    const plan::Tensor *result = layer.out[0];
    const Shape resultShape = layer.shapes[b.pass == conv::Pass::Forward ? 2 : b.pass == conv::Pass::BackwardData ? 0 : 1];
    ctx.workspace = nullptr;
    ctx.workspaceBytes = 0;
    ctx.buildingKernel = 0;
    ctx.tunedChoices.clear();
    if (mode)
      setenv("CASTOR_CONV_LEGACY", mode, 1);
    else
      unsetenv("CASTOR_CONV_LEGACY");
    const int cachedBefore = tuning::counts().fromCache;
    Expected<RunFn> fn = buildConvolution(ctx, layer.k, layer.in, layer.out);
    const bool fromCache = tuning::counts().fromCache > cachedBefore;
    unsetenv("CASTOR_CONV_LEGACY");
    const std::string chosen = ctx.tunedChoices.count(0) ? ctx.tunedChoices[0] : "(untuned)";
    // Only the composed form rounds the convolution before the add.
    if (chosen.find("unfused:") == std::string::npos) {
      want.intermediate.clear();
      planted.intermediate.clear();
    }
    const std::string label = b.name + " " + dtypeName(b.dt) + " [" + (mode ? mode : "race") +
                              (wantCached ? ", cached" : "") + "]";
    bool ok = bool(fn);
    std::string detail = fn ? "" : " build: " + fn.message();
    double worst = 0;
    size_t plantedOutside = 0, count = 0;
    if (fn) {
      if (ctx.workspaceBytes > 0)
        CHECK_CUDA(cudaMalloc(&ctx.workspace, ctx.workspaceBytes));
      auto download = [&]() {
        std::vector<uint8_t> bytes(result->bytes());
        CHECK_CUDA(cudaMemcpy(bytes.data(), ctx.ptr(result), bytes.size(), cudaMemcpyDeviceToHost));
        return decode(b.dt, bytes, resultShape, true);
      };
      Status s;
      Comparison direct, replay{1, INFINITY};
      const Status sc = runDirectAndReplayed(
                            ctx, *fn, result,
                            [&](const Status &st) {
                              s = st;
                              const std::vector<float> got = download();
                              count = got.size();
                              direct = s ? compare(b.dt, got, want, allowance(b.dt)) : Comparison{1, INFINITY};
                              plantedOutside = compare(b.dt, got, planted, allowance(b.dt)).outside;
                            },
                            [&] { replay = compare(b.dt, download(), want, allowance(b.dt)); })
                            .status;
      worst = std::max(direct.worst, replay.worst);
      ok = s && sc && direct.outside == 0 && replay.outside == 0;
      if (!s)
        detail += " run: " + s.message();
      if (!sc)
        detail += " capture: " + sc.message();
      if (direct.outside || replay.outside)
        detail += " " + std::to_string(std::max(direct.outside, replay.outside)) + " elements outside the bound";
      if (!plantedCaught(plantedOutside, count)) {
        ok = false;
        detail += " (the planted off-by-one passes the bound)";
      }
      if (ctx.workspace)
        CHECK_CUDA(cudaFree(ctx.workspace));
    }
    const bool legacy = isLegacy(chosen);
    if ((wantLegacy == 1 && !legacy) || (wantLegacy == 0 && legacy)) {
      ok = false;
      detail += wantLegacy ? " (expected a legacy algorithm)" : " (expected a graph-API engine)";
    }
    if (wantCached && (!fromCache || chosen != cachedName)) {
      ok = false;
      detail += " (expected '" + cachedName + "' from the cache, got '" + chosen + "'" +
                (fromCache ? "" : ", timed") + ")";
    }
    std::printf("%s %-58s chose %-36s worst error/bound %.3f, planted outside %zu/%zu%s\n", ok ? "ok  " : "FAIL",
                label.c_str(), chosen.c_str(), worst, plantedOutside, count, detail.c_str());
    if (!ok)
      ++failures;
    fn = Status::error("released");
    CHECK_CUDA(cudaFree(arena));
    ctx.arena = nullptr;
    ctx.workspace = nullptr;
    return chosen;
  }

  DeviceContext ctx;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  // name, pass, dtype, N, C, H, W, K, group width, R, stride, pad, bias, accumulate
  for (plan::DType dt : {plan::F16, plan::BF16, plan::F32})
    for (int64_t width : {24, 8})
      for (int stride : {1, 2})
        for (conv::Pass pass : {conv::Pass::Forward, conv::Pass::BackwardData, conv::Pass::BackwardFilter}) {
          const std::string name = std::string(pass == conv::Pass::Forward        ? "fprop"
                                               : pass == conv::Pass::BackwardData ? "dgrad"
                                                                                  : "wgrad") +
                                   " gw" + std::to_string(width) + " s" + std::to_string(stride);
          // 48 channels in groups of 24 (2 groups) or 8 (6), RegNet's 3x3 pad 1; odd sizes at stride 2.
          const int64_t side = stride == 1 ? 14 : 15;
          out.push_back(Case{name, pass, dt, 2, 48, side, side, 48, width, 3, stride, 1, false, false});
        }
  // The variants with the add: the forward's bias, the data gradient's accumulated gradient.
  out.push_back(Case{"fprop gw24 s1 +bias", conv::Pass::Forward, plan::F16, 2, 72, 9, 9, 72, 24, 3, 1, 1, true, false});
  out.push_back(Case{"fprop gw8 s2 +bias", conv::Pass::Forward, plan::F32, 2, 48, 15, 15, 48, 8, 3, 2, 1, true, false});
  out.push_back(Case{"dgrad gw24 s2 +acc", conv::Pass::BackwardData, plan::BF16, 2, 72, 14, 14, 72, 24, 3, 2, 1, false, true});
  out.push_back(Case{"dgrad gw8 s1 +acc", conv::Pass::BackwardData, plan::F16, 2, 48, 9, 9, 48, 8, 3, 1, 1, false, true});
  return out;
}

} // namespace

int main() {
  firstDevice();
  // The tuning cache in memory only: every race is timed afresh, and the cached round reads
  // what this process recorded.
  setenv("CASTOR_TUNING_CACHE", "off", 1);
  unsetenv("CASTOR_CONV_DEPTHWISE");
  std::mt19937 rng(2025);
  Harness h;
  const std::vector<Case> all = cases();
  std::printf("== CASTOR_CONV_LEGACY=only: the legacy API's algorithms alone\n");
  std::vector<std::string> chosen;
  for (const Case &b : all)
    chosen.push_back(h.run(b, "only", 1, rng));
  std::printf("== CASTOR_CONV_LEGACY=off: the graph API's engines alone\n");
  for (const Case &b : all)
    h.run(b, "off", 0, rng);
  std::printf("== the race\n");
  for (const Case &b : all)
    h.run(b, "race", -1, rng);
  std::printf("== the legacy choices rebuilt from the cache by name\n");
  for (size_t i = 0; i < all.size(); ++i)
    if (isLegacy(chosen[i]))
      h.run(all[i], "only", 1, rng, /*wantCached=*/true, chosen[i]);
  std::printf("%s\n", tuning::tuningSummary().c_str());
  if (failures) {
    std::printf("%d FAILED\n", failures);
    return 1;
  }
  std::printf("all passed\n");
  return 0;
}
