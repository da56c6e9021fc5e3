// GPU test of Castor's depthwise convolution kernels (runtime/cuda/kernels/depthwise_conv.h).
//
// 1. The launch functions directly: forward (with and without the bias), data gradient (with and
//    without the accumulated gradient) and weight gradient, for kernel sizes 3, 5, 7, strides 1
//    and 2, f16, bf16 and f32, on odd and even sizes, C = 13 (scalar loads), 24, 40, 96, 384,
//    batch 1, 2 and 5, paddings 0, K/2 and K/2 + 1, and one case with misaligned operands (the
//    scalar path where C would allow 16-byte loads). Each element is checked against a plain
//    double-precision loop within the error bound of its computation:
//      |got - want| <= u_T (|want| + g) + g + a_T,  g = n 2^-24 S
//    where S is the sum of the magnitudes of the n terms (products, bias, accumulated gradient)
//    of that element: the kernels round each fp32 FMA once (error at most n 2^-24 S summed over
//    any order: the weight gradient's chunks and patches included), then round once into T
//    (u_T = 2^-11 f16, 2^-8 bf16, 2^-24 f32; a_T = 2^-25, half of f16's smallest subnormal).
//    The bound cannot hide a bug: every case also checks that the same comparison fails
//    against the reference computed with an off-by-one column (a planted indexing bug).
// 2. Through the convolution builder (runtime/cuda/cudnn/convolution.cpp) as a plan runs it:
//    CASTOR_CONV_DEPTHWISE=only (the kernels alone, the tuner's choice must be theirs),
//    directly and replayed from a captured CUDA graph; the tuner's race against cuDNN (either
//    may win: the result must agree); a layer the kernels do not take (dilation 2, a 9x9 kernel)
//    must still run, on cuDNN.
//
//   castor_depthwise_conv_tests        (exit status 0 when everything passes)
#include "cuda/cudnn/builders.h"
#include "cuda/cudnn/convolution.h"
#include "cuda/kernels/depthwise_conv.h"
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

struct References {
  Reference y, dx, dw;
};

// The three passes in double, NHWC x/dy/dx, w [C][K][K]; `shift` moves the column every tap reads
// or writes (0: the convolution; 1: a planted off-by-one).
References reference(const depthwise::Geometry &g, const std::vector<float> &x, const std::vector<float> &w,
                     const std::vector<float> &dy, int shift) {
  References r{Reference(size_t(g.N * g.P * g.Q * g.C)), Reference(size_t(g.N * g.H * g.W * g.C)),
               Reference(size_t(g.C * g.K * g.K))};
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q)
        for (int64_t c = 0; c < g.C; ++c) {
          const size_t yi = size_t(((n * g.P + p) * g.Q + q) * g.C + c);
          for (int rr = 0; rr < g.K; ++rr)
            for (int ss = 0; ss < g.K; ++ss) {
              const int64_t h = p * g.stride - g.padH + rr, ww = q * g.stride - g.padW + ss + shift;
              if (h < 0 || h >= g.H || ww < 0 || ww >= g.W)
                continue;
              const size_t xi = size_t(((n * g.H + h) * g.W + ww) * g.C + c);
              const size_t wi = size_t((c * g.K + rr) * g.K + ss);
              r.y.add(yi, double(x[xi]) * w[wi]);
              r.dx.add(xi, double(dy[yi]) * w[wi]);
              r.dw.add(wi, double(dy[yi]) * x[xi]);
            }
        }
  return r;
}

