// The cache of freed kernel buffers behind ScratchAllocator (cpu_internal.h).
#include "cpu/cpu_internal.h"

#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace castor::cpu {

namespace {

// Freed blocks of at least kScratchMin bytes, most recent last; at most kScratchBlocks blocks
// and kScratchBytes bytes are kept.
constexpr size_t kScratchMin = size_t(1) << 16, kScratchBlocks = 64, kScratchBytes = size_t(1) << 30;
std::mutex scratchLock;
std::vector<std::pair<size_t, void *>> scratchBlocks;
size_t scratchHeld = 0;

} // namespace

void *scratchAllocate(size_t bytes) {
  if (bytes >= kScratchMin) {
    std::lock_guard<std::mutex> lock(scratchLock);
    for (size_t i = scratchBlocks.size(); i-- > 0;)
      if (scratchBlocks[i].first == bytes) {
        void *p = scratchBlocks[i].second;
        scratchBlocks.erase(scratchBlocks.begin() + std::ptrdiff_t(i));
        scratchHeld -= bytes;
        return p;
      }
  }
  return ::operator new(bytes);
}

void scratchFree(void *p, size_t bytes) {
  if (bytes < kScratchMin || bytes > kScratchBytes) {
    ::operator delete(p);
    return;
  }
  std::lock_guard<std::mutex> lock(scratchLock);
  scratchBlocks.emplace_back(bytes, p);
  scratchHeld += bytes;
  while (scratchBlocks.size() > kScratchBlocks || scratchHeld > kScratchBytes) {
    ::operator delete(scratchBlocks.front().second);
    scratchHeld -= scratchBlocks.front().first;
    scratchBlocks.erase(scratchBlocks.begin());
  }
}

} // namespace castor::cpu
