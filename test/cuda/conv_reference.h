// What the convolution GPU tests (conv_tests.cpp, depthwise_conv_tests.cpp,
// grouped_conv_tests.cpp) share: host values in a dtype and their device bytes (row-major or
// channels-last), a reference result in double with the error bound of its computation, the
// layer as a plan kernel over one arena, the device context they build it in, and a run direct
// and replayed from a captured CUDA graph.
//
// The bound of one element (compare()):
//   |got - want| <= u_T (|want| + g) + g + r + a_T [+ k u_T Smax],   g = (n + 1) 2^-24 S
// where S is the sum of the magnitudes of the element's n terms and Smax the largest S of the
// output: fp32 accumulation in any order (g), one rounding into T (u_T = 2^-11 f16, 2^-8 bf16,
// 2^-24 f32; a_T = 2^-25 for f16's subnormals), r = u_T (|intermediate| + g) where the composed
// data gradient rounds its convolution before the add, and the caller's allowance k.
#pragma once

#include "cuda/cudnn/convolution.h"

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

#define CHECK_CUDA(call)                                                                                               \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) {                                                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                      \
      std::exit(2);                                                                                                    \
    }                                                                                                                  \
  } while (0)

namespace castor::cuda::convtest {

// `dt`: plan::DType or cuda::DType (the same values); f16, bf16 or f32.
inline const char *dtypeName(int dt) { return dt == kF16 ? "f16" : dt == kBF16 ? "bf16" : "f32"; }
inline size_t elementSize(int dt) { return dt == kF32 ? 4 : 2; }

// Host value after rounding to the dtype.
inline float roundTo(int dt, float v) {
  if (dt == kF16)
    return __half2float(__float2half_rn(v));
  if (dt == kBF16)
    return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

// The unit roundoff of the output's dtype and its absolute floor (f16's subnormals).
inline double unitRoundoff(int dt) {
  return dt == kF16 ? std::ldexp(1.0, -11) : dt == kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -24);
}
inline double absoluteFloor(int dt) { return dt == kF16 ? std::ldexp(1.0, -25) : 0.0; }

// Uniform in [-1, 1], rounded to the dtype.
inline std::vector<float> randomValues(int dt, size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &e : v)
    e = roundTo(dt, uni(rng));
  return v;
}

// Where logical [A,B,C,D] row-major element i lies when stored channels-last ([A,C,D,B]); i
// itself for row-major storage or another rank.
inline size_t physicalIndex(const Shape &s, bool channelsLast, size_t i) {
  if (!channelsLast || s.size() != 4)
    return i;
  const int64_t d = int64_t(i) % s[3], c = int64_t(i) / s[3] % s[2], b = int64_t(i) / (s[2] * s[3]) % s[1],
                a = int64_t(i) / (s[1] * s[2] * s[3]);
  return size_t(((a * s[2] + c) * s[3] + d) * s[1] + b);
}