// Device buffers of one case; `offset` elements in (a misaligned operand when odd).
struct DeviceTensor {
  uint8_t *base = nullptr;
  size_t bytes = 0, offset = 0;
  int dt = kF32;
  DeviceTensor(int dtype, size_t count, size_t offsetElems) : dt(dtype) {
    offset = offsetElems * elementSize(dt);
    bytes = count * elementSize(dt);
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void **>(&base), bytes + offset + 16));
    CHECK_CUDA(cudaMemset(base, 0xff, bytes + offset + 16)); // NaN bytes: an unwritten element fails
  }
  ~DeviceTensor() { cudaFree(base); }
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;
  Ref ref() const { return Ref{base + offset, dt}; }
  void upload(const std::vector<float> &v) {
    auto b = encode(dt, v);
    CHECK_CUDA(cudaMemcpy(base + offset, b.data(), b.size(), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    std::vector<uint8_t> b(bytes);
    CHECK_CUDA(cudaMemcpy(b.data(), base + offset, bytes, cudaMemcpyDeviceToHost));
    return decode(dt, b);
  }
  void poison() { CHECK_CUDA(cudaMemset(base + offset, 0xff, bytes)); }
};

struct KernelShape {
  int64_t N, C, H, W;
  int padExtra; // padding K/2 + padExtra (-K/2: none)
  size_t offset; // elements every operand starts past its allocation's 256-byte alignment
};

// Checks one pass's result against the reference and against the planted one.
void check(const std::string &label, int dt, const std::vector<float> &got, const Reference &want,
           const Reference &planted) {
  const Comparison c = compare(dt, got, want), p = compare(dt, got, planted);
  const bool ok = c.outside == 0 && plantedCaught(p.outside, got.size());
  std::printf("%s %-62s worst error/bound %.3f; planted off-by-one outside the bound in %zu of %zu%s\n",
              ok ? "ok  " : "FAIL", label.c_str(), c.worst, p.outside, got.size(),
              c.outside ? (", " + std::to_string(c.outside) + " elements outside the bound").c_str() : "");
  if (!ok)
    ++failures;
}

void runKernelCase(int dt, int K, int stride, const KernelShape &s, std::mt19937 &rng, cudaStream_t stream) {
  depthwise::Geometry g;
  g.N = s.N, g.C = s.C, g.H = s.H, g.W = s.W, g.K = K, g.stride = stride;
  g.padH = g.padW = std::max(0, K / 2 + s.padExtra);
  g.P = (g.H + 2 * g.padH - K) / stride + 1;
  g.Q = (g.W + 2 * g.padW - K) / stride + 1;
  if (!depthwise::unsupported(g).empty()) {
    std::printf("FAIL unsupported geometry in the test: %s\n", depthwise::unsupported(g).c_str());
    ++failures;
    return;
  }
  const size_t nx = size_t(g.N * g.H * g.W * g.C), ny = size_t(g.N * g.P * g.Q * g.C), nw = size_t(g.C * K * K);
  const std::vector<float> x = randomValues(dt, nx, rng), w = randomValues(dt, nw, rng),
                           dy = randomValues(dt, ny, rng), bias = randomValues(dt, size_t(g.C), rng),
                           acc = randomValues(dt, nx, rng);
  const References want = reference(g, x, w, dy, 0), planted = reference(g, x, w, dy, 1);
  DeviceTensor dX(dt, nx, s.offset), dW(dt, nw, s.offset), dY(dt, ny, s.offset), dB(dt, size_t(g.C), s.offset),
      dAcc(dt, nx, s.offset), dOut(dt, std::max(nx, ny), s.offset), dDw(dt, nw, s.offset);
  dX.upload(x), dW.upload(w), dY.upload(dy), dB.upload(bias), dAcc.upload(acc);
  const std::string base = std::string(dtypeName(dt)) + " k" + std::to_string(K) + " s" + std::to_string(stride) +
                           " N" + std::to_string(g.N) + " C" + std::to_string(g.C) + " " + std::to_string(g.H) + "x" +
                           std::to_string(g.W) + " pad " + std::to_string(g.padH) +
                           (s.offset ? " misaligned" : "");
  auto outOf = [&](size_t n) {
    std::vector<float> v = dOut.download();
    v.resize(n);
    return v;
  };
  auto sync = [&](cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
      std::printf("FAIL %s %s: launch: %s\n", base.c_str(), what, cudaGetErrorString(e));
      ++failures;
      return false;
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return true;
  };

  // Forward, then with the bias; the tiles, then the row kernels where they take the layer (a
  // misaligned operand: the tiles again, which the row kernels hand it to).
  Reference yb = want.y, ybPlanted = planted.y;
  for (size_t i = 0; i < ny; ++i) {
    yb.add(i, bias[i % size_t(g.C)]);
    ybPlanted.add(i, bias[i % size_t(g.C)]);
  }
  Reference dxa = want.dx, dxaPlanted = planted.dx;
  for (size_t i = 0; i < nx; ++i) {
    dxa.add(i, acc[i]);
    dxaPlanted.add(i, acc[i]);
  }
  for (const depthwise::Kernel kernel : {depthwise::Kernel::Tiles, depthwise::Kernel::Rows}) {
    const bool rows = kernel == depthwise::Kernel::Rows;
    const bool rowsForward = depthwise::rowsUnsupported(g, depthwise::Pass::Forward, dt).empty();
    const bool rowsData = depthwise::rowsUnsupported(g, depthwise::Pass::BackwardData, dt).empty();
    const std::string tag = rows ? " [rows]" : "";
    if (!rows || rowsForward) {
      dOut.poison();
      if (sync(depthwise::forward(dX.ref(), dW.ref(), Ref{}, dOut.ref(), g, stream, kernel), "forward"))
        check(base + " forward" + tag, dt, outOf(ny), want.y, planted.y);
      dOut.poison();
      if (sync(depthwise::forward(dX.ref(), dW.ref(), dB.ref(), dOut.ref(), g, stream, kernel), "forward+bias"))
        check(base + " forward+bias" + tag, dt, outOf(ny), yb, ybPlanted);
    }
    // Data gradient, then with the accumulated gradient (in its own slot, then in dx's: in place).
    if (rows && !rowsData)
      continue;
    dOut.poison();
    if (sync(depthwise::backwardData(dY.ref(), dW.ref(), Ref{}, dOut.ref(), g, stream, kernel), "data gradient"))
      check(base + " data gradient" + tag, dt, outOf(nx), want.dx, planted.dx);
    dOut.poison();
    if (sync(depthwise::backwardData(dY.ref(), dW.ref(), dAcc.ref(), dOut.ref(), g, stream, kernel),
             "data gradient+acc"))
      check(base + " data gradient+acc" + tag, dt, outOf(nx), dxa, dxaPlanted);
    dOut.upload(acc);
    if (sync(depthwise::backwardData(dY.ref(), dW.ref(), dOut.ref(), dOut.ref(), g, stream, kernel),
             "data gradient+acc in place"))
      check(base + " data gradient+acc in place" + tag, dt, outOf(nx), dxa, dxaPlanted);
  }

  // Weight gradient, with exactly the workspace it asks for.
  const size_t wsBytes = depthwise::workspaceBytes(g, depthwise::Pass::BackwardFilter, dt);
  void *ws = nullptr;
  CHECK_CUDA(cudaMalloc(&ws, std::max<size_t>(wsBytes, 1)));
  CHECK_CUDA(cudaMemset(ws, 0xff, std::max<size_t>(wsBytes, 1)));
  dDw.poison();
  if (sync(depthwise::backwardFilter(dX.ref(), dY.ref(), dDw.ref(), g, ws, wsBytes, stream), "weight gradient"))
    check(base + " weight gradient", dt, dDw.download(), want.dw, planted.dw);
  // Too small a workspace is refused, not overrun.
  if (wsBytes > 0 &&
      depthwise::backwardFilter(dX.ref(), dY.ref(), dDw.ref(), g, ws, wsBytes - 1, stream) == cudaSuccess) {
    std::printf("FAIL %s weight gradient: ran with too small a workspace\n", base.c_str());
    ++failures;
  }
  cudaGetLastError();
  CHECK_CUDA(cudaFree(ws));
}

// --- Through the convolution builder -------------------------------------------------------------

struct BuilderCase {
  const char *name;
  conv::Pass pass;
  int dt;
  int64_t N, C, H, W;
  int K, stride, pad, dilation;
  bool bias, accumulate;
};

depthwise::Geometry geometryOf(const BuilderCase &b) {
  depthwise::Geometry g;
  g.N = b.N, g.C = b.C, g.H = b.H, g.W = b.W, g.K = b.K, g.stride = b.stride, g.padH = g.padW = b.pad;
  const int64_t span = int64_t(b.dilation) * (b.K - 1) + 1;
  g.P = (b.H + 2 * b.pad - span) / b.stride + 1;
  g.Q = (b.W + 2 * b.pad - span) / b.stride + 1;
  return g;
}

void makeLayer(const BuilderCase &b, Layer &layer) {
  const depthwise::Geometry g = geometryOf(b);
  convtest::makeLayer(LayerSpec{b.pass, b.dt, Shape{b.N, b.C, b.H, b.W}, Shape{b.C, 1, b.K, b.K},
                                Shape{b.N, b.C, g.P, g.Q}, b.stride, b.pad, b.dilation, b.C, b.bias, b.accumulate,
                                b.name},
                      layer);
}

// The reference of a builder case, dilation included (the kernels' reference does not take one).
Reference builderReference(const BuilderCase &b, const std::vector<float> &x, const std::vector<float> &w,
                           const std::vector<float> &y, const std::vector<float> &bias, const std::vector<float> &acc) {
  const depthwise::Geometry g = geometryOf(b);
  Reference out(b.pass == conv::Pass::Forward ? y.size() : b.pass == conv::Pass::BackwardData ? x.size() : w.size());
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q)
        for (int64_t c = 0; c < g.C; ++c) {
          const size_t yi = size_t(((n * g.P + p) * g.Q + q) * g.C + c);
          for (int r = 0; r < g.K; ++r)
            for (int s = 0; s < g.K; ++s) {
              const int64_t h = p * g.stride - g.padH + r * b.dilation, ww = q * g.stride - g.padW + s * b.dilation;
              if (h < 0 || h >= g.H || ww < 0 || ww >= g.W)
                continue;
              const size_t xi = size_t(((n * g.H + h) * g.W + ww) * g.C + c), wi = size_t((c * g.K + r) * g.K + s);
              addTap(out, b.pass, x, w, y, xi, wi, yi);
            }
        }
  if (b.pass == conv::Pass::Forward && b.bias)
    for (size_t i = 0; i < out.value.size(); ++i)
      out.add(i, bias[i % size_t(b.C)]);
  if (b.pass == conv::Pass::BackwardData && b.accumulate)
    addAccumulated(out, acc);
  return out;
}

