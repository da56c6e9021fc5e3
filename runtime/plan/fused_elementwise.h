// A `fused_elementwise` kernel read as one whole: its `program` attribute (elementwise_program.h)
// parsed against the dtypes of the kernel's operands, and its shapes by the shape rule every
// reader shares (shape::fusedElementwise: the outputs have one shape, the domain; each input
// broadcasts to it). The plan validator, the CPU reference and the CUDA code generator read the
// kernel through this one function, so that none of them can accept what another refuses.
#pragma once

#include "castor/shape_rules.h"
#include "castor/status.h"
#include "plan/elementwise_program.h"
#include "plan/plan.h"

#include <cstdint>
#include <vector>

namespace castor::plan {

struct FusedElementwise {
  ElementwiseProgram program;
  shape::Shape domain; // every output's shape
};

// The program and domain of a group with these operands, or why they are refused: the parser's
// checks, the shape rule (shape::fusedElementwise, a reduction output marked by the program),
// and each reduction's axes those its output's shape reduces (shape::reducedAxes). The
// dialect's verifier and parseFusedElementwise both read a group through it.
Expected<FusedElementwise> checkFusedElementwise(const std::string &program, const std::vector<shape::Shape> &inShapes,
                                                 const std::vector<DType> &inTypes,
                                                 const std::vector<shape::Shape> &outShapes,
                                                 const std::vector<DType> &outTypes);

// The kernel's program and domain, or why they are refused: a missing or non-string `program`, an
// attribute other than it, an operand that is not floating-point, shapes the rule refuses, or a
// program the parser refuses (its message names the program line).
Expected<FusedElementwise> parseFusedElementwise(const Kernel &k, const std::vector<const Tensor *> &in,
                                                 const std::vector<const Tensor *> &out);

// The same, the operands read from `plan`'s tensor list.
Expected<FusedElementwise> parseFusedElementwise(const Plan &plan, const Kernel &k);

// The bytes a fused_elementwise kernel of `plan` reads and writes, each operand once: what its
// bandwidth is measured against (castor-run bench, castor compile's fusion report).
uint64_t fusedBytesMoved(const Plan &plan, const Kernel &k);

// What kind of group a fused_elementwise kernel of `plan` is, for reporting its bandwidth by kind:
// "reduce" (an output is a reduction), "broadcast" (an input has fewer elements than the domain:
// a per-channel, per-sample or scalar operand), else "map" (every operand the domain's size).
// "invalid" for a kernel parseFusedElementwise refuses.
const char *fusedGroupKind(const Plan &plan, const Kernel &k);
// The same of a kernel already parsed into `group`.
const char *fusedGroupKind(const Plan &plan, const Kernel &k, const FusedElementwise &group);

} // namespace castor::plan
