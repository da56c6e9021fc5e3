// Pillow's resize passes (resample.h): one thread per output pixel of a job, blockIdx.y the job.
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/resample.h"

namespace castor::cuda {
namespace {

constexpr int kPrecision = 22;
constexpr int32_t kHalf = int32_t(1) << (kPrecision - 1);
constexpr int kMaxChannels = 4;

__device__ __forceinline__ uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecision;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

__global__ void resampleKernel(const ResampleJob *jobs, const int32_t *taps) {
  const ResampleJob job = jobs[blockIdx.y];
  const int64_t outputs = int64_t(job.rows) * job.cols;
  const int channels = job.channels;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < outputs; p += int64_t(gridDim.x) * blockDim.x) {
    const int y = int(p / job.cols), x = int(p % job.cols);
    uint8_t *o = job.dst + y * job.dstRowBytes + int64_t(job.flip ? job.cols - 1 - x : x) * channels;
    if (job.axis == ResampleJob::Copy) {
      const uint8_t *in = job.src + y * job.srcRowBytes + int64_t(x) * channels;
      for (int c = 0; c < channels; ++c)
        o[c] = in[c];
      continue;
    }
    int32_t acc[kMaxChannels];
    for (int c = 0; c < channels; ++c)
      acc[c] = kHalf;
    const int k = job.axis == ResampleJob::Horizontal ? x : y;
    const int first = taps[job.first + k] - job.shift, n = taps[job.count + k];
    const int32_t *w = taps + job.weights + int64_t(k) * job.stride;
    if (job.axis == ResampleJob::Horizontal) {
      const uint8_t *in = job.src + y * job.srcRowBytes + int64_t(first) * channels;
      for (int t = 0; t < n; ++t)
        for (int c = 0; c < channels; ++c)
          acc[c] += int32_t(in[t * channels + c]) * w[t];
    } else {
      const uint8_t *in = job.src + int64_t(first) * job.srcRowBytes + int64_t(x) * channels;
      for (int t = 0; t < n; ++t)
        for (int c = 0; c < channels; ++c)
          acc[c] += int32_t(in[t * job.srcRowBytes + c]) * w[t];
    }
    for (int c = 0; c < channels; ++c)
      o[c] = clip8(acc[c]);
  }
}

} // namespace

cudaError_t runResampleJobs(const ResampleJob *jobs, int jobCount, int64_t maxOutputs, const int32_t *taps,
                            cudaStream_t s) {
  if (jobCount <= 0 || maxOutputs <= 0)
    return cudaSuccess;
  const int threads = detail::kThreads;
  const int blocks = int(std::min<int64_t>((maxOutputs + threads - 1) / threads, 1024));
  resampleKernel<<<dim3(unsigned(blocks), unsigned(jobCount)), threads, 0, s>>>(jobs, taps);
  return cudaGetLastError();
}

} // namespace castor::cuda
