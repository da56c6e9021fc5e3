// Vector-Jacobian products of the ops in NNOps.td (AutodiffOpInterface).
#include "castor/Dialect/Autodiff.h"
#include "castor/Dialect/CastorOps.h"

#include <numeric>

using namespace mlir;
using namespace castor;

LogicalResult Conv2dOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  Value dy = dys[0];
  grads.push_back(b.create<Conv2dBackwardDataOp>(getLoc(), getInput().getType(), dy, getFilter(), Value(), getStridesAttr(),
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
                                                   getBatchInvStd(), getEpsilonAttr(), getSyncAttr());
  grads.append({bwd.getInputGrad(), bwd.getScaleGrad(), bwd.getBiasGrad()});
  grads.append(getRunningStats().size(), Value()); // buffers, not differentiable
  return success();
}

LogicalResult AttentionOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  if (dys[1])
    return emitOpError("differentiating through the attention's log-sum-exp is not supported");
  auto bwd = b.create<AttentionBackwardOp>(getLoc(), getQ(), getK(), getV(), getOutput(), getStats(), dys[0],
                                           getScaleAttr());
  grads.append({bwd.getQGrad(), bwd.getKGrad(), bwd.getVGrad()});
  return success();
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &grads) {
  if (dys[1] || dys[2])
    return emitOpError("differentiating through the layer statistics is not supported");
  auto bwd = b.create<LayerNormBackwardOp>(getLoc(), dys[0], getInput(), getScale(), getMean(), getInvStd(),
                                           getAxisAttr());
  grads.append({bwd.getInputGrad(), bwd.getScaleGrad(), bwd.getBiasGrad()});
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
  auto dyType = llvm::cast<RankedTensorType>(dys[0].getType());
  if (a.getRank() < 2 || bt.getRank() < 2)
    return emitOpError("the gradient of matmul with a rank-1 operand is not supported");
  Location loc = getLoc();
  auto one = b.getF64FloatAttr(1.0);
  auto gemm = [&](Type type, Value x, Value y, bool transX, bool transY) -> Value {
    return b.create<GemmOp>(loc, type, x, y, Value(), b.getBoolAttr(transX), b.getBoolAttr(transY), one, one);
  };
  if (bt.getRank() == 2) {
    // A linear layer on leading dimensions: fold them into the rows, dA = dY B^T, dB = A^T dY.
    const int64_t k = a.getShape().back(), n = bt.getShape().back();
    const int64_t rows = a.getNumElements() / std::max<int64_t>(k, 1);
    Value a2 = a.getRank() == 2 ? getA() : b.create<ReshapeOp>(loc, RankedTensorType::get({rows, k}, a.getElementType()), getA()).getResult();
    Value dy2 = dyType.getRank() == 2 ? dys[0]
                                      : b.create<ReshapeOp>(loc, RankedTensorType::get({rows, n}, dyType.getElementType()), dys[0]).getResult();
    Value dA = gemm(RankedTensorType::get({rows, k}, a.getElementType()), dy2, getB(), false, true);
    if (a.getRank() != 2)
      dA = b.create<ReshapeOp>(loc, a, dA);
    grads.append({dA, gemm(bt, a2, dy2, true, false)});
    return success();
  }
  // Batched: dA = dY B^T and dB = A^T dY over the broadcast batch, summed back to each operand's shape.
  auto swapLast = [&](Value v) -> Value {
    int64_t rank = llvm::cast<RankedTensorType>(v.getType()).getRank();
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return b.create<TransposeOp>(loc, v, b.getDenseI64ArrayAttr(perm));
  };
  Value dA = b.create<MatmulOp>(loc, dys[0], swapLast(getB()));
  Value dB = b.create<MatmulOp>(loc, swapLast(getA()), dys[0]);
  grads.append({reduceGradTo(b, loc, dA, a), reduceGradTo(b, loc, dB, bt)});
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
