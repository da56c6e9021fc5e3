// Inference and verifiers of the ops in FusedOps.td, by batch_norm_training's shared rules.
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/PlanForm.h"
#include "castor/Dialect/ShapeInference.h"
#include "plan/fused_elementwise.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <algorithm>
#include <tuple>

using namespace mlir;
using namespace castor;

LogicalResult BatchNormReluTrainingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                                        SmallVectorImpl<Type> &inferred) {
  auto data = batchNormData(loc, op.getInput(), op.getResidual());
  if (failed(data))
    return failure();
  if (failed(checkRule(loc, shape::batchNormTypes(elementTypesOf(*data), elementTypesOf({op.getScale(), op.getBias()})))))
    return failure();
  auto rule = shape::batchNorm(shapeOf(op.getInput()), {shapeOf(op.getScale()), shapeOf(op.getBias())});
  if (failed(appendInferred(loc, rule, getElementTypeOrSelf(op.getInput().getType()), inferred)))
    return failure();
  auto perChannel = shape::ShapeResult::ok(shapeOf(op.getScale()));
  Type statType = getElementTypeOrSelf(op.getScale().getType());
  (void)appendInferred(loc, perChannel, statType, inferred);
  return appendInferred(loc, perChannel, statType, inferred);
}

LogicalResult BatchNormReluTrainingOp::verify() { return verifyClipMax(*this, getClipMaxAttr(), bool(getResidual())); }

// Recomputation (RecomputeOpInterface): the output again from the batch statistics, as one
// batch_norm_apply with the same activation (relu, or ReLU6's clip).
Value BatchNormReluTrainingOp::buildRecompute(OpBuilder &b, unsigned resultIndex, ValueRange operands) {
  if (resultIndex != 0)
    return {};
  Value residual = getResidual() ? operands[3] : Value();
  return b.create<BatchNormApplyOp>(getLoc(), getOutput().getType(), operands[0], operands[1], operands[2],
                                    getBatchMean(), getBatchInvStd(), residual, b.getBoolAttr(true), getClipMaxAttr());
}
int64_t BatchNormReluTrainingOp::getRecomputeFlopsPerElement() { return getResidual() ? 6 : 5; }

LogicalResult BatchNormReluTrainingBackwardOp::verify() {
  if (failed(verifyClipMax(*this, getClipMaxAttr(), bool(getResidualGrad()))))
    return failure();
  SmallVector<Value> data{getOutputGrad(), getInput(), getOutput(), getInputGrad()};
  if (getResidualGrad())
    data.push_back(getResidualGrad());
  for (Value v : data)
    if (v.getType() != getInput().getType())
      return emitOpError("output_grad, output and the data gradients must have the input's type");
  if (failed(checkRule(getLoc(), shape::batchNormTypes(elementTypesOf(data),
                                                       elementTypesOf({getScale(), getBias(), getBatchMean(),
                                                                       getBatchInvStd(), getScaleGrad(),
                                                                       getBiasGrad()})))))
    return failure();
  auto rule = shape::batchNorm(shapeOf(getInput()), {shapeOf(getScale()), shapeOf(getBias()), shapeOf(getBatchMean()),
                                                     shapeOf(getBatchInvStd())});
  if (!rule)
    return emitOpError(rule.error);
  if (getScaleGrad().getType() != getScale().getType() || getBiasGrad().getType() != getScale().getType())
    return emitOpError("scale and bias gradients must have the scale's type");
  return success();
}

// The program and the shapes by the rules the plan validator applies (elementwise_program.h,
// shape::fusedElementwise), through plan::checkFusedElementwise.
LogicalResult FusedElementwiseOp::verify() {
  std::vector<plan::DType> inputTypes, outputTypes;
  std::vector<shape::Shape> inputShapes, outputShapes;
  for (auto [values, types, shapes] : {std::tuple(ValueRange(getInputs()), &inputTypes, &inputShapes),
                                       std::tuple(ValueRange(getOutputs()), &outputTypes, &outputShapes)})
    for (Value v : values) {
      auto dtype = planDtypeOf(getElementTypeOrSelf(v.getType()));
      if (failed(dtype))
        return emitOpError("element type ") << getElementTypeOrSelf(v.getType()) << " has no plan form";
      types->push_back(*dtype);
      shapes->push_back(shapeOf(v));
    }
  auto group = plan::checkFusedElementwise(getProgram().str(), inputShapes, inputTypes, outputShapes, outputTypes);
  if (!group)
    return emitOpError(group.message());
  return success();
}

// Recomputing a group runs all of it: one operation per instruction and element.
int64_t FusedElementwiseOp::getRecomputeFlopsPerElement() {
  return std::max<int64_t>(1, int64_t(llvm::count(getProgram(), '\n')) - 1); // the lines but `out`
}

// The copy computes the element-wise outputs only; a reduction's result cannot be recomputed
// alone (castor-recompute then keeps it from the forward).
Value FusedElementwiseOp::buildRecompute(OpBuilder &builder, unsigned resultIndex, ValueRange operands) {
  std::vector<plan::DType> inputTypes;
  for (Value v : getInputs())
    inputTypes.push_back(*planDtypeOf(getElementTypeOrSelf(v.getType())));
  auto program = plan::parseElementwiseProgram(getProgram().str(), inputTypes);
  if (!program || program->reduction(resultIndex).kind != plan::ReduceKind::None)
    return Value();
  plan::ElementwiseProgram copy = *program;
  copy.outputs.clear();
  copy.reductions.clear();
  SmallVector<Type> types;
  unsigned index = 0;
  for (size_t j = 0; j < program->outputs.size(); ++j) {
    if (program->reduction(j).kind != plan::ReduceKind::None)
      continue;
    if (j == resultIndex)
      index = unsigned(types.size());
    copy.outputs.push_back(program->outputs[j]);
    types.push_back(getResult(unsigned(j)).getType());
  }
  auto op = builder.create<FusedElementwiseOp>(getLoc(), types, operands,
                                               builder.getStringAttr(plan::printElementwiseProgram(copy)));
  return op->getResult(index);
}

#define GET_OP_CLASSES
#include "castor/Dialect/FusedOps.cpp.inc"

void CastorDialect::registerFusedOps() {
  addOperations<
#define GET_OP_LIST
#include "castor/Dialect/FusedOps.cpp.inc"
      >();
}
