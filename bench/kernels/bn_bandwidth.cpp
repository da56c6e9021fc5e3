// Memory bandwidth of the own batch-norm-ReLU kernels (runtime/cuda/kernels/batch_norm_relu.h) on
// the shapes of ResNet-50's batch norms at a given batch, beside a device-to-device copy of the
// same bytes: one JSON line per shape and function with its time and GB/s. A benchmark, not a
// test: it asserts nothing about speed.
//
//   castor-bn-bench [--batch 256] [--dtype f16|bf16|f32] [--iters 20]
#include "bandwidth_common.h"
#include "cuda/kernels/batch_norm_relu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace castor::bench;
using namespace castor::cuda;

namespace {

// The kernels' clip bound for relu (ResNet-50's activation): none.
constexpr float kRelu = std::numeric_limits<float>::infinity();

struct Shape {
  const char *layer;
  int64_t hw, C;
  bool residual;
};

// Milliseconds per call of f, the median-free mean over `iters` calls after one warm-up.
template <typename F> float timeIt(F &&f, int iters, cudaStream_t s) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(f(), "warm-up launch");
  check(cudaEventRecord(a, s), "record");
  for (int i = 0; i < iters; ++i)
    check(f(), "launch");
  check(cudaEventRecord(b, s), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / float(iters);
}

} // namespace

int main(int argc, char **argv) {
  program = "castor-bn-bench";
  int batch = 256, iters = 20, dt = kF16;
  for (int i = 1; i < argc; ++i) {
    if (!sharedOption(argc, argv, i, batch, iters, dt, nullptr))
      dt = 0;
    if (dt == 0 || batch <= 0 || iters <= 0) {
      std::fprintf(stderr, "usage: castor-bn-bench [--batch N] [--dtype f16|bf16|f32] [--iters N]\n");
      return 2;
    }
  }
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "device");
  configureDevice(sms);
  const size_t esize = elementSize(dt);
  const std::vector<Shape> shapes = {
      {"stem 112x112x64", 112 * 112, 64, false},   {"56x56x64", 56 * 56, 64, false},
      {"56x56x256 +z", 56 * 56, 256, true},        {"28x28x128", 28 * 28, 128, false},
      {"28x28x512 +z", 28 * 28, 512, true},        {"14x14x256", 14 * 14, 256, false},
      {"14x14x1024 +z", 14 * 14, 1024, true},      {"7x7x512", 7 * 7, 512, false},
      {"7x7x2048 +z", 7 * 7, 2048, true},
  };
  size_t most = 0;
  for (const Shape &sh : shapes)
    most = std::max(most, size_t(batch) * sh.hw * sh.C);
  std::vector<void *> buf(5);
  for (void *&p : buf) {
    check(cudaMalloc(&p, most * esize), "cudaMalloc");
    check(cudaMemset(p, 0x3c, most * esize), "cudaMemset"); // 1.0 in f16, a normal value in the others
  }
  uint8_t *mask = nullptr; // the ReLU's mask a forward with the residual records
  check(cudaMalloc(reinterpret_cast<void **>(&mask), most), "cudaMalloc");
  float *chan = nullptr;
  check(cudaMalloc(reinterpret_cast<void **>(&chan), 8 * 2048 * sizeof(float)), "cudaMalloc");
  check(cudaMemset(chan, 0, 8 * 2048 * sizeof(float)), "cudaMemset");
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  for (const Shape &sh : shapes) {
    const int64_t rows = int64_t(batch) * sh.hw, C = sh.C;
    const double bytes = double(rows) * double(C) * double(esize);
    void *ws = nullptr;
    check(cudaMalloc(&ws, bnReluWorkspaceBytes(rows, C)), "cudaMalloc");
    Ref x{buf[0], dt}, z{sh.residual ? buf[1] : nullptr, dt}, y{buf[2], dt}, dy{buf[3], dt}, dx{buf[4], dt};
    Ref dz{sh.residual ? buf[1] : nullptr, dt};
    float *scale = chan, *bias = chan + 2048, *mean = chan + 4096, *invStd = chan + 6144;
    float *dscale = chan + 2048, *dbias = chan + 6144; // the bench does not read them back
    const float copy = timeIt([&] { return cudaMemcpyAsync(y.p, x.p, size_t(bytes), cudaMemcpyDeviceToDevice, s); },
                              iters, s);
    const float fwd = timeIt(
        [&] { return bnReluForward(x, z, scale, bias, y, mean, invStd, nullptr, rows, C, 1e-5, kRelu, ws, s); }, iters,
        s);
    const float apply = timeIt(
        [&] { return bnApply(x, z, scale, bias, mean, invStd, y, rows, C, 1, true, kRelu, static_cast<float *>(ws), s); },
        iters, s);
    const float bwd = timeIt([&] {
      // Without residual the mask is recomputed from x (no y read).
      return bnReluBackward(dy, x, sh.residual ? y : Ref{}, nullptr, scale, bias, mean, invStd, dx, dz, dscale, dbias,
                            rows, C, kRelu, ws, s);
    }, iters, s);
    // With the residual: the forward recording the ReLU's mask, the backward reading it instead of y.
    const float fwdMask = !sh.residual ? 0.f : timeIt([&] {
      return bnReluForward(x, z, scale, bias, y, mean, invStd, mask, rows, C, 1e-5, kRelu, ws, s);
    }, iters, s);
    const float bwdMask = !sh.residual ? 0.f : timeIt([&] {
      return bnReluBackward(dy, x, Ref{}, mask, scale, bias, mean, invStd, dx, dz, dscale, dbias, rows, C, kRelu, ws, s);
    }, iters, s);
    // Bytes each must move at the least: the forward reads x twice (statistics, apply) and z,
    // writes y; the backward reads dy, x (and y after a residual) twice and writes dx (and dz).
    const double z1 = sh.residual ? 1 : 0;
    auto line = [&](const char *fn, float ms, double tensors) {
      std::printf("{\"shape\": \"%s\", \"rows\": %lld, \"C\": %lld, \"fn\": \"%s\", \"ms\": %.4f, \"GBps\": %.0f}\n",
                  sh.layer, (long long)rows, (long long)C, fn, ms, tensors * bytes / (ms * 1e6));
    };
    line("copy", copy, 2);
    line("forward", fwd, 3 + z1);
    line("apply", apply, 2 + z1);
    line("stats (forward - apply)", fwd - apply, 1);
    line("backward", bwd, 5 + 3 * z1);
    if (sh.residual) {
      const double maskTensors = 1.0 / 16; // a bit an element in f16/bf16, 4 bits in f32: 1/16 of the data
      line("forward recording the mask", fwdMask, 4 + maskTensors);
      line("backward from the mask", bwdMask, 6 + 2 * maskTensors);
    }
    cudaFree(ws);
  }
  return 0;
}