class BuilderHarness {
public:
  BuilderHarness() {
    openContext(ctx);
    configureDevice(ctx.smCount);
    ctx.channelsLastEnabled = true;
  }
  ~BuilderHarness() { closeContext(ctx); }

  // Builds and runs the case (directly, then from a captured graph); `wantOwn`: 1 the tuner's
  // choice must be Castor's kernel, 0 it must not be, -1 either.
  void run(const BuilderCase &b, const char *mode, int wantOwn, std::mt19937 &rng) {
    Layer layer;
    makeLayer(b, layer);
    uint8_t *arena = nullptr;
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void **>(&arena), layer.arenaBytes));
    CHECK_CUDA(cudaMemset(arena, 0xff, layer.arenaBytes));
    ctx.arena = arena;
    // Channels-last storage of x/y/acc is the NHWC order the host vectors hold; w [C,1,K,K] is
    // [C][K][K] in either layout.
    std::vector<std::vector<float>> host(5);
    for (size_t i = 0; i < 5; ++i) {
      host[i] = randomValues(b.dt, size_t(countOf(layer.tensors[i])), rng);
      auto bytes = encode(b.dt, host[i]);
      CHECK_CUDA(cudaMemcpy(ctx.ptr(&layer.tensors[i]), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    }
    Reference want = builderReference(b, host[0], host[1], host[2], host[3], host[4]);
    const plan::Tensor *result = layer.out[0];
    ctx.workspace = nullptr;
    ctx.workspaceBytes = 0;
    ctx.buildingKernel = 0;
    ctx.tunedChoices.clear();
    if (mode)
      setenv("CASTOR_CONV_DEPTHWISE", mode, 1);
    else
      unsetenv("CASTOR_CONV_DEPTHWISE");
    Expected<RunFn> fn = buildConvolution(ctx, layer.k, layer.in, layer.out);
    unsetenv("CASTOR_CONV_DEPTHWISE");
    const std::string chosen = ctx.tunedChoices.count(0) ? ctx.tunedChoices[0] : "(untuned)";
    // Only the composed form rounds the convolution before the add.
    if (chosen.find("unfused:") == std::string::npos)
      want.intermediate.clear();
    const std::string label = std::string(b.name) + " " + dtypeName(b.dt) + " [" + (mode ? mode : "race") + "]";
    bool ok = bool(fn);
    std::string detail = fn ? "" : " build: " + fn.message();
    double worst = 0;
    if (fn) {
      if (ctx.workspaceBytes > 0)
        CHECK_CUDA(cudaMalloc(&ctx.workspace, ctx.workspaceBytes));
      auto download = [&]() {
        std::vector<uint8_t> bytes(result->bytes());
        CHECK_CUDA(cudaMemcpy(bytes.data(), ctx.ptr(result), bytes.size(), cudaMemcpyDeviceToHost));
        return decode(b.dt, bytes);
      };
      // In place: the accumulated gradient's slot is its own here, so dx starts as NaN bytes.
      Status s;
      Comparison direct, replay{1, INFINITY};
      const Status sc = runDirectAndReplayed(
                            ctx, *fn, result,
                            [&](const Status &st) {
                              s = st;
                              direct = s ? compare(b.dt, download(), want) : Comparison{1, INFINITY};
                            },
                            [&] { replay = compare(b.dt, download(), want); })
                            .status;
      worst = std::max(direct.worst, replay.worst);
      ok = s && sc && direct.outside == 0 && replay.outside == 0;
      if (!s)
        detail += " run: " + s.message();
      if (!sc)
        detail += " capture: " + sc.message();
      if (ctx.workspace)
        CHECK_CUDA(cudaFree(ctx.workspace));
    }
    const bool own = chosen.rfind("castor:dwconv", 0) == 0;
    if ((wantOwn == 1 && !own) || (wantOwn == 0 && own)) {
      ok = false;
      detail += wantOwn ? " (expected Castor's kernel)" : " (expected cuDNN)";
    }
    std::printf("%s %-48s chose %-40s worst error/bound %.3f%s\n", ok ? "ok  " : "FAIL", label.c_str(),
                chosen.c_str(), worst, detail.c_str());
    if (!ok)
      ++failures;
    fn = Status::error("released");
    CHECK_CUDA(cudaFree(arena));
    ctx.arena = nullptr;
    ctx.workspace = nullptr;
  }

  DeviceContext ctx;
};

} // namespace

