// castor::planArena on its own: buffers whose lifetimes intersect never share bytes, offsets
// are aligned, the arena is no larger than the buffers without reuse, and buffers with
// disjoint lifetimes do share it.
#include "castor/Plan/MemoryPlanner.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using castor::ArenaLayout;
using castor::BufferLifetime;
using castor::planArena;

namespace {

constexpr int64_t kStart = -1; // from the start of the step
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max(); // to its end

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool livesTogether(const BufferLifetime &a, const BufferLifetime &b) {
  // Inclusive ranges of kernel indices.
  return a.first <= b.last && b.first <= a.last;
}

// Every property the plan's consumers rely on, for any input. Returns the layout.
ArenaLayout checkedPlan(const std::vector<BufferLifetime> &buffers, uint64_t alignment) {
  ArenaLayout layout = planArena(buffers, alignment);
  REQUIRE(layout.offsets.size() == buffers.size());
  REQUIRE(layout.arenaBytes <= layout.totalBytes);

  uint64_t alignedSum = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    INFO("buffer " << i << " of " << buffers.size() << ", alignment " << alignment);
    alignedSum += alignUp(buffers[i].bytes, alignment);
    CHECK(layout.offsets[i] % alignment == 0);
    CHECK(layout.offsets[i] + buffers[i].bytes <= layout.arenaBytes);
  }
  CHECK(layout.totalBytes >= alignedSum);

  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (!livesTogether(buffers[i], buffers[j]) || buffers[i].bytes == 0 || buffers[j].bytes == 0)
        continue;
      uint64_t bi = layout.offsets[i], ei = bi + buffers[i].bytes;
      uint64_t bj = layout.offsets[j], ej = bj + buffers[j].bytes;
      INFO("buffers " << i << " [" << bi << ", " << ei << ") and " << j << " [" << bj << ", " << ej
                      << ") live together");
      CHECK((ei <= bj || ej <= bi));
    }

  // No placement can beat the bytes live at once: the largest sum over the buffers alive at
  // any one kernel (a maximum is reached at some buffer's first index).
  uint64_t peak = 0;
  for (const BufferLifetime &at : buffers) {
    uint64_t live = 0;
    for (const BufferLifetime &b : buffers)
      if (b.first <= at.first && at.first <= b.last)
        live += alignUp(b.bytes, alignment);
    peak = std::max(peak, live);
  }
  CHECK(layout.arenaBytes >= peak);
  return layout;
}

} // namespace

TEST_CASE("an empty function needs no arena", "[memory-planner]") {
  ArenaLayout layout = checkedPlan({}, 256);
  CHECK(layout.offsets.empty());
  CHECK(layout.arenaBytes == 0);
  CHECK(layout.totalBytes == 0);
}

TEST_CASE("buffers live at the same time get disjoint aligned bytes", "[memory-planner]") {
  // Three tensors all read by kernel 2.
  std::vector<BufferLifetime> buffers = {{100, 0, 2}, {300, 1, 2}, {10, 2, 2}};
  ArenaLayout layout = checkedPlan(buffers, 256);
  CHECK(layout.totalBytes == 256 + 512 + 256);
  CHECK(layout.arenaBytes == layout.totalBytes); // nothing can be reused
}

TEST_CASE("buffers with disjoint lifetimes share bytes", "[memory-planner]") {
  SECTION("two tensors one after the other") {
    ArenaLayout layout = checkedPlan({{1000, 0, 1}, {1000, 2, 3}}, 256);
    CHECK(layout.offsets[0] == layout.offsets[1]);
    CHECK(layout.arenaBytes == 1024);
    CHECK(layout.totalBytes == 2048);
  }
  SECTION("lifetimes are inclusive: sharing one kernel index is living together") {
    ArenaLayout layout = checkedPlan({{1000, 0, 2}, {1000, 2, 3}}, 256);
    CHECK(layout.offsets[0] != layout.offsets[1]);
    CHECK(layout.arenaBytes == 2048);
  }
  SECTION("a chain of activations needs two slots, however long") {
    // Kernel i reads tensor i-1 and writes tensor i: neighbours overlap, others do not.
    std::vector<BufferLifetime> chain;
    for (int64_t i = 0; i < 50; ++i)
      chain.push_back({4096, i, i + 1});
    ArenaLayout layout = checkedPlan(chain, 256);
    CHECK(layout.arenaBytes == 2 * 4096);
    CHECK(layout.totalBytes == 50 * 4096);
  }
  SECTION("a small tensor fits in the gap a dead large one left") {
    // A [0, 1] and C [0, 5] are placed first (largest first); B [2, 3] reuses A's bytes.
    ArenaLayout layout = checkedPlan({{8192, 0, 1}, {1024, 2, 3}, {4096, 0, 5}}, 256);
    CHECK(layout.offsets[1] == layout.offsets[0]);
    CHECK(layout.arenaBytes == 8192 + 4096);
  }
}

