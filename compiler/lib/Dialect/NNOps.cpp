// Result-type inference of the ops in NNOps.td; the verifier reuses it through
// InferTypeOpInterface, so each shape rule is written once (runtime/shape/shape_rules.cpp).
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace castor;

namespace {
std::vector<int64_t> vec(ArrayRef<int64_t> a) { return {a.begin(), a.end()}; }
} // namespace

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                         SmallVectorImpl<Type> &inferred) {
  if (failed(requireSameElementType(loc, op.getOperands(), "input, filter and bias")))
    return failure();
  shape::Conv2dAttrs attrs{vec(op.getStrides()), vec(op.getPads()), vec(op.getDilations()),
                          static_cast<int64_t>(op.getGroups())};
  std::optional<shape::Shape> bias;
  if (op.getBias())
    bias = shapeOf(op.getBias());
  auto rule = shape::conv2d(shapeOf(op.getInput()), shapeOf(op.getFilter()), bias ? &*bias : nullptr, attrs);
  return appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred);
}

// Both forms: x's type for y, the per-channel operands' type (f32 for mixed BatchNorm) for the
// statistics; shape::batchNormTypes says which combinations are valid.
LogicalResult BatchNormTrainingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                    SmallVectorImpl<Type> &inferred) {
  SmallVector<Value> perChannelValues{op.getScale(), op.getBias()};
  llvm::append_range(perChannelValues, op.getRunningStats());
  if (!op.getRunningStats().empty() && op.getRunningStats().size() != 2)
    return emitOptionalError(loc, "running statistics are a mean and a variance, got ", op.getRunningStats().size(),
                             " operands");
  if (failed(checkRule(loc, shape::batchNormTypes({elementTypeOf(op.getInput())}, elementTypesOf(perChannelValues)))))
    return failure();
  std::vector<shape::Shape> channelShapes;
  for (Value v : perChannelValues)
    channelShapes.push_back(shapeOf(v));
  auto rule = shape::batchNorm(shapeOf(op.getInput()), channelShapes);
  Type statType = getElementTypeOrSelf(op.getScale().getType());
  if (failed(appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred)))
    return failure();
  auto perChannel = shape::ShapeResult::ok(shapeOf(op.getScale()));
  (void)appendInferred(loc, perChannel, statType, inferred);
  (void)appendInferred(loc, perChannel, statType, inferred);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(checkRule(loc, shape::batchNormTypes({elementTypeOf(op.getInput())},
                                                  elementTypesOf({op.getScale(), op.getBias()})))))
    return failure();
  shape::Shape stats;
  auto rule = shape::layerNorm(shapeOf(op.getInput()), shapeOf(op.getScale()), shapeOf(op.getBias()),
                               int64_t(op.getAxis()), &stats);
  if (failed(appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred)))
    return failure();
  Type statType = getElementTypeOrSelf(op.getScale().getType());
  (void)appendInferred(loc, shape::ShapeResult::ok(stats), statType, inferred);
  return appendInferred(loc, shape::ShapeResult::ok(stats), statType, inferred);
}

// o has q's shape rule and type; the log-sum-exp is f32 (shape::attentionTypes).
LogicalResult AttentionOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc, Adaptor op,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(checkRule(loc, shape::attentionTypes(elementTypesOf({op.getQ(), op.getK(), op.getV()}),
                                                  shape::ElementType::F32))))
    return failure();
  shape::Shape stats;
  auto rule = shape::attention(shapeOf(op.getQ()), shapeOf(op.getK()), shapeOf(op.getV()), &stats);
  if (failed(appendInferred(loc, rule, getElementTypeOrSelf(op.getQ().getType()), inferred)))
    return failure();
  return appendInferred(loc, shape::ShapeResult::ok(stats), Float32Type::get(ctx), inferred);
}

LogicalResult BatchNormApplyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                 SmallVectorImpl<Type> &inferred) {
  auto data = batchNormData(loc, op.getInput(), op.getResidual());
  if (failed(data))
    return failure();
  SmallVector<Value> perChannelValues{op.getScale(), op.getBias(), op.getBatchMean(), op.getBatchInvStd()};
  if (failed(checkRule(loc, shape::batchNormTypes(elementTypesOf(*data), elementTypesOf(perChannelValues)))))
    return failure();
  std::vector<shape::Shape> channelShapes;
  for (Value v : perChannelValues)
    channelShapes.push_back(shapeOf(v));
  auto rule = shape::batchNorm(shapeOf(op.getInput()), channelShapes);
  return appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred);
}

// Recomputation (RecomputeOpInterface): a batch norm's output again from its statistics; the
// statistics themselves are not recomputed (they are small, and kept).
Value BatchNormTrainingOp::buildRecompute(OpBuilder &b, unsigned resultIndex, ValueRange operands) {
  if (resultIndex != 0)
    return {};
  return b.create<BatchNormApplyOp>(getLoc(), getOutput().getType(), operands[0], operands[1], operands[2],
                                    getBatchMean(), getBatchInvStd(), Value(), b.getBoolAttr(false), FloatAttr());
}
int64_t BatchNormTrainingOp::getRecomputeFlopsPerElement() { return 4; }
// A multiply-add per filter tap of an output element.
int64_t Conv2dOp::getRecomputeFlopsPerElement() {
  auto w = llvm::cast<RankedTensorType>(getFilter().getType());
  return 2 * w.getDimSize(1) * w.getDimSize(2) * w.getDimSize(3) + (getBias() ? 1 : 0);
}
bool Conv2dOp::isCheapToRecompute() { return false; }
int64_t BatchNormApplyOp::getRecomputeFlopsPerElement() {
  return 4 + (getResidual() ? 1 : 0) + (getRelu() ? 1 : 0) + (getClipMaxAttr() ? 1 : 0);
}
LogicalResult BatchNormApplyOp::verify() {
  if (getClipMaxAttr() && !getRelu())
    return emitOpError("clip_max needs relu: it bounds the activation from above");
  return verifyClipMax(*this, getClipMaxAttr(), bool(getResidual()));
}

