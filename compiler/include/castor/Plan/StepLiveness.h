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
  // result written in place (InPlaceOpInterface) or a view (castor.view) owns none: `tiedTo`
  // maps it to its operand.
  std::vector<mlir::Value> values;
  std::vector<BufferLifetime> lifetimes;
  llvm::DenseMap<mlir::Value, mlir::Value> tiedTo;
  llvm::DenseMap<mlir::Operation *, int64_t> kernelIndex;
  int64_t kernelCount = 0;

  // The value whose buffer `v` uses (itself unless written in place or a view).
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
// its arena, these, and the plan's workspace limit (workspaceLimitBytes).
uint64_t bytesBesideArena(mlir::func::FuncOp func);

// The plan's workspace limit: what a backend may allocate beside the arena, the inputs and the
// staging buffer, and must stay within. Two parts:
// - library workspaces: `requestedBytes` (`castor compile --workspace-limit`), or with 0 the
//   default, 1/32 of the arena between 128 MiB and 1 GiB (convolution workspaces grow with the
//   activations, and a fixed figure would be most of a small plan's slack; ResNet-50's bf16 stem
//   at batch 256 runs 2.8x faster (forward and filter gradient) with the engines of 202 MiB that
//   1/64, 168 MiB, left out);
// - the fused kernels' reserve: a bit per element of each fused batch-norm-ReLU's output, the
//   ReLU's mask that cuDNN's fused kernel keeps from the forward to the backward, rounded up to
//   256 bytes, plus 1 MiB for the small per-layer buffers of the backend's own kernels.
// A backend that would need more for a layer runs that layer another way (runtime/cuda).
uint64_t workspaceLimitBytes(mlir::func::FuncOp func, uint64_t arenaBytes, uint64_t requestedBytes);
// The part of that limit that is the fused kernels' reserve.
uint64_t fusedReserveBytes(mlir::func::FuncOp func);
// The planned peak: arena + bytesBesideArena + workspaceLimitBytes.
uint64_t plannedPeakBytes(mlir::func::FuncOp func, uint64_t arenaBytes, uint64_t requestedWorkspaceBytes);

// The step's last loss (null when there is none): every forward, each micro-batch's, comes
// before it and the backward after it.
mlir::Operation *lastLoss(mlir::func::FuncOp func);

// Bytes of a ranked tensor type.
uint64_t tensorBytes(mlir::Type type);

} // namespace castor
