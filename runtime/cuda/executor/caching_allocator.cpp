#include "cuda/executor/caching_allocator.h"

namespace castor::cuda {

cudaError_t CachingAllocator::allocate(void **p, size_t bytes, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_;
  // The smallest free block that fits and wastes no more than its request again.
  for (auto it = free_.lower_bound(bytes); it != free_.end() && it->first <= 2 * bytes + 4096; ++it) {
    Block &b = it->second;
    if (b.stream != stream && cudaEventQuery(b.released) != cudaSuccess)
      continue; // still in use by work queued on another stream
    *p = b.p;
    inUse_[b.p] = b;
    free_.erase(it);
    return cudaSuccess;
  }
  ++fresh_;
  Block b;
  b.bytes = bytes;
  cudaError_t e = pinned_ ? cudaMallocHost(&b.p, bytes) : cudaMalloc(&b.p, bytes);
  if (e != cudaSuccess)
    return e;
  if ((e = cudaEventCreateWithFlags(&b.released, cudaEventDisableTiming)) != cudaSuccess) {
    pinned_ ? cudaFreeHost(b.p) : cudaFree(b.p);
    return e;
  }
  *p = b.p;
  inUse_[b.p] = b;
  return cudaSuccess;
}

cudaError_t CachingAllocator::release(void *p, cudaStream_t stream) {
  if (!p)
    return cudaSuccess;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = inUse_.find(p);
  if (it == inUse_.end())
    return cudaErrorInvalidValue;
  Block b = it->second;
  inUse_.erase(it);
  b.stream = stream;
  cudaError_t e = cudaEventRecord(b.released, stream);
  free_.emplace(b.bytes, b);
  return e;
}

CachingAllocator::~CachingAllocator() {
  auto drop = [&](Block &b) {
    cudaEventSynchronize(b.released);
    cudaEventDestroy(b.released);
    pinned_ ? cudaFreeHost(b.p) : cudaFree(b.p);
  };
  for (auto &[bytes, b] : free_)
    drop(b);
  for (auto &[p, b] : inUse_)
    drop(b);
}

} // namespace castor::cuda
