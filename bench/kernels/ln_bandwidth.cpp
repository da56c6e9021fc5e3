// Memory bandwidth of the layer norm kernels (runtime/cuda/kernels/layer_norm.h) on ConvNeXt-T's
// LayerNorms (rows = batch*H*W of C channels, channels-last) and ViT-S's (batch*197 tokens of
// 384): one JSON line per (shape, pass) with its time, the GB/s of the bytes the pass must move
// (forward: x read, y written; backward: dy and x read, dx written; the per-row statistics and
// parameters on top) and that as a fraction of the GPU's peak memory bandwidth (memory clock and
// bus width, or --peak-gbps). Data in the chosen dtype, parameters and statistics f32 (as under
// autocast). L2 is flushed before every timed call (a 256 MiB memset), so shapes smaller than L2
// are not timed out of it. A benchmark, not a test (correctness: castor_cuda_kernel_tests layer_norm).
//
//   castor-ln-bench [--batch 128] [--dtype f16|bf16|f32] [--iters 20] [--peak-gbps G]
#include "bandwidth_common.h"
#include "cuda/kernels/layer_norm.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace castor::bench;
using namespace castor::cuda;

namespace {

struct Shape {
  const char *model;
  int64_t perImage, C; // rows an image
};

} // namespace

int main(int argc, char **argv) {
  program = "castor-ln-bench";
  int batch = 128, iters = 20, dt = kF16;
  double peakGbps = 0;
  for (int i = 1; i < argc; ++i) {
    if (!sharedOption(argc, argv, i, batch, iters, dt, &peakGbps))
      dt = 0;
    if (dt == 0 || batch <= 0 || iters <= 0) {
      std::fprintf(stderr, "usage: castor-ln-bench [--batch N] [--dtype f16|bf16|f32] [--iters N] [--peak-gbps G]\n");
      return 2;
    }
  }
  const Device device = queryDevice();
  const cudaDeviceProp &prop = device.prop;
  if (peakGbps <= 0)
    peakGbps = device.peakGbps;
  configureDevice(prop.multiProcessorCount);
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"peak_gbps\": %.0f, \"batch\": %d, \"dtype\": \"%s\", "
              "\"iters\": %d, \"l2_flushed\": true}\n",
              prop.name, prop.multiProcessorCount, peakGbps, batch, dtypeName(dt), iters);

  const std::vector<Shape> shapes = {{"convnext_t stage1", 56 * 56, 96},
                                     {"convnext_t stage2", 28 * 28, 192},
                                     {"convnext_t stage3", 14 * 14, 384},
                                     {"convnext_t stage4", 7 * 7, 768},
                                     {"vit_s", 197, 384}};
  const size_t esize = elementSize(dt);
  size_t most = 0, mostRows = 0, mostC = 0;
  for (const Shape &sh : shapes) {
    most = std::max(most, size_t(batch) * size_t(sh.perImage) * size_t(sh.C));
    mostRows = std::max(mostRows, size_t(batch) * size_t(sh.perImage));
    mostC = std::max(mostC, size_t(sh.C));
  }
  std::vector<void *> buf(4); // x, y (also dx), dy, spare
  for (void *&p : buf) {
    check(cudaMalloc(&p, most * esize), "cudaMalloc");
    check(cudaMemset(p, 0x3c, most * esize), "cudaMemset"); // 1.0 in f16, a normal value in the others
  }
  float *params = nullptr, *stats = nullptr;
  check(cudaMalloc(reinterpret_cast<void **>(&params), 4 * mostC * sizeof(float)), "cudaMalloc");
  check(cudaMemset(params, 0, 4 * mostC * sizeof(float)), "cudaMemset");
  check(cudaMalloc(reinterpret_cast<void **>(&stats), 2 * mostRows * sizeof(float)), "cudaMalloc");
  L2Flush flush;
  flush.allocate();
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  for (const Shape &sh : shapes) {
    const int64_t rows = int64_t(batch) * sh.perImage, C = sh.C;
    Ref x{buf[0], dt}, y{buf[1], dt}, dy{buf[2], dt}, dx{buf[1], dt};
    Ref scale{params, kF32}, bias{params + mostC, kF32}, dscale{params + 2 * mostC, kF32},
        dbias{params + 3 * mostC, kF32};
    Ref mean{stats, kF32}, invStd{stats + mostRows, kF32};
    const size_t scratchBytes = layerNormBackwardScratch(dy, x, scale, mean, invStd, dx, dscale, dbias, rows, C);
    void *scratch = nullptr;
    check(cudaMalloc(&scratch, std::max<size_t>(scratchBytes, 1)), "cudaMalloc");
    // Statistics for the backward from a forward over the same x.
    check(layerNormForward(x, scale, bias, y, mean, invStd, rows, C, 1e-6, s), "forward");
    const double fwd =
        timeFlushed([&] { return layerNormForward(x, scale, bias, y, mean, invStd, rows, C, 1e-6, s); }, iters, s, flush);
    const double bwd = timeFlushed([&] {
      return layerNormBackward(dy, x, scale, mean, invStd, dx, dscale, dbias, rows, C, scratch, scratchBytes, s);
    }, iters, s, flush);
    const double data = double(rows) * double(C) * double(esize), rowStats = double(rows) * 2 * 4,
                 param = double(C) * 4;
    auto line = [&](const char *pass, double ms, double bytes) {
      const double gbps = bytes / (ms * 1e6);
      std::printf("{\"model\": \"%s\", \"rows\": %lld, \"C\": %lld, \"pass\": \"%s\", \"ms\": %.4f, \"GBps\": %.0f, "
                  "\"peak_fraction\": %.3f}\n",
                  sh.model, (long long)rows, (long long)C, pass, ms, gbps, gbps / peakGbps);
    };
    line("forward", fwd, 2 * data + rowStats + 2 * param);
    line("backward", bwd, 3 * data + rowStats + 3 * param);
    cudaFree(scratch);
  }
  return 0;
}
