// Serializes a function in plan-level form (after castor-select-kernels and
// castor-plan-memory) into the runtime's plan schema.
#pragma once

#include "castor/Dialect/PlanForm.h"
#include "plan/plan.h"
#include "weights/safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace castor {

struct EmittedPlan {
  plan::Plan plan;
  // Values of the function's constants, stored with the weights under their tensor names.
  std::vector<weights::NamedTensor> constants;
};

// Fails with a diagnostic on the offending op when the function is not in plan-level form.
mlir::FailureOr<EmittedPlan> emitPlan(mlir::func::FuncOp func, int64_t batch, const std::string &target);

} // namespace castor
