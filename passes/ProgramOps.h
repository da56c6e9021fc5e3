// Which ops a fused element-wise program can hold, as the plan library decides: shared by
// castor-fuse-elementwise (which groups them) and castor-recompute-elementwise (which copies
// them into the backward's groups).
#pragma once

#include "plan/elementwise_program.h"

#include "mlir/IR/Operation.h"

#include <optional>

namespace castor {

// The instruction `op` is in a program, or nothing when it cannot be one: the plan library
// decides which ops a program takes (plan::isProgramOp); every value is a float tensor.
std::optional<plan::ProgramInstruction> programInstructionOf(mlir::Operation *op);

} // namespace castor
