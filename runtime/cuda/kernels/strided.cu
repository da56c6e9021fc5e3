#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/strided.h"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace castor::cuda {
namespace {

// The walk's index arithmetic is per element: 32-bit where every index fits (64-bit division
// is many times slower on the GPU), over as few dimensions as the strides allow.
template <typename T, typename I>
__global__ void moveKernel(const T *__restrict__ src, T *__restrict__ dst, StridedMove m, I count) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += I(blockDim.x) * gridDim.x) {
    I rest = i, from = I(m.srcOffset), to = I(m.dstOffset);
    for (int d = m.rank - 1; d >= 0; --d) {
      const I extent = I(m.dims[d]);
      const I c = rest % extent;
      rest /= extent;
      from += c * I(m.srcStrides[d]);
      to += c * I(m.dstStrides[d]);
    }
    dst[to] = src[from];
  }
}

// The same walk without extent-1 dimensions, and with each dimension merged into the next outer
// one where both sides store them as one (a reshape-like copy becomes one dimension).
StridedMove simplified(const StridedMove &m) {
  StridedMove r;
  r.srcOffset = m.srcOffset, r.dstOffset = m.dstOffset;
  for (int d = 0; d < m.rank; ++d) {
    if (m.dims[d] == 1)
      continue;
    const int last = r.rank - 1;
    if (last >= 0 && r.srcStrides[last] == m.srcStrides[d] * m.dims[d] &&
        r.dstStrides[last] == m.dstStrides[d] * m.dims[d]) {
      r.dims[last] *= m.dims[d];
      r.srcStrides[last] = m.srcStrides[d], r.dstStrides[last] = m.dstStrides[d];
      continue;
    }
    r.dims[r.rank] = m.dims[d], r.srcStrides[r.rank] = m.srcStrides[d], r.dstStrides[r.rank] = m.dstStrides[d];
    ++r.rank;
  }
  if (r.rank == 0)
    r.rank = 1, r.dims[0] = 1, r.srcStrides[0] = r.dstStrides[0] = 1;
  return r;
}

// How many elements move as one unit of `unitBytes`: the innermost dimension contiguous on both
// sides, and every stride, offset, extent and address a multiple of the unit. 1 when not.
int elementsPerUnit(const StridedMove &m, const void *src, const void *dst, int elemBytes, int unitBytes) {
  const int k = unitBytes / elemBytes;
  const int inner = m.rank - 1;
  if (k <= 1 || m.srcStrides[inner] != 1 || m.dstStrides[inner] != 1 || m.dims[inner] % k ||
      m.srcOffset % k || m.dstOffset % k || reinterpret_cast<uintptr_t>(src) % unitBytes ||
      reinterpret_cast<uintptr_t>(dst) % unitBytes)
    return 1;
  for (int d = 0; d < inner; ++d)
    if (m.srcStrides[d] % k || m.dstStrides[d] % k)
      return 1;
  return k;
}

StridedMove inUnits(StridedMove m, int k) {
  const int inner = m.rank - 1;
  m.dims[inner] /= k;
  for (int d = 0; d < inner; ++d)
    m.srcStrides[d] /= k, m.dstStrides[d] /= k;
  m.srcOffset /= k, m.dstOffset /= k;
  return m;
}

// The largest element index either side reaches, plus one (strides may be negative: a slice
// with a negative step).
int64_t reach(const StridedMove &m, bool source) {
  int64_t last = source ? m.srcOffset : m.dstOffset;
  for (int d = 0; d < m.rank; ++d)
    last += (m.dims[d] - 1) * std::max<int64_t>(0, source ? m.srcStrides[d] : m.dstStrides[d]);
  return last + 1;
}

template <typename T>
cudaError_t launchMove(const void *src, void *dst, const StridedMove &m, cudaStream_t s) {
  int64_t count = 1;
  for (int d = 0; d < m.rank; ++d)
    count *= m.dims[d];
  const auto *from = static_cast<const T *>(src);
  auto *to = static_cast<T *>(dst);
  const int grid = detail::gridFor(count);
  if (count < INT32_MAX && reach(m, true) < INT32_MAX && reach(m, false) < INT32_MAX)
    moveKernel<T, uint32_t><<<grid, detail::kThreads, 0, s>>>(from, to, m, uint32_t(count));
  else
    moveKernel<T, int64_t><<<grid, detail::kThreads, 0, s>>>(from, to, m, count);
  return cudaGetLastError();
}

} // namespace

cudaError_t stridedMove(const void *src, void *dst, const StridedMove &given, int elemBytes, cudaStream_t s) {
  if (given.rank < 0 || given.rank > kMaxRank)
    return cudaErrorInvalidValue;
  for (int d = 0; d < given.rank; ++d)
    if (given.dims[d] == 0)
      return cudaSuccess;
  const StridedMove m = simplified(given);
  for (int unit : {16, 8, 4}) {
    if (unit <= elemBytes)
      break;
    const int k = elementsPerUnit(m, src, dst, elemBytes, unit);
    if (k == 1)
      continue;
    switch (unit) {
    case 16: return launchMove<uint4>(src, dst, inUnits(m, k), s);
    case 8: return launchMove<uint2>(src, dst, inUnits(m, k), s);
    case 4: return launchMove<uint32_t>(src, dst, inUnits(m, k), s);
    }
  }
  switch (elemBytes) {
  case 1: return launchMove<uint8_t>(src, dst, m, s);
  case 2: return launchMove<uint16_t>(src, dst, m, s);
  case 4: return launchMove<uint32_t>(src, dst, m, s);
  case 8: return launchMove<uint64_t>(src, dst, m, s);
  default: return cudaErrorInvalidValue;
  }
}

} // namespace castor::cuda