int main() {
  const cudaDeviceProp prop = firstDevice();
  configureDevice(prop.multiProcessorCount);
  // The tuning cache in memory only: the race below is timed afresh.
  setenv("CASTOR_TUNING_CACHE", "off", 1);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 rng(2024);

  std::printf("== the launch functions against a double-precision loop\n");
  const KernelShape shapes[] = {
      {1, 13, 11, 13, 0, 0},   // odd sizes, C not a multiple of 8: scalar loads
      {5, 96, 15, 15, 0, 0},   // batch 5, patches of 8 past the edge
      {1, 384, 14, 14, 0, 0},  // batch 1, patches of 7
      {1, 96, 28, 28, 0, 0},   // several tiles a row
      {5, 40, 9, 10, -10, 0},  // no padding; C = 40 (blocks of 40 or 8 channels)
      {2, 24, 7, 7, 1, 0},     // padding K/2 + 1
      {2, 48, 9, 11, 0, 1},    // misaligned operands: the scalar path with C a multiple of 8
      {2, 144, 21, 19, 0, 0},  // rows: two channel blocks of 72 channels, strips and columns past the edge
      {1, 2, 17, 30, 0, 0},    // rows: one channel vector, many column groups
  };
  for (int dt : {kF16, kBF16, kF32})
    for (int K : {3, 5, 7})
      for (int stride : {1, 2})
        for (const KernelShape &s : shapes)
          runKernelCase(dt, K, stride, s, rng, stream);

  std::printf("== through the convolution builder\n");
  BuilderHarness h;
  const BuilderCase forced[] = {
      {"forward k7 +bias", conv::Pass::Forward, kF16, 2, 96, 14, 14, 7, 1, 3, 1, true, false},
      {"forward k3 s2", conv::Pass::Forward, kBF16, 2, 32, 15, 15, 3, 2, 1, 1, false, false},
      {"data gradient k5 s2 +acc", conv::Pass::BackwardData, kBF16, 2, 48, 14, 14, 5, 2, 2, 1, false, true},
      {"data gradient k7", conv::Pass::BackwardData, kF16, 1, 40, 9, 9, 7, 1, 3, 1, false, false},
      {"weight gradient k5 s2", conv::Pass::BackwardFilter, kF32, 3, 24, 13, 13, 5, 2, 2, 1, false, false},
      {"weight gradient k7", conv::Pass::BackwardFilter, kF16, 4, 96, 14, 14, 7, 1, 3, 1, false, false},
  };
  for (const BuilderCase &b : forced)
    h.run(b, "only", 1, rng);
  for (const BuilderCase &b : forced)
    h.run(b, nullptr, -1, rng);
  // Layers the kernels do not take run on cuDNN, even when the kernels are forced.
  const BuilderCase others[] = {
      {"dilation 2", conv::Pass::Forward, kF16, 2, 32, 14, 14, 3, 1, 2, 2, false, false},
      {"kernel 9", conv::Pass::BackwardFilter, kF16, 2, 32, 14, 14, 9, 1, 4, 1, false, false},
  };
  for (const BuilderCase &b : others)
    h.run(b, "only", 0, rng);

  std::printf("%s\n", tuning::tuningSummary().c_str());
  cudaStreamDestroy(stream);
  if (failures) {
    std::printf("%d FAILED\n", failures);
    return 1;
  }
  std::printf("all passed\n");
  return 0;
}
