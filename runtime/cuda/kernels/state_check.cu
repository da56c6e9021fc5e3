// countNonFiniteEach: blocks in y over the tensors of the list, in x over the elements of one,
// each thread counting elements whose exponent bits are all ones (inf or NaN) in its dtype's
// bit pattern, one atomic add per block.
#include "cuda/kernels/state_check.h"

namespace castor::cuda {
namespace {

constexpr int kCheckThreads = 256;
constexpr int kBlocksPerTensor = 32; // enough for the largest weights; small tensors leave most idle

template <typename W> __device__ int64_t countIn(const void *p, int64_t n, W exponentMask) {
  const W *w = static_cast<const W *>(p);
  int64_t found = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    found += (w[i] & exponentMask) == exponentMask;
  return found;
}

__global__ void countNonFiniteEachKernel(const StateCheckEntry *entries, int n, unsigned long long *counts) {
  __shared__ unsigned long long blockCount;
  for (int e = blockIdx.y; e < n; e += gridDim.y) {
    if (threadIdx.x == 0)
      blockCount = 0;
    __syncthreads();
    const StateCheckEntry entry = entries[e];
    int64_t found = 0;
    switch (entry.ref.dt) {
    case kF32:
      found = countIn<uint32_t>(entry.ref.p, entry.count, 0x7F800000u);
      break;
    case kF16:
      found = countIn<uint16_t>(entry.ref.p, entry.count, uint16_t(0x7C00u));
      break;
    case kBF16:
      found = countIn<uint16_t>(entry.ref.p, entry.count, uint16_t(0x7F80u));
      break;
    case kF64:
      found = countIn<unsigned long long>(entry.ref.p, entry.count, 0x7FF0000000000000ull);
      break;
    default:
      break; // integers: always finite
    }
    if (found > 0)
      atomicAdd(&blockCount, (unsigned long long)found);
    __syncthreads();
    if (threadIdx.x == 0 && blockCount > 0)
      atomicAdd(&counts[e], blockCount);
    __syncthreads();
  }
}

} // namespace

cudaError_t countNonFiniteEach(const StateCheckEntry *entries, int n, unsigned long long *counts, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  if (cudaError_t e = cudaMemsetAsync(counts, 0, size_t(n) * sizeof(unsigned long long), s); e != cudaSuccess)
    return e;
  const dim3 grid(kBlocksPerTensor, unsigned(n < 65535 ? n : 65535));
  countNonFiniteEachKernel<<<grid, kCheckThreads, 0, s>>>(entries, n, counts);
  return cudaGetLastError();
}

} // namespace castor::cuda