TEST_CASE("whole-step buffers (first = -1, last = INT64_MAX) are never shared", "[memory-planner]") {
  std::vector<BufferLifetime> buffers = {
      {512, kStart, kEnd},  // a parameter
      {512, kStart, 0},     // an input read by kernel 0
      {512, 0, 1},          // an activation
      {512, 1, kEnd},       // a returned value
      {512, kStart, kEnd},  // optimizer state
      {512, 2, 2},          // a temporary of kernel 2
  };
  ArenaLayout layout = checkedPlan(buffers, 256);
  for (size_t i : {size_t(1), size_t(2), size_t(3), size_t(5)}) {
    CHECK(layout.offsets[i] != layout.offsets[0]);
    CHECK(layout.offsets[i] != layout.offsets[4]);
  }
  CHECK(layout.offsets[0] != layout.offsets[4]);
  // At most four buffers are alive at any kernel, and the plan needs no more: the returned
  // value and the temporary take the bytes of the input and the activation once they die.
  CHECK(layout.arenaBytes == 4 * 512);
}

TEST_CASE("zero-byte buffers get aligned offsets inside the arena", "[memory-planner]") {
  std::vector<BufferLifetime> buffers = {{0, kStart, kEnd}, {0, 0, 0}, {64, 0, 0}, {0, 0, 3}};
  ArenaLayout layout = checkedPlan(buffers, 256);
  CHECK(layout.arenaBytes <= layout.totalBytes);
  for (uint64_t offset : layout.offsets)
    CHECK(offset <= layout.arenaBytes);
}

TEST_CASE("alignment 1 packs bytes exactly", "[memory-planner]") {
  ArenaLayout layout = checkedPlan({{3, 0, 0}, {5, 0, 0}, {7, 1, 1}}, 1);
  CHECK(layout.totalBytes == 15);
  CHECK(layout.arenaBytes == 8);
}

TEST_CASE("random lifetimes: never an overlap, always aligned, never above the total", "[memory-planner]") {
  std::mt19937_64 rng(20261201);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const uint64_t alignments[] = {1, 16, 256, 4096};
  int reused = 0;
  const int instances = 2000;
  for (int instance = 0; instance < instances; ++instance) {
    int64_t kernels = uniform(1, 30);
    std::vector<BufferLifetime> buffers(size_t(uniform(0, 40)));
    for (BufferLifetime &b : buffers) {
      // Mostly activations of a few KiB, some zero-byte, some large, some whole-step state.
      int64_t kind = uniform(0, 9);
      b.bytes = kind == 0 ? 0 : kind == 1 ? uint64_t(uniform(1, 1 << 20)) : uint64_t(uniform(1, 5000));
      b.first = uniform(0, 5) == 0 ? kStart : uniform(0, kernels - 1);
      b.last = uniform(0, 5) == 0 ? kEnd : std::max<int64_t>(b.first, uniform(b.first, kernels - 1));
    }
    uint64_t alignment = alignments[uniform(0, 3)];
    INFO("instance " << instance);
    ArenaLayout layout = checkedPlan(buffers, alignment);
    if (layout.arenaBytes < layout.totalBytes)
      ++reused;
    // Deterministic: the same lifetimes give the same plan.
    ArenaLayout again = planArena(buffers, alignment);
    CHECK(again.offsets == layout.offsets);
    CHECK(again.arenaBytes == layout.arenaBytes);
  }
  // Random lifetimes over a few dozen kernels leave plenty of room for reuse.
  CHECK(reused > instances / 2);
}
