// What castor-fuse-elementwise made of a plan: each fused_elementwise kernel's ops and the bytes it
// reads and writes a step against what its ops would move one by one. The compile summary
// prints the totals; `castor compile --report DIR` writes every group to DIR/fusion.json.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor::cli {

struct FusedGroup {
  int kernel = 0;    // index in the plan's kernel list
  std::string name;  // the kernel's label (its first op's layer)
  std::vector<std::string> ops;
  std::string kind;  // plan::fusedGroupKind: map, broadcast or reduce (castor-run bench's by_kind)
  int inputs = 0, outputs = 0;
  uint64_t bytesMoved = 0;        // its inputs read and its outputs written, once each
  uint64_t unfusedBytesMoved = 0; // what the same ops read and write as separate kernels
};

std::vector<FusedGroup> fusedGroups(const plan::Plan &p);

// Writes DIR/fusion.json; an error message, or empty.
std::string writeFusionReport(const std::vector<FusedGroup> &groups, const std::string &dir);

} // namespace castor::cli
