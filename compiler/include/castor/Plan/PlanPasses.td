//===- PlanPasses.td - lowering the castor dialect to a plan ---------------===//
//
// The two passes that bring a function to plan-level form, which PlanEmitter serializes:
// kernel selection, then memory planning (by MemoryPlanner). They live beside the emitter
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

def CastorPlanMemory : Pass<"castor-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assigns every tensor an offset in one arena by liveness";
  let description = [{
    Second step of lowering to a plan. Lifetimes are ranges of kernel indices: an input lives
    from the start to its last reader, parameters, constants and training state (arguments
    with `castor.state`) for the whole step, a kernel's result from that kernel to its last
    reader, and returned values to the end. A result written in place (InPlaceOpInterface)
    takes its state operand's bytes. Offsets come from the memory planner (`castor::planArena`,
    MemoryPlanner.h): tensors whose lifetimes intersect never share bytes. Results get `castor.offsets` (one per result),
    the function `castor.input_offsets`, `castor.arena_bytes` and `castor.tensor_bytes` (the
    sum of all tensors, the arena's size without reuse).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256", "byte alignment of every offset">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

#endif // CASTOR_PLAN_PASSES_TD
