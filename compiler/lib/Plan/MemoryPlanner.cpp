#include "castor/Plan/MemoryPlanner.h"

#include <algorithm>
#include <numeric>

namespace castor {

static uint64_t alignUp(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

ArenaLayout planArena(const std::vector<BufferLifetime> &buffers, uint64_t alignment) {
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });

  struct Placed {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Placed> placed;
  for (size_t i : order) {
    const BufferLifetime &b = buffers[i];
    uint64_t size = alignUp(std::max<uint64_t>(b.bytes, 1), alignment);
    layout.totalBytes += size;
    // The placed buffers this one must avoid, by offset.
    std::vector<Placed> conflicts;
    for (const Placed &p : placed) {
      const BufferLifetime &o = buffers[p.index];
      if (o.first <= b.last && b.first <= o.last)
        conflicts.push_back(p);
    }
    std::sort(conflicts.begin(), conflicts.end(), [](const Placed &x, const Placed &y) { return x.begin < y.begin; });
    uint64_t offset = 0;
    for (const Placed &c : conflicts) {
      if (c.begin >= offset + size)
        break; // the gap before c is large enough
      offset = std::max(offset, c.end);
    }
    layout.offsets[i] = offset;
    placed.push_back({offset, offset + size, i});
    layout.arenaBytes = std::max(layout.arenaBytes, offset + size);
  }
  return layout;
}

} // namespace castor
