// Vector-Jacobian products of the ops in NNOps.td (AutodiffOpInterface).
#include "castor/Dialect/Autodiff.h"
#include "castor/Dialect/CastorOps.h"

using namespace mlir;
using namespace castor;

LogicalResult Conv2dOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  Value dy = dys[0];
  grads.push_back(b.create<Conv2dBackwardDataOp>(getLoc(), getInput().getType(), dy, getFilter(), getStridesAttr(),
                                                 getPadsAttr(), getDilationsAttr(), getGroupsAttr()));
  grads.push_back(b.create<Conv2dBackwardFilterOp>(getLoc(), getFilter().getType(), getInput(), dy, getStridesAttr(),
                                                   getPadsAttr(), getDilationsAttr(), getGroupsAttr()));
  if (getBias())
    grads.push_back(b.create<Conv2dBackwardBiasOp>(getLoc(), getBias().getType(), dy));
  return success();
}

LogicalResult BatchNormTrainingOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  if (dys[1] || dys[2])
    return emitOpError("differentiating through the batch statistics is not supported");
  auto bwd = b.create<BatchNormTrainingBackwardOp>(getLoc(), getInput().getType(), getScale().getType(),
                                                   getBias().getType(), dys[0], getInput(), getScale(), getBatchMean(),
                                                   getBatchInvStd(), getEpsilonAttr());
  grads.append({bwd.getInputGrad(), bwd.getScaleGrad(), bwd.getBiasGrad()});
  grads.append(getRunningStats().size(), Value()); // buffers, not differentiable
  return success();
}

// Frozen statistics: with s = 1 / sqrt(var + eps) and xhat = (x - mean) s, dx = dy scale s,
// dscale = sum(dy xhat), dbias = sum(dy) over every dimension but the channel's. Built from
// batch_norm_inference itself (dx is the inference form of dy with mean 0 and bias 0; xhat that
// of x with scale 1 and bias 0), a product and reductions, in the statistics' precision.
LogicalResult BatchNormInferenceOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value dy = dys[0];
  auto inputType = llvm::cast<RankedTensorType>(getInput().getType());
  auto statType = llvm::cast<RankedTensorType>(getScale().getType());
  const int64_t channels = statType.getDimSize(0);
  auto splat = [&](double v) -> Value {
    auto value = DenseElementsAttr::get(statType, b.getFloatAttr(statType.getElementType(), v));
    return b.create<ConstantOp>(loc, statType, value);
  };
  Value zeros = splat(0.0), ones = splat(1.0);
  grads.push_back(b.create<BatchNormInferenceOp>(loc, inputType, dy, getScale(), zeros, zeros, getVariance(),
                                                 getEpsilonAttr()));
  // The sums in the statistics' element type (f32 for f16 and bf16 data).
  auto wide = RankedTensorType::get(inputType.getShape(), statType.getElementType());
  auto widen = [&](Value v) -> Value { return v.getType() == wide ? v : b.create<CastOp>(loc, wide, v).getResult(); };
  Value x = widen(getInput()), g = widen(dy);
  Value xhat = b.create<BatchNormInferenceOp>(loc, wide, x, ones, zeros, getMean(), getVariance(), getEpsilonAttr());
  SmallVector<int64_t> perChannel(inputType.getRank(), 1);
  perChannel[1] = channels;
  auto reducedType = RankedTensorType::get(perChannel, statType.getElementType());
  auto sumToChannels = [&](Value v) -> Value {
    Value r = b.create<ReduceSumToOp>(loc, reducedType, v, b.getF64FloatAttr(1.0));
    return b.create<ReshapeOp>(loc, statType, r);
  };
  grads.push_back(sumToChannels(b.create<MulOp>(loc, wide, g, xhat)));
  grads.push_back(sumToChannels(g));
  grads.append({Value(), Value()}); // the statistics: frozen
  return success();
}

LogicalResult MaxPool2dOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  auto bwd = b.create<MaxPool2dBackwardOp>(getLoc(), getInput().getType(), dys[0], getInput(), getKernelAttr(),
                                           getStridesAttr(), getPadsAttr(), getDilationsAttr(), getCeilModeAttr());
  grads.push_back(bwd);
  return success();
}

LogicalResult AvgPool2dOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<AvgPool2dBackwardOp>(getLoc(), getInput().getType(), dys[0], getKernelAttr(),
                                                getStridesAttr(), getPadsAttr(), getCeilModeAttr(),
                                                getCountIncludePadAttr()));
  return success();
}

LogicalResult GlobalAvgPoolOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<GlobalAvgPoolBackwardOp>(getLoc(), getInput().getType(), dys[0]));
  return success();
}

// Y = alpha op(A) op(B) + beta C: each operand gradient is itself a gemm of dY with the other.
LogicalResult GemmOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  Value dy = dys[0];
  bool ta = getTransA(), tb = getTransB();
  auto gemm = [&](Type type, Value x, Value y, bool transX, bool transY) -> Value {
    return b.create<GemmOp>(getLoc(), type, x, y, Value(), b.getBoolAttr(transX), b.getBoolAttr(transY),
                            getAlphaAttr(), b.getF64FloatAttr(1.0));
  };
  // dA = alpha dY op(B)^T (or its transpose when A is used transposed).
  grads.push_back(ta ? gemm(getA().getType(), getB(), dy, tb, true) : gemm(getA().getType(), dy, getB(), false, !tb));
  // dB = alpha op(A)^T dY (or its transpose).
  grads.push_back(tb ? gemm(getB().getType(), dy, getA(), true, ta) : gemm(getB().getType(), getA(), dy, !ta, false));
  if (getC())
    grads.push_back(reduceGradTo(b, getLoc(), dy, getC().getType(), getBeta().convertToDouble()));
  return success();
}

LogicalResult MatmulOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  auto a = llvm::cast<RankedTensorType>(getA().getType()), bt = llvm::cast<RankedTensorType>(getB().getType());
  if (a.getRank() != 2 || bt.getRank() != 2)
    return emitOpError("the gradient of matmul is implemented for rank-2 operands only");
  auto one = b.getF64FloatAttr(1.0);
  Value dA = b.create<GemmOp>(getLoc(), a, dys[0], getB(), Value(), b.getBoolAttr(false), b.getBoolAttr(true), one, one);
  Value dB = b.create<GemmOp>(getLoc(), bt, getA(), dys[0], Value(), b.getBoolAttr(true), b.getBoolAttr(false), one, one);
  grads.append({dA, dB});
  return success();
}

LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<SoftmaxBackwardOp>(getLoc(), getInput().getType(), dys[0], getResult(), getAxisAttr()));
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  Value bwd = b.create<SoftmaxCrossEntropyBackwardOp>(getLoc(), getLogits().getType(), dys[0], getLogits(),
                                                      getLabels(), getLabelSmoothingAttr(), getReductionAttr());
  grads.append({bwd, Value()}); // labels are not differentiable
  return success();
}
