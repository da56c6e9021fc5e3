// The plan form of MLIR types and attributes: one mapping for the plan emitter, the passes that
// build plan-shaped views of a function (castor-plan-views) or programs of fused groups
// (castor-fuse-elementwise), and the verifier of fused_elementwise, whose program the plan
// library checks.
#pragma once

#include "plan/plan.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Types.h"
#include "mlir/Support/LogicalResult.h"

namespace castor {

// Failure for types plans cannot hold.
mlir::FailureOr<plan::DType> planDtypeOf(mlir::Type element);

// An op attribute as a kernel attribute: integer arrays as ints, bools and present unit
// attributes as bools, integers, floats, strings and enum cases as strings. Failure for
// attributes plans cannot hold.
mlir::FailureOr<plan::Attr> planAttrOf(mlir::Attribute attribute);

} // namespace castor
