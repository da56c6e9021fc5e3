// The lifetimes of a function's tensors in kernel order, as the memory planner sees them: one
// analysis shared by castor-plan-memory (which places them), castor-recompute (which predicts the
// peak of a candidate schedule) and the memory report of `castor compile --report`.
#pragma once

#include "castor/Plan/MemoryPlanner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace castor {

struct StepLiveness {
  // One buffer per value that owns bytes: function arguments, then op results in order. A
  // result written in place (InPlaceOpInterface) owns none: `tiedTo` maps it to its operand.
  std::vector<mlir::Value> values;
  std::vector<BufferLifetime> lifetimes;
  llvm::DenseMap<mlir::Value, mlir::Value> tiedTo;
  llvm::DenseMap<mlir::Operation *, int64_t> kernelIndex;
  int64_t kernelCount = 0;

  // The value whose buffer `v` uses (itself unless written in place).
  mlir::Value root(mlir::Value v) const;
};

// Lifetimes are inclusive ranges of kernel indices: an argument lives from the start of the step
// to its last reader (training state, `castor.state`, for the whole step); parameters and
// constants for the whole step; a result from its kernel to its last reader; returned values to
// the end. With `requireKernels`, every op other than parameters, constants and the return must
// carry `castor.kernel` (castor-select-kernels ran); otherwise every such op counts as a kernel.
mlir::FailureOr<StepLiveness> analyzeStepLiveness(mlir::func::FuncOp func, bool requireKernels);

// Device bytes a backend allocates beside the arena for `func`'s step, other than library
// workspaces: a buffer per input (arguments that are not training state) and a staging buffer as
// large as the largest 4-D state tensor (channels-last uploads). The planned peak of a step is
// its arena, these, and the plan's workspace limit.
uint64_t bytesBesideArena(mlir::func::FuncOp func);

// The step's last loss (null when there is none): every forward, each micro-batch's, comes
// before it and the backward after it.
mlir::Operation *lastLoss(mlir::func::FuncOp func);

// Bytes of a ranked tensor type.
uint64_t tensorBytes(mlir::Type type);

} // namespace castor
