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

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace castor;
using namespace castor::cuda;

namespace {

int failures = 0;

#define CHECK_CUDA(call)                                                                                               \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) {                                                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                      \
      std::exit(2);                                                                                                    \
    }                                                                                                                  \
  } while (0)

const char *shortName(plan::DType dt) { return dt == plan::F16 ? "f16" : dt == plan::BF16 ? "bf16" : "f32"; }
size_t elementSize(plan::DType dt) { return dt == plan::F32 ? 4 : 2; }

float roundTo(plan::DType dt, float v) {
  if (dt == plan::F16)
    return __half2float(__float2half_rn(v));
  if (dt == plan::BF16)
    return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

double unitRoundoff(plan::DType dt) {
  return dt == plan::F16 ? std::ldexp(1.0, -11) : dt == plan::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -24);
}
double absoluteFloor(plan::DType dt) { return dt == plan::F16 ? std::ldexp(1.0, -25) : 0.0; }
double allowance(plan::DType dt) { return dt == plan::F32 ? 16.0 : 4.0; }

// The element of logical [d0,d1,d2,d3] index i as stored: channels-last [d0,d2,d3,d1] for rank 4.
size_t physicalIndex(const Shape &s, size_t i) {
  if (s.size() != 4)
    return i;
  const int64_t w = int64_t(i) % s[3], h = int64_t(i) / s[3] % s[2], c = int64_t(i) / (s[2] * s[3]) % s[1],
                n = int64_t(i) / (s[1] * s[2] * s[3]);
  return size_t(((n * s[2] + h) * s[3] + w) * s[1] + c);
}

std::vector<uint8_t> encode(plan::DType dt, const Shape &s, const std::vector<float> &v) {
  std::vector<uint8_t> bytes(v.size() * elementSize(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t p = physicalIndex(s, i);
    if (dt == plan::F16) {
      __half h = __float2half_rn(v[i]);
      std::memcpy(bytes.data() + 2 * p, &h, 2);
    } else if (dt == plan::BF16) {
      __nv_bfloat16 h = __float2bfloat16_rn(v[i]);
      std::memcpy(bytes.data() + 2 * p, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * p, &v[i], 4);
    }
  }
  return bytes;
}

std::vector<float> decode(plan::DType dt, const Shape &s, const std::vector<uint8_t> &bytes) {
  std::vector<float> v(bytes.size() / elementSize(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t p = physicalIndex(s, i);
    if (dt == plan::F16) {
      __half h;
      std::memcpy(&h, bytes.data() + 2 * p, 2);
      v[i] = __half2float(h);
    } else if (dt == plan::BF16) {
      __nv_bfloat16 h;
      std::memcpy(&h, bytes.data() + 2 * p, 2);
      v[i] = __bfloat162float(h);
    } else {
      std::memcpy(&v[i], bytes.data() + 4 * p, 4);
    }
  }
  return v;
}

// A reference result: each element's value, the sum of its terms' magnitudes and their count;
// `intermediate` |the convolution rounded before the accumulated gradient was added| where the
// composed data gradient rounds it (the convolution, then the add).
struct Reference {
  std::vector<double> value, magnitude, intermediate;
  std::vector<int64_t> terms;
  explicit Reference(size_t n = 0) : value(n, 0.0), magnitude(n, 0.0), terms(n, 0) {}
  void add(size_t i, double term) {
    value[i] += term;
    magnitude[i] += std::fabs(term);
    ++terms[i];
  }
};

struct Comparison {
  size_t outside = 0;
  double worst = 0;
};

Comparison compare(plan::DType dt, const std::vector<float> &got, const Reference &want) {
  Comparison c;
  const double u = unitRoundoff(dt), fp32 = std::ldexp(1.0, -24);
  const double sMax = want.magnitude.empty() ? 0.0 : *std::max_element(want.magnitude.begin(), want.magnitude.end());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(want.terms[i] + 1) * fp32 * want.magnitude[i];
    const double rounded = want.intermediate.empty() ? 0.0 : u * (want.intermediate[i] + g);
    const double bound = u * (std::fabs(want.value[i]) + g) + g + rounded + absoluteFloor(dt) + allowance(dt) * u * sMax;
    const double err = std::isfinite(got[i]) ? std::fabs(double(got[i]) - want.value[i]) : INFINITY;
    if (!(err <= bound))
      ++c.outside;
    c.worst = std::max(c.worst, bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0));
  }
  return c;
}

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
                if (b.pass == conv::Pass::Forward)
                  out.add(yi, double(x[xi]) * w[wi]);
                else if (b.pass == conv::Pass::BackwardData)
                  out.add(xi, double(y[yi]) * w[wi]);
                else
                  out.add(wi, double(y[yi]) * x[xi]);
              }
        }
  if (b.pass == conv::Pass::Forward && b.bias)
    for (size_t i = 0; i < out.value.size(); ++i)
      out.add(i, bias[i / size_t(P * Q) % size_t(b.K)]);
  if (b.pass == conv::Pass::BackwardData && b.accumulate) {
    out.intermediate.resize(out.value.size());
    for (size_t i = 0; i < out.value.size(); ++i) {
      out.intermediate[i] = std::fabs(out.value[i]);
      out.add(i, acc[i]);
    }
  }
  return out;
}

