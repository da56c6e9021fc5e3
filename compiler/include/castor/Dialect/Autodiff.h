// Helpers shared by the ops' vector-Jacobian products.
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace castor {

// `grad` summed over the dimensions that broadcasting added to reach `target`'s type, so that
// it has `target`'s shape; `grad` itself when the shapes already agree.
mlir::Value reduceGradTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad, mlir::Type target,
                         double scale = 1.0);

} // namespace castor
