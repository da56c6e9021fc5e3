// Verifiers and inference of the ops in BackwardOps.td: each checks its types against the
// forward op's shape rule.
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace castor;

namespace {

std::vector<int64_t> vec(ArrayRef<int64_t> a) { return {a.begin(), a.end()}; }

// Fails unless `rule` succeeded and produced `expected`.
LogicalResult expectShape(Operation *op, const shape::ShapeResult &rule, const shape::Shape &expected,
                          StringRef what) {
  if (!rule)
    return op->emitOpError(rule.error);
  if (rule.shape != expected)
    return op->emitOpError(what) << " has shape " << shape::toString(expected) << ", the forward rule gives "
                                 << shape::toString(rule.shape);
  return success();
}

LogicalResult sameElementTypes(Operation *op) {
  return requireSameElementType(op->getLoc(), op->getOperands().take_front(2), "gradient operands");
}

} // namespace

LogicalResult Conv2dBackwardDataOp::verify() {
  if (failed(sameElementTypes(*this)))
    return failure();
  if (getAccumulate() && getAccumulate().getType() != getInputGrad().getType())
    return emitOpError("accumulate must have the input gradient's type ")
           << getInputGrad().getType() << ", got " << getAccumulate().getType();
  shape::Conv2dAttrs attrs{vec(getStrides()), vec(getPads()), vec(getDilations()), int64_t(getGroups())};
  return expectShape(*this, shape::conv2d(shapeOf(getInputGrad()), shapeOf(getFilter()), nullptr, attrs),
                     shapeOf(getOutputGrad()), "output_grad");
}

LogicalResult Conv2dBackwardFilterOp::verify() {
  if (failed(sameElementTypes(*this)))
    return failure();
  shape::Conv2dAttrs attrs{vec(getStrides()), vec(getPads()), vec(getDilations()), int64_t(getGroups())};
  return expectShape(*this, shape::conv2d(shapeOf(getInput()), shapeOf(getFilterGrad()), nullptr, attrs),
                     shapeOf(getOutputGrad()), "output_grad");
}

LogicalResult Conv2dBackwardBiasOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                     SmallVectorImpl<Type> &inferred) {
  auto dy = shapeOf(op.getOutputGrad());
  if (dy.size() != 4)
    return emitOptionalError(loc, "output_grad must be rank 4 [N, K, P, Q], got ", shape::toString(dy));
  return appendInferred(loc, shape::ShapeResult::ok({dy[1]}), getElementTypeOrSelf(op.getOutputGrad().getType()),
                        inferred);
}

LogicalResult BatchNormTrainingBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                            SmallVectorImpl<Type> &inferred) {
  // dx has x's type, dscale and dbias the per-channel operands' (f32 for mixed BatchNorm).
  if (failed(checkRule(loc, shape::batchNormTypes(elementTypesOf({op.getOutputGrad(), op.getInput()}),
                                                  elementTypesOf({op.getScale(), op.getBatchMean(),
                                                                  op.getBatchInvStd()})))))
    return failure();
  auto x = shapeOf(op.getInput());
  if (shapeOf(op.getOutputGrad()) != x)
    return emitOptionalError(loc, "output_grad and input shapes differ");
  auto rule = shape::batchNorm(x, {shapeOf(op.getScale()), shapeOf(op.getBatchMean()), shapeOf(op.getBatchInvStd())});
  Type channelType = getElementTypeOrSelf(op.getScale().getType());
  if (failed(appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred)))
    return failure();
  auto perChannel = shape::ShapeResult::ok(shapeOf(op.getScale()));
  (void)appendInferred(loc, perChannel, channelType, inferred);
  return appendInferred(loc, perChannel, channelType, inferred);
}

LogicalResult AttentionBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                    SmallVectorImpl<Type> &inferred) {
  if (failed(checkRule(loc, shape::attentionTypes(elementTypesOf({op.getQ(), op.getK(), op.getV(), op.getOutput(),
                                                                  op.getOutputGrad()}),
                                                  elementTypeOf(op.getStats())))))
    return failure();
  shape::Shape stats;
  auto rule = shape::attention(shapeOf(op.getQ()), shapeOf(op.getK()), shapeOf(op.getV()), &stats);
  if (!rule)
    return checkRule(loc, rule.error);
  if (shapeOf(op.getOutput()) != rule.shape || shapeOf(op.getOutputGrad()) != rule.shape)
    return emitOptionalError(loc, "output and output_grad must have shape ", shape::toString(rule.shape));
  if (shapeOf(op.getStats()) != stats)
    return emitOptionalError(loc, "stats must have shape ", shape::toString(stats));
  for (Value v : {op.getQ(), op.getK(), op.getV()})
    if (failed(appendInferred(loc, shape::ShapeResult::ok(shapeOf(v)), getElementTypeOrSelf(v.getType()), inferred)))
      return failure();
  return success();
}