struct Layer {
  plan::Kernel k;
  std::vector<plan::Tensor> tensors = std::vector<plan::Tensor>(5); // x, w, y, bias, acc
  std::vector<Shape> shapes;
  TensorList in, out;
  uint64_t arenaBytes = 0;
};

void makeLayer(const Case &b, Layer &layer) {
  const int64_t P = outDim(b, b.H), Q = outDim(b, b.W);
  layer.shapes = {Shape{b.N, b.C, b.H, b.W}, Shape{b.K, b.groupWidth, b.R, b.R}, Shape{b.N, b.K, P, Q}, Shape{b.K},
                  Shape{b.N, b.C, b.H, b.W}};
  for (uint32_t i = 0; i < 5; ++i) {
    plan::Tensor &t = layer.tensors[i];
    t.set_id(i + 1);
    t.set_dtype(b.dt);
    for (int64_t d : layer.shapes[i])
      t.add_shape(d);
    t.set_kind(plan::Tensor::ACTIVATION);
    t.set_offset(layer.arenaBytes);
    t.set_bytes(uint64_t(countOf(t)) * elementSize(b.dt));
    layer.arenaBytes += (t.bytes() + 255) / 256 * 256;
  }
  const plan::Tensor *x = &layer.tensors[0], *w = &layer.tensors[1], *y = &layer.tensors[2],
                     *bias = &layer.tensors[3], *acc = &layer.tensors[4];
  plan::Kernel &k = layer.k;
  if (b.pass == conv::Pass::Forward) {
    k.set_op("conv2d");
    layer.in = {x, w};
    if (b.bias)
      layer.in.push_back(bias);
    layer.out = {y};
  } else if (b.pass == conv::Pass::BackwardData) {
    k.set_op("conv2d_backward_data");
    layer.in = {y, w};
    if (b.accumulate)
      layer.in.push_back(acc);
    layer.out = {x};
  } else {
    k.set_op("conv2d_backward_filter");
    layer.in = {x, y};
    layer.out = {w};
  }
  (*k.mutable_attrs())["strides"] = plan::intsAttr({b.stride, b.stride});
  (*k.mutable_attrs())["pads"] = plan::intsAttr({b.pad, b.pad, b.pad, b.pad});
  (*k.mutable_attrs())["dilations"] = plan::intsAttr({1, 1});
  (*k.mutable_attrs())["groups"] = plan::intAttr(b.C / b.groupWidth);
  k.set_name(b.name);
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
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    ctx.deviceName = prop.name;
    ctx.smCount = prop.multiProcessorCount;
    configureDevice(ctx.smCount);
    CHECK_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
    if (cudnnCreate(&ctx.cudnn) != CUDNN_STATUS_SUCCESS || cudnnSetStream(ctx.cudnn, ctx.stream) != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr, "cudnnCreate failed\n");
      std::exit(2);
    }
    ctx.workspaceLimit = size_t(256) << 20;
    ctx.channelsLastEnabled = true;
  }
  ~Harness() {
    cudnnDestroy(ctx.cudnn);
    cudaStreamDestroy(ctx.stream);
  }

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
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (size_t i = 0; i < 5; ++i) {
      host[i].resize(size_t(countOf(layer.tensors[i])));
      for (float &v : host[i])
        v = roundTo(b.dt, uni(rng));
      auto bytes = encode(b.dt, layer.shapes[i], host[i]);
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
    const std::string label = b.name + " " + shortName(b.dt) + " [" + (mode ? mode : "race") +
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
        return decode(b.dt, resultShape, bytes);
      };
      CHECK_CUDA(cudaMemset(ctx.ptr(result), 0xff, result->bytes())); // NaN bytes: unwritten elements fail
      Status s = (*fn)();
      CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
      const std::vector<float> got = download();
      count = got.size();
      const Comparison direct = s ? compare(b.dt, got, want) : Comparison{1, INFINITY};
      plantedOutside = compare(b.dt, got, planted).outside;
      CHECK_CUDA(cudaMemset(ctx.ptr(result), 0xff, result->bytes()));
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      CHECK_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
      Status sc = (*fn)();
      const cudaError_t ended = cudaStreamEndCapture(ctx.stream, &graph);
      Comparison replay{1, INFINITY};
      if (sc && ended == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
        CHECK_CUDA(cudaGraphLaunch(exec, ctx.stream));
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        replay = compare(b.dt, download(), want);
      }
      if (exec)
        cudaGraphExecDestroy(exec);
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError();
      worst = std::max(direct.worst, replay.worst);
      ok = s && sc && direct.outside == 0 && replay.outside == 0;
      if (!s)
        detail += " run: " + s.message();
      if (!sc)
        detail += " capture: " + sc.message();
      if (direct.outside || replay.outside)
        detail += " " + std::to_string(std::max(direct.outside, replay.outside)) + " elements outside the bound";
      // The planted bug must put at least half of the elements outside their bound.
      if (!(plantedOutside > 0 && plantedOutside * 2 >= count)) {
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
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s (%d SMs), cuDNN %zu\n", prop.name, prop.multiProcessorCount, cudnnGetVersion());
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
