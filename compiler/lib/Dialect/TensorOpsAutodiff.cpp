// Vector-Jacobian products of the ops in TensorOps.td (AutodiffOpInterface).
#include "castor/Dialect/Autodiff.h"
#include "castor/Dialect/CastorOps.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace castor;

Value castor::reduceGradTo(OpBuilder &b, Location loc, Value grad, Type target, double scale) {
  if (grad.getType() == target && scale == 1.0)
    return grad;
  return b.create<ReduceSumToOp>(loc, target, grad, b.getF64FloatAttr(scale));
}

LogicalResult IdentityOp::buildVjp(OpBuilder &, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(dys[0]);
  return success();
}

// The gradient of a cast is a cast back, so the backward graph inherits the forward's precision.
LogicalResult CastOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  if (!llvm::isa<FloatType>(getElementTypeOrSelf(getInput().getType()))) {
    grads.push_back(Value());
    return success();
  }
  grads.push_back(b.create<CastOp>(getLoc(), getInput().getType(), dys[0]));
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  auto perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = int64_t(i);
  grads.push_back(b.create<TransposeOp>(getLoc(), getInput().getType(), dys[0], b.getDenseI64ArrayAttr(inverse)));
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<SliceBackwardOp>(getLoc(), getInput().getType(), dys[0], getStartsAttr(), getEndsAttr(),
                                            getStepsAttr()));
  return success();
}

LogicalResult AddOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(reduceGradTo(b, getLoc(), dys[0], getLhs().getType()));
  grads.push_back(reduceGradTo(b, getLoc(), dys[0], getRhs().getType()));
  return success();
}

LogicalResult MulOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  Value dl = b.create<MulOp>(getLoc(), getType(), dys[0], getRhs());
  Value dr = b.create<MulOp>(getLoc(), getType(), dys[0], getLhs());
  grads.push_back(reduceGradTo(b, getLoc(), dl, getLhs().getType()));
  grads.push_back(reduceGradTo(b, getLoc(), dr, getRhs().getType()));
  return success();
}

LogicalResult FlattenOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<ReshapeOp>(getLoc(), getInput().getType(), dys[0]));
  return success();
}

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<ReshapeOp>(getLoc(), getInput().getType(), dys[0]));
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  auto split = b.create<SplitOp>(getLoc(), getInputs().getTypes(), dys[0], getAxisAttr());
  llvm::append_range(grads, split.getResults());
  return success();
}

LogicalResult DropoutOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  if (!getIteration()) {
    grads.push_back(dys[0]); // inference form: the identity
    return success();
  }
  Value bwd = b.create<DropoutBackwardOp>(getLoc(), getType(), dys[0], getIteration(), getRatioAttr(), getSeedAttr(),
                                          getSaltAttr(), getPerSampleAttr());
  grads.append({bwd, Value()});
  return success();
}
