//===- Passes.td - Castor's transformation passes --------------------------===//

#ifndef CASTOR_PASSES_TD
#define CASTOR_PASSES_TD

include "mlir/Pass/PassBase.td"

def CastorCastCleanup : Pass<"castor-cast-cleanup"> {
  let summary = "Removes cast chains whose first cast is exact";
  let description = [{
    `cast(cast(x : A -> B) : B -> C)` becomes `cast(x : A -> C)` (or `x` when C is A) only
    when every value of A is exactly representable in B: f16 -> f32 -> f16 folds,
    f32 -> f16 -> f32 never does, since the narrowing cast rounds. Casts to the same type
    disappear.
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorSelectKernels : Pass<"castor-select-kernels", "mlir::func::FuncOp"> {
  let summary = "Chooses the runtime kernel of every op";
  let description = [{
    First step of lowering to a plan: every op that executes (KernelOpInterface) gets a
    `castor.kernel` attribute naming the runtime kernel that computes it on `target`.
    Parameters and constants are sources, not kernels; a returned function argument or
    parameter gets an identity kernel, since a plan's outputs are kernel outputs. Any other
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
    from the start to its last reader, parameters and constants for the whole step, a kernel's
    result from that kernel to its last reader, and returned values to the end. Tensors whose
    lifetimes intersect never share bytes. Results get `castor.offsets` (one per result),
    the function `castor.input_offsets`, `castor.arena_bytes` and `castor.tensor_bytes` (the
    sum of all tensors, the arena's size without reuse).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256", "byte alignment of every offset">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

#endif // CASTOR_PASSES_TD
