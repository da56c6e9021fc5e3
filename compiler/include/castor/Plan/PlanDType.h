// The plan dtype of an MLIR element type: one mapping for the emitter and the passes that build
// plan-shaped views of a function (castor-plan-views).
#pragma once

#include "plan/plan.h"

#include "mlir/IR/Types.h"
#include "mlir/Support/LogicalResult.h"

namespace castor {

// Failure for types plans cannot hold.
mlir::FailureOr<plan::DType> planDtypeOf(mlir::Type element);

} // namespace castor
