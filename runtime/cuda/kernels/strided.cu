#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/strided.h"

namespace castor::cuda {
namespace {

template <typename T>
__global__ void moveKernel(const T *__restrict__ src, T *__restrict__ dst, StridedMove m, int64_t count) {
  CASTOR_GRID_LOOP(i, count) {
    int64_t rest = i, from = m.srcOffset, to = m.dstOffset;
    for (int d = m.rank - 1; d >= 0; --d) {
      const int64_t c = rest % m.dims[d];
      rest /= m.dims[d];
      from += c * m.srcStrides[d];
      to += c * m.dstStrides[d];
    }
    dst[to] = src[from];
  }
}

template <typename T>
cudaError_t launchMove(const void *src, void *dst, const StridedMove &m, int64_t count, cudaStream_t s) {
  moveKernel<T><<<detail::gridFor(count), detail::kThreads, 0, s>>>(static_cast<const T *>(src), static_cast<T *>(dst),
                                                                    m, count);
  return cudaGetLastError();
}

} // namespace

cudaError_t stridedMove(const void *src, void *dst, const StridedMove &m, int elemBytes, cudaStream_t s) {
  if (m.rank < 0 || m.rank > kMaxRank)
    return cudaErrorInvalidValue;
  int64_t count = 1;
  for (int d = 0; d < m.rank; ++d)
    count *= m.dims[d];
  if (count == 0)
    return cudaSuccess;
  switch (elemBytes) {
  case 1: return launchMove<uint8_t>(src, dst, m, count, s);
  case 2: return launchMove<uint16_t>(src, dst, m, count, s);
  case 4: return launchMove<uint32_t>(src, dst, m, count, s);
  case 8: return launchMove<uint64_t>(src, dst, m, count, s);
  default: return cudaErrorInvalidValue;
  }
}

} // namespace castor::cuda
