// What the kernel bandwidth benchmarks (castor-bn-bench, castor-dwconv-bench, castor-ln-bench)
// share: the error check, the options they have in common, the GPU's peak memory bandwidth, and
// the mean time of a call with L2 flushed before each.
#pragma once

#include "cuda/kernels/types.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace castor::bench {

// The benchmark's name, the prefix of its error messages; main sets it first.
inline const char *program = "castor-bench";

inline void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", program, what, cudaGetErrorString(e));
    std::exit(1);
  }
}

inline const char *dtypeName(int dt) { return dt == cuda::kF16 ? "f16" : dt == cuda::kBF16 ? "bf16" : "f32"; }
inline size_t elementSize(int dt) { return dt == cuda::kF32 ? 4 : 2; }

// One of the options the benchmarks share at argv[i]: --batch N, --iters N, --dtype f16|bf16|f32
// (0 for another name) and, where `peakGbps` is given, --peak-gbps G; advances i past its value.
// False for any other argument or one without its value.
inline bool sharedOption(int argc, char **argv, int &i, int &batch, int &iters, int &dt, double *peakGbps) {
  const std::string a = argv[i];
  if (a == "--batch" && i + 1 < argc)
    batch = std::atoi(argv[++i]);
  else if (a == "--iters" && i + 1 < argc)
    iters = std::atoi(argv[++i]);
  else if (peakGbps && a == "--peak-gbps" && i + 1 < argc)
    *peakGbps = std::atof(argv[++i]);
  else if (a == "--dtype" && i + 1 < argc) {
    const std::string d = argv[++i];
    dt = d == "f32" ? cuda::kF32 : d == "bf16" ? cuda::kBF16 : d == "f16" ? cuda::kF16 : 0;
  } else
    return false;
  return true;
}

// Device 0 and its peak memory bandwidth from its memory clock and bus width.
struct Device {
  cudaDeviceProp prop{};
  int memClockKhz = 0, busBits = 0;
  double peakGbps = 0;
};

inline Device queryDevice() {
  Device d;
  check(cudaGetDeviceProperties(&d.prop, 0), "device");
  check(cudaDeviceGetAttribute(&d.memClockKhz, cudaDevAttrMemoryClockRate, 0), "memory clock");
  check(cudaDeviceGetAttribute(&d.busBits, cudaDevAttrGlobalMemoryBusWidth, 0), "bus width");
  // Double data rate: two transfers a clock.
  d.peakGbps = 2.0 * double(d.memClockKhz) * 1e3 * double(d.busBits) / 8.0 / 1e9;
  return d;
}

// A 256 MiB buffer whose memset before every timed call flushes L2, so that data smaller than
// L2 is not timed out of it.
struct L2Flush {
  size_t bytes = size_t(256) << 20;
  void *buffer = nullptr;
  void allocate() { check(cudaMalloc(&buffer, bytes), "cudaMalloc"); }
};

// Mean milliseconds of `run` (returning a cudaError_t) over `iters` calls after one warm-up, each
// after an L2 flush outside the timed interval; summed in `Real`.
template <typename Real = double, typename F>
Real timeFlushed(F &&run, int iters, cudaStream_t s, const L2Flush &flush) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(run(), "warm-up launch");
  Real total = 0;
  for (int i = 0; i < iters; ++i) {
    check(cudaMemsetAsync(flush.buffer, i & 0xff, flush.bytes, s), "flush");
    check(cudaEventRecord(a, s), "record");
    check(run(), "launch");
    check(cudaEventRecord(b, s), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    total += ms;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return total / Real(iters);
}

} // namespace castor::bench
