// Device or pinned host blocks kept for reuse instead of given back: cudaFree and cudaFreeHost
// wait for the whole device, so a library that allocates and frees on every call (nvJPEG's
// hardware decoder does) would otherwise wait for the training step running beside it. Stream
// ordered: a freed block is reused at once on the stream that freed it, on another stream once
// the work queued before its release is done. Thread-safe; everything is freed on destruction.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace castor::cuda {

class CachingAllocator {
public:
  explicit CachingAllocator(bool pinned) : pinned_(pinned) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator &) = delete;
  CachingAllocator &operator=(const CachingAllocator &) = delete;

  cudaError_t allocate(void **p, size_t bytes, cudaStream_t stream);
  cudaError_t release(void *p, cudaStream_t stream);
  // Requests, and those that needed a new block.
  size_t requests() const { return requests_; }
  size_t fresh() const { return fresh_; }

private:
  struct Block {
    void *p = nullptr;
    size_t bytes = 0;
    cudaStream_t stream = nullptr; // the stream that released it
    cudaEvent_t released = nullptr; // recorded there at its release
  };
  bool pinned_;
  std::mutex mutex_;
  std::multimap<size_t, Block> free_;   // by size
  std::map<void *, Block> inUse_;       // by address
  size_t requests_ = 0, fresh_ = 0;
};

} // namespace castor::cuda
