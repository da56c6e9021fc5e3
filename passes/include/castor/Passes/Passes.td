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

#endif // CASTOR_PASSES_TD