LogicalResult LayerNormBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                    SmallVectorImpl<Type> &inferred) {
  if (failed(checkRule(loc, shape::batchNormTypes(elementTypesOf({op.getOutputGrad(), op.getInput()}),
                                                  elementTypesOf({op.getScale(), op.getMean(), op.getInvStd()})))))
    return failure();
  auto x = shapeOf(op.getInput());
  if (shapeOf(op.getOutputGrad()) != x)
    return emitOptionalError(loc, "output_grad and input shapes differ");
  shape::Shape stats;
  auto rule = shape::layerNorm(x, shapeOf(op.getScale()), shapeOf(op.getScale()), int64_t(op.getAxis()), &stats);
  if (rule && (shapeOf(op.getMean()) != stats || shapeOf(op.getInvStd()) != stats))
    return emitOptionalError(loc, "mean and inv_std must have shape ", shape::toString(stats));
  if (failed(appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred)))
    return failure();
  Type paramType = getElementTypeOrSelf(op.getScale().getType());
  auto params = shape::ShapeResult::ok(shapeOf(op.getScale()));
  (void)appendInferred(loc, params, paramType, inferred);
  return appendInferred(loc, params, paramType, inferred);
}

LogicalResult MaxPool2dBackwardOp::verify() {
  shape::Pool2dAttrs attrs{vec(getKernel()), vec(getStrides()), vec(getPads()), vec(getDilations()), getCeilMode()};
  return expectShape(*this, shape::pool2d(shapeOf(getInput()), attrs), shapeOf(getOutputGrad()), "output_grad");
}

LogicalResult AvgPool2dBackwardOp::verify() {
  if (getElementTypeOrSelf(getOutputGrad().getType()) != getElementTypeOrSelf(getInputGrad().getType()))
    return emitOpError("must keep the element type");
  shape::Pool2dAttrs attrs{vec(getKernel()), vec(getStrides()), vec(getPads()), {1, 1}, getCeilMode()};
  return expectShape(*this, shape::pool2d(shapeOf(getInputGrad()), attrs), shapeOf(getOutputGrad()), "output_grad");
}

LogicalResult GlobalAvgPoolBackwardOp::verify() {
  if (getElementTypeOrSelf(getOutputGrad().getType()) != getElementTypeOrSelf(getInputGrad().getType()))
    return emitOpError("must keep the element type");
  return expectShape(*this, shape::globalAvgPool(shapeOf(getInputGrad())), shapeOf(getOutputGrad()), "output_grad");
}

LogicalResult SoftmaxCrossEntropyBackwardOp::verify() {
  shape::Reduction reduction = getReduction() == Reduction::none  ? shape::Reduction::None
                               : getReduction() == Reduction::sum ? shape::Reduction::Sum
                                                                  : shape::Reduction::Mean;
  return expectShape(*this, shape::softmaxCrossEntropy(shapeOf(getLogits()), shapeOf(getLabels()), reduction),
                     shapeOf(getLossGrad()), "loss_grad");
}

LogicalResult ReduceSumToOp::verify() {
  if (getElementTypeOrSelf(getInput().getType()) != getElementTypeOrSelf(getOutput().getType()))
    return emitOpError("must keep the element type");
  auto in = shapeOf(getInput());
  return expectShape(*this, shape::broadcast(shapeOf(getOutput()), in), in, "input");
}

LogicalResult SplitOp::verify() {
  if (getOutputs().empty())
    return emitOpError("needs at least one result");
  std::vector<shape::Shape> parts;
  for (Value v : getOutputs()) {
    if (getElementTypeOrSelf(v.getType()) != getElementTypeOrSelf(getInput().getType()))
      return emitOpError("must keep the element type");
    parts.push_back(shapeOf(v));
  }
  return expectShape(*this, shape::concat(parts, int64_t(getAxis())), shapeOf(getInput()), "input");
}

LogicalResult SliceBackwardOp::verify() {
  if (getElementTypeOrSelf(getOutputGrad().getType()) != getElementTypeOrSelf(getInputGrad().getType()))
    return emitOpError("must keep the element type");
  return expectShape(*this,
                     shape::slice(shapeOf(getInputGrad()), vec(getStarts()), vec(getEnds()), vec(getSteps())),
                     shapeOf(getOutputGrad()), "output_grad");
}

LogicalResult CountCorrectOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc, Adaptor op,
                                               SmallVectorImpl<Type> &inferred) {
  auto rule = shape::softmaxCrossEntropy(shapeOf(op.getLogits()), shapeOf(op.getLabels()), shape::Reduction::Sum);
  return appendInferred(loc, rule, IntegerType::get(ctx, 64), inferred);
}

#define GET_OP_CLASSES
#include "castor/Dialect/BackwardOps.cpp.inc"

void CastorDialect::registerBackwardOps() {
  addOperations<
#define GET_OP_LIST
#include "castor/Dialect/BackwardOps.cpp.inc"
      >();
}
