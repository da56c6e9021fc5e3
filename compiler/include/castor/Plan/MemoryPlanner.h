// Places tensors in one arena so that tensors live at the same time never overlap.
//
// Plain C++ (no MLIR), built as its own library (castor_memory_planner) so it can be tested
// on its own (test/compiler/test_memory_planner.cpp) and reasoned about: lifetimes are
// inclusive ranges of kernel indices, as the runtime's plan validator defines them.
// castor-plan-memory (PlanMemory.cpp) derives the lifetimes of a function's tensors and calls it.
#pragma once

#include <cstdint>
#include <vector>

namespace castor {

struct BufferLifetime {
  uint64_t bytes = 0;
  int64_t first = 0; // first kernel index that needs it (or -1: from the start of the step)
  int64_t last = 0;  // last kernel index that needs it (INT64_MAX: to the end of the step)
};

struct ArenaLayout {
  std::vector<uint64_t> offsets; // per buffer, multiples of the alignment
  uint64_t arenaBytes = 0;
  uint64_t totalBytes = 0;       // sum of the aligned buffer sizes, without any reuse
};

// Greedy by size: the largest buffers are placed first, each at the lowest offset where it
// overlaps no already placed buffer whose lifetime intersects its own.
ArenaLayout planArena(const std::vector<BufferLifetime> &buffers, uint64_t alignment);

} // namespace castor
