// Helpers shared by the ops' vector-Jacobian products.
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace castor {

// `grad` summed over the dimensions that broadcasting added to reach `target`'s type, so that
// it has `target`'s shape; `grad` itself when the shapes already agree.
mlir::Value reduceGradTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad, mlir::Type target,
                         double scale = 1.0);

// The VJP of every unary element-wise op (ElementwiseOps.td): dx = BackwardOp(dy, saved) with the
// forward's attributes, where saved is the forward's output or its input.
template <class BackwardOp, class ForwardOp>
llvm::LogicalResult buildElementwiseVjp(ForwardOp op, mlir::OpBuilder &b, mlir::Value dy, bool savesOutput,
                                        llvm::SmallVectorImpl<mlir::Value> &grads) {
  mlir::OperationState state(op.getLoc(), BackwardOp::getOperationName());
  state.addOperands({dy, savesOutput ? op->getResult(0) : op->getOperand(0)});
  state.addTypes(op->getResult(0).getType());
  // The two ops' attributes have the same names: the forward's properties are the backward's.
  state.propertiesAttr = op->getPropertiesAsAttribute();
  grads.push_back(b.create(state)->getResult(0));
  return mlir::success();
}

} // namespace castor