LogicalResult BatchNormInferenceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                     SmallVectorImpl<Type> &inferred) {
  SmallVector<Value> perChannelValues{op.getScale(), op.getBias(), op.getMean(), op.getVariance()};
  if (failed(checkRule(loc, shape::batchNormTypes({elementTypeOf(op.getInput())}, elementTypesOf(perChannelValues)))))
    return failure();
  std::vector<shape::Shape> channelShapes;
  for (Value v : perChannelValues)
    channelShapes.push_back(shapeOf(v));
  auto rule = shape::batchNorm(shapeOf(op.getInput()), channelShapes);
  return appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                            SmallVectorImpl<Type> &inferred) {
  shape::Pool2dAttrs attrs{vec(op.getKernel()), vec(op.getStrides()), vec(op.getPads()), vec(op.getDilations()),
                           op.getCeilMode()};
  return appendInferred(loc, shape::pool2d(shapeOf(op.getInput()), attrs),
                        getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult AvgPool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                            SmallVectorImpl<Type> &inferred) {
  shape::Pool2dAttrs attrs{vec(op.getKernel()), vec(op.getStrides()), vec(op.getPads()), {1, 1}, op.getCeilMode()};
  return appendInferred(loc, shape::pool2d(shapeOf(op.getInput()), attrs),
                        getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult GlobalAvgPoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                SmallVectorImpl<Type> &inferred) {
  return appendInferred(loc, shape::globalAvgPool(shapeOf(op.getInput())),
                        getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                       SmallVectorImpl<Type> &inferred) {
  if (failed(requireSameElementType(loc, op.getOperands(), "a, b and c")))
    return failure();
  std::optional<shape::Shape> c;
  if (op.getC())
    c = shapeOf(op.getC());
  auto rule = shape::gemm(shapeOf(op.getA()), shapeOf(op.getB()), c ? &*c : nullptr, op.getTransA(), op.getTransB());
  return appendInferred(loc, rule, getElementTypeOrSelf(op.getA().getType()), inferred);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                         SmallVectorImpl<Type> &inferred) {
  if (failed(requireSameElementType(loc, op.getOperands(), "a and b")))
    return failure();
  return appendInferred(loc, shape::matmul(shapeOf(op.getA()), shapeOf(op.getB())),
                        getElementTypeOrSelf(op.getA().getType()), inferred);
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                          SmallVectorImpl<Type> &inferred) {
  return appendInferred(loc, shape::softmax(shapeOf(op.getInput()), op.getAxis()),
                        getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                      SmallVectorImpl<Type> &inferred) {
  double smoothing = op.getLabelSmoothing().convertToDouble();
  if (smoothing < 0.0 || smoothing > 1.0)
    return emitOptionalError(loc, "label_smoothing must be in [0, 1], got ", smoothing);
  shape::Reduction reduction = op.getReduction() == Reduction::none  ? shape::Reduction::None
                               : op.getReduction() == Reduction::sum ? shape::Reduction::Sum
                                                                      : shape::Reduction::Mean;
  return appendInferred(loc, shape::softmaxCrossEntropy(shapeOf(op.getLogits()), shapeOf(op.getLabels()), reduction),
                        getElementTypeOrSelf(op.getLogits().getType()), inferred);
}

#define GET_OP_CLASSES
#include "castor/Dialect/NNOps.cpp.inc"

void CastorDialect::registerNNOps() {
  addOperations<
#define GET_OP_LIST
#include "castor/Dialect/NNOps.cpp.inc"
      >();
}

// Precision classes (PrecisionOpInterface): tensor-core work in low precision, softmax, the loss
// and reductions in fp32. BatchNorm reads and writes activations in the precision they come in
// and keeps fp32 parameters and statistics, as PyTorch AMP and cuDNN run it: an fp32 copy of
// each activation would double the memory of a ResNet's training step.
PrecisionClass Conv2dOp::getPrecisionClass() { return PrecisionClass::LowPrecision; }
PrecisionClass GemmOp::getPrecisionClass() { return PrecisionClass::LowPrecision; }
PrecisionClass MatmulOp::getPrecisionClass() { return PrecisionClass::LowPrecision; }
PrecisionClass BatchNormTrainingOp::getPrecisionClass() { return PrecisionClass::Mixed; }
PrecisionClass BatchNormInferenceOp::getPrecisionClass() { return PrecisionClass::Mixed; }
PrecisionClass LayerNormOp::getPrecisionClass() { return PrecisionClass::Mixed; }
// As PyTorch AMP's scaled_dot_product_attention (the fused kernels run in f16 or bf16).
PrecisionClass AttentionOp::getPrecisionClass() { return PrecisionClass::LowPrecision; }
// Softmax keeps its input's type and computes in f32 inside the kernel: the probabilities
// PyTorch AMP computes in f32 and casts to f16 for the next matrix product, without the casts
// (attention's scores are the largest tensors of a transformer).
PrecisionClass SoftmaxOp::getPrecisionClass() { return PrecisionClass::Mixed; }
PrecisionClass SoftmaxCrossEntropyOp::getPrecisionClass() { return PrecisionClass::FullPrecision; }
PrecisionClass GlobalAvgPoolOp::getPrecisionClass() { return PrecisionClass::FullPrecision; }
