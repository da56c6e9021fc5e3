//===- PlanPasses.td - lowering the castor dialect to a plan ---------------===//
//
// The passes that bring a function to plan-level form, which PlanEmitter serializes: kernel
// selection, views, then memory planning (by MemoryPlanner). They live beside the emitter
// and the planner; the graph-level transformations of the dialect are in passes/.
//
//===----------------------------------------------------------------------===//

#ifndef CASTOR_PLAN_PASSES_TD
#define CASTOR_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def CastorSelectKernels : Pass<"castor-select-kernels", "mlir::func::FuncOp"> {
  let summary = "Chooses the runtime kernel of every op";
  let description = [{
    First step of lowering to a plan: every op that executes (KernelOpInterface) gets a
    `castor.kernel` attribute naming the runtime kernel that computes it on `target`.
    Parameters and constants are sources, not kernels; a returned function argument,
    parameter or in-place state update gets an identity kernel, since a plan's outputs are
    kernel outputs of their own. Any other
    op in the function cannot be lowered and fails the pass with its name.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"", "cpu or cuda">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorPlanViews : Pass<"castor-plan-views", "mlir::func::FuncOp"> {
  let summary = "Makes reshapes, and transposes between NCHW and NHWC, views of their operand's bytes";
  let description = [{
    Between kernel selection and memory planning: a reshape, flatten or identity kernel whose
    operand and result are activations of one dtype gets `castor.view`, and castor-plan-memory
    gives the result its operand's bytes (the plan's Tensor.view_of), so the kernel copies
    nothing. Both then live while either is read. Not a view: an operand or result that is
    returned, a function argument, a parameter or constant, or written in place by another
    kernel (an in-place write would change what the other shape reads); and a rank-4 side that
    the CUDA backend would store channels-last (plan/storage_order.h) where its two storage
    orders differ, since the other shape reads its bytes row-major.

    A transpose with perm (0,2,3,1) or (0,3,1,2) of a rank-4 activation is a transposed view
    (plan/storage_order.h): [N,C,H,W] stored channels-last is [N,H,W,C] row-major, byte for byte,
    so the runtime stores its [N,C,H,W] side channels-last and its kernel moves nothing (ConvNeXt's
    permutes around LayerNorm and the pointwise Linear layers, and their gradients). It stays a
    transpose where the [N,C,H,W] side's group must be row-major (a matmul or layer norm reads
    it) or the [N,H,W,C] side's group channels-last, and under the same conditions as a reshape.
    Transposed views are decided first, since they set their groups' orders; the reshapes then
    under those orders.
  }];
  let options = [
    Option<"transposes", "transposes", "bool", /*default=*/"true",
           "make transposes between NCHW and NHWC views (false: reshapes only)">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorPlanMemory : Pass<"castor-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assigns every tensor an offset in one arena by liveness";
  let description = [{
    Second step of lowering to a plan. Lifetimes are ranges of kernel indices: an input lives
    from the start to its last reader, parameters, constants and training state (arguments
    with `castor.state`) for the whole step, a kernel's result from that kernel to its last
    reader, and returned values to the end. A result written in place (InPlaceOpInterface)
    takes its state operand's bytes, and so does a view (castor-plan-views). Offsets come from the memory planner (`castor::planArena`,
    MemoryPlanner.h): tensors whose lifetimes intersect never share bytes. Results get `castor.offsets` (one per result),
    the function `castor.input_offsets`, `castor.arena_bytes` and `castor.tensor_bytes` (the
    sum of all tensors, the arena's size without reuse). With `workspace-limit` the function
    also gets `castor.workspace_limit`, from which the plan emitter sets the plan's workspace
    limit and its predicted peak.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256", "byte alignment of every offset">,
    Option<"workspaceLimit", "workspace-limit", "int64_t", /*default=*/"-1",
           "library workspace the plan allows, in bytes (0: the default, 1/32 of the arena between 128 MiB "
           "and 1 GiB; -1: none recorded, so the plan has no limit and no predicted peak)">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

#endif // CASTOR_PLAN_PASSES_TD