// Host values (logical order) to device bytes of the dtype, and back.
inline std::vector<uint8_t> encode(int dt, const std::vector<float> &v, const Shape &s = {},
                                   bool channelsLast = false) {
  std::vector<uint8_t> bytes(v.size() * elementSize(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t p = physicalIndex(s, channelsLast, i);
    if (dt == kF16) {
      __half h = __float2half_rn(v[i]);
      std::memcpy(bytes.data() + 2 * p, &h, 2);
    } else if (dt == kBF16) {
      __nv_bfloat16 h = __float2bfloat16_rn(v[i]);
      std::memcpy(bytes.data() + 2 * p, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * p, &v[i], 4);
    }
  }
  return bytes;
}

inline std::vector<float> decode(int dt, const std::vector<uint8_t> &bytes, const Shape &s = {},
                                 bool channelsLast = false) {
  std::vector<float> v(bytes.size() / elementSize(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t p = physicalIndex(s, channelsLast, i);
    if (dt == kF16) {
      __half h;
      std::memcpy(&h, bytes.data() + 2 * p, 2);
      v[i] = __half2float(h);
    } else if (dt == kBF16) {
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
// `intermediate` |the convolution rounded into the dtype before the last terms were added|, per
// element, where the composed data gradient rounds it (the convolution, then the accumulated
// gradient added by another kernel, as the CPU reference's unfused ops do).
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

// One tap of the convolution (x[xi] * w[wi] into y[yi]) in the pass's result: y, dx or dw.
inline void addTap(Reference &out, conv::Pass pass, const std::vector<float> &x, const std::vector<float> &w,
                   const std::vector<float> &y, size_t xi, size_t wi, size_t yi) {
  if (pass == conv::Pass::Forward)
    out.add(yi, double(x[xi]) * w[wi]);
  else if (pass == conv::Pass::BackwardData)
    out.add(xi, double(y[yi]) * w[wi]);
  else
    out.add(wi, double(y[yi]) * x[xi]);
}

// The accumulated gradient added to a data gradient, the convolution's magnitudes kept as the
// intermediate the composed form rounds.
inline void addAccumulated(Reference &out, const std::vector<float> &acc) {
  out.intermediate.resize(out.value.size());
  for (size_t i = 0; i < out.value.size(); ++i) {
    out.intermediate[i] = std::fabs(out.value[i]);
    out.add(i, acc[i]);
  }
}

// Elements outside their bound (see the top), and the largest ratio of an error to its bound.
struct Comparison {
  size_t outside = 0;
  double worst = 0;
};

// `allowance`: k of the bound's k u_T Smax term (0: none).
inline Comparison compare(int dt, const std::vector<float> &got, const Reference &want, double allowance = 0) {
  Comparison c;
  const double u = unitRoundoff(dt), fp32 = std::ldexp(1.0, -24);
  const double sMax = allowance == 0 || want.magnitude.empty()
                          ? 0.0
                          : *std::max_element(want.magnitude.begin(), want.magnitude.end());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(want.terms[i] + 1) * fp32 * want.magnitude[i];
    const double rounded = want.intermediate.empty() ? 0.0 : u * (want.intermediate[i] + g);
    double bound = u * (std::fabs(want.value[i]) + g) + g + rounded + absoluteFloor(dt);
    if (allowance != 0)
      bound += allowance * u * sMax;
    const double err = std::isfinite(got[i]) ? std::fabs(double(got[i]) - want.value[i]) : INFINITY;
    if (!(err <= bound))
      ++c.outside;
    c.worst = std::max(c.worst, bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0));
  }
  return c;
}

// Whether a planted bug is caught: it must put at least half of the `count` elements outside
// their bound.
inline bool plantedCaught(size_t outside, size_t count) { return outside > 0 && outside * 2 >= count; }

// A convolution layer as a plan kernel of one pass over tensors x, w, y, bias, acc (the
// accumulated gradient) in one arena of `arenaBytes`, each 256-byte aligned like a plan's.
struct Layer {
  plan::Kernel k;
  std::vector<plan::Tensor> tensors = std::vector<plan::Tensor>(5); // x, w, y, bias, acc
  std::vector<Shape> shapes;                                         // the same order
  TensorList in, out;
  uint64_t arenaBytes = 0;
};

struct LayerSpec {
  conv::Pass pass;
  int dt;
  Shape x, w, y; // logical NCHW, KCRS, NKPQ; the bias is [K], the accumulated gradient x's shape
  int64_t stride, pad, dilation, groups;
  bool bias, accumulate;
  std::string name;
};

inline void makeLayer(const LayerSpec &spec, Layer &layer) {
  layer.shapes = {spec.x, spec.w, spec.y, Shape{spec.y[1]}, spec.x};
  for (uint32_t i = 0; i < 5; ++i) {
    plan::Tensor &t = layer.tensors[i];
    t.set_id(i + 1);
    t.set_dtype(plan::DType(spec.dt));
    for (int64_t d : layer.shapes[i])
      t.add_shape(d);
    t.set_kind(plan::Tensor::ACTIVATION);
    t.set_offset(layer.arenaBytes);
    t.set_bytes(uint64_t(countOf(t)) * elementSize(spec.dt));
    layer.arenaBytes += (t.bytes() + 255) / 256 * 256;
  }
  const plan::Tensor *x = &layer.tensors[0], *w = &layer.tensors[1], *y = &layer.tensors[2],
                     *bias = &layer.tensors[3], *acc = &layer.tensors[4];
  plan::Kernel &k = layer.k;
  if (spec.pass == conv::Pass::Forward) {
    k.set_op("conv2d");
    layer.in = {x, w};
    if (spec.bias)
      layer.in.push_back(bias);
    layer.out = {y};
  } else if (spec.pass == conv::Pass::BackwardData) {
    k.set_op("conv2d_backward_data");
    layer.in = {y, w};
    if (spec.accumulate)
      layer.in.push_back(acc);
    layer.out = {x};
  } else {
    k.set_op("conv2d_backward_filter");
    layer.in = {x, y};
    layer.out = {w};
  }
  (*k.mutable_attrs())["strides"] = plan::intsAttr({spec.stride, spec.stride});
  (*k.mutable_attrs())["pads"] = plan::intsAttr({spec.pad, spec.pad, spec.pad, spec.pad});
  (*k.mutable_attrs())["dilations"] = plan::intsAttr({spec.dilation, spec.dilation});
  (*k.mutable_attrs())["groups"] = plan::intAttr(spec.groups);
  k.set_name(spec.name);
}

// Device 0's properties, its line printed ("no CUDA device": exit status 2).
inline cudaDeviceProp firstDevice() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    std::exit(2);
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s (%d SMs), cuDNN %zu\n", prop.name, prop.multiProcessorCount, cudnnGetVersion());
  return prop;
}

// The context on device 0: its name and SMs, a non-blocking stream and a cuDNN handle on it, a
// workspace limit of 256 MiB. Returns the device's properties.
inline cudaDeviceProp openContext(DeviceContext &ctx) {
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  ctx.deviceName = prop.name;
  ctx.smCount = prop.multiProcessorCount;
  CHECK_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  if (cudnnCreate(&ctx.cudnn) != CUDNN_STATUS_SUCCESS || cudnnSetStream(ctx.cudnn, ctx.stream) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate failed\n");
    std::exit(2);
  }
  ctx.workspaceLimit = size_t(256) << 20;
  return prop;
}

inline void closeContext(DeviceContext &ctx) {
  cudnnDestroy(ctx.cudnn);
  cudaStreamDestroy(ctx.stream);
}

// The capture of a run into a CUDA graph: the run's status while captured, and the end of the
// capture's.
struct Capture {
  Status status;
  cudaError_t ended;
};

// Runs `fn` with `result`'s bytes set to NaN first (an unwritten element fails), then
// `direct(status)`; then captures it into a CUDA graph and replays that the same way, then
// `replayed()` where the capture and the graph's instantiation succeeded.
template <typename Direct, typename Replayed>
Capture runDirectAndReplayed(DeviceContext &ctx, const RunFn &fn, const plan::Tensor *result, Direct &&direct,
                             Replayed &&replayed) {
  CHECK_CUDA(cudaMemset(ctx.ptr(result), 0xff, result->bytes()));
  Status s = fn();
  CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  direct(s);
  CHECK_CUDA(cudaMemset(ctx.ptr(result), 0xff, result->bytes()));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  Capture c{fn(), cudaSuccess};
  c.ended = cudaStreamEndCapture(ctx.stream, &graph);
  if (c.status && c.ended == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
    CHECK_CUDA(cudaGraphLaunch(exec, ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    replayed();
  }
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  cudaGetLastError();
  return c;
}

} // namespace castor::cuda::convtest
