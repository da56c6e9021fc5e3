// Layout conversion between the plan's row-major rank-4 tensors and the backend's channels-last
// storage: runs when the host uploads or downloads a tensor, not inside a training step.
#include "cuda/kernels/layout.h"

#include <algorithm>
#include <cstdint>

namespace castor::cuda {
namespace {

template <typename T, bool ToChannelsLast>
__global__ void reorder(const T *__restrict__ src, T *__restrict__ dst, int64_t N, int64_t C, int64_t HW) {
  const int64_t total = N * C * HW;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    // i indexes the destination.
    if (ToChannelsLast) {
      const int64_t c = i % C, hw = (i / C) % HW, n = i / (C * HW);
      dst[i] = src[(n * C + c) * HW + hw];
    } else {
      const int64_t hw = i % HW, c = (i / HW) % C, n = i / (C * HW);
      dst[i] = src[(n * HW + hw) * C + c];
    }
  }
}

template <bool ToChannelsLast>
cudaError_t launchReorder(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                          cudaStream_t s) {
  const int64_t total = N * C * HW;
  if (total == 0)
    return cudaSuccess;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 1 << 16));
  switch (elemBytes) {
  case 2:
    reorder<uint16_t, ToChannelsLast><<<blocks, threads, 0, s>>>(static_cast<const uint16_t *>(src),
                                                                  static_cast<uint16_t *>(dst), N, C, HW);
    break;
  case 4:
    reorder<uint32_t, ToChannelsLast><<<blocks, threads, 0, s>>>(static_cast<const uint32_t *>(src),
                                                                  static_cast<uint32_t *>(dst), N, C, HW);
    break;
  case 8:
    reorder<uint64_t, ToChannelsLast><<<blocks, threads, 0, s>>>(static_cast<const uint64_t *>(src),
                                                                  static_cast<uint64_t *>(dst), N, C, HW);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

} // namespace

cudaError_t toChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                           cudaStream_t s) {
  return launchReorder<true>(src, dst, N, C, HW, elemBytes, s);
}

cudaError_t fromChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                             cudaStream_t s) {
  return launchReorder<false>(src, dst, N, C, HW, elemBytes, s);
}

} // namespace castor::cuda
