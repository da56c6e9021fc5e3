// Verifiers and buffer ties of the ops in OptimizerOps.td.
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/ShapeInference.h"
#include "castor/Support/OptionChoices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace castor;

static LogicalResult sameShapes(Operation *op, ValueRange values) {
  for (Value v : values.drop_front())
    if (shapeOf(v) != shapeOf(values.front()))
      return op->emitOpError("parameter, gradient and optimizer state must have one shape, got ")
             << v.getType() << " and " << values.front().getType();
  return success();
}

LogicalResult SgdUpdateOp::verify() {
  if (failed(requireSameElementType(getLoc(), {getParam(), getGrad()}, "param and grad")))
    return failure();
  if (getMomentum().convertToDouble() < 0 || getWeightDecay().convertToDouble() < 0)
    return emitOpError("momentum and weight_decay must be non-negative");
  if (getNesterov() && getMomentum().convertToDouble() <= 0)
    return emitOpError("nesterov needs a positive momentum");
  return sameShapes(*this, {getParam(), getGrad(), getMomentumBuffer()});
}

std::optional<unsigned> SgdUpdateOp::getTiedOperandIndex(unsigned result) { return result == 0 ? 0 : 2; }

LogicalResult AdamwUpdateOp::verify() {
  if (failed(requireSameElementType(getLoc(), {getParam(), getGrad()}, "param and grad")))
    return failure();
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1))
    return emitOpError("betas must be in [0, 1)");
  if (!(getEps().convertToDouble() > 0))
    return emitOpError("eps must be positive");
  return sameShapes(*this, {getParam(), getGrad(), getExpAvg(), getExpAvgSq()});
}

std::optional<unsigned> AdamwUpdateOp::getTiedOperandIndex(unsigned result) { return result == 0 ? 0 : result + 1; }

LogicalResult BatchNormRunningUpdateOp::verify() {
  // The per-channel operands; the skip flag (found_inf) is an f32 scalar whatever they are.
  return checkRule(getLoc(),
                   shape::batchNormTypes({}, elementTypesOf({getRunningMean(), getRunningVar(), getBatchMean(),
                                                             getBatchInvStd()})));
}

std::optional<unsigned> BatchNormRunningUpdateOp::getTiedOperandIndex(unsigned result) { return result; }

std::optional<unsigned> IncrementOp::getTiedOperandIndex(unsigned) { return 0; }

LogicalResult IncrementOp::verify() {
  if (getWhen() != "clear" && getWhen() != "set")
    return emitOpError("when must be \"clear\" or \"set\", got '") << getWhen() << "'";
  return success();
}

// The gradients are rewritten in place; the flag (or norm) is a new value.
static std::optional<unsigned> tiedGradient(Operation *op, unsigned result) {
  if (result + 1 == op->getNumResults())
    return std::nullopt;
  return result;
}

static LogicalResult verifyGradientList(Operation *op, ValueRange grads, ValueRange results) {
  if (grads.empty())
    return op->emitOpError("needs at least one gradient");
  if (results.size() != grads.size() + 1)
    return op->emitOpError("returns each gradient and one scalar");
  for (auto [g, r] : llvm::zip(grads, results.drop_back()))
    if (g.getType() != r.getType())
      return op->emitOpError("result types must match the gradients");
  return success();
}

std::optional<unsigned> AllReduceOp::getTiedOperandIndex(unsigned result) { return result; }
LogicalResult AllReduceOp::verify() {
  StringRef reduction = getReduction();
  if (reduction != "mean" && reduction != "sum" && reduction != "max")
    return emitOpError("reduction must be mean, sum or max, got '") << reduction << "'";
  if (getValues().empty())
    return emitOpError("needs at least one tensor");
  if (getValues().size() != getReduced().size())
    return emitOpError("returns each tensor it reduces");
  for (auto [v, r] : llvm::zip(getValues(), getReduced())) {
    if (v.getType() != r.getType())
      return emitOpError("result types must match the operands");
    if (reduction == "mean" && !llvm::isa<FloatType>(getElementTypeOrSelf(v.getType())))
      return emitOpError("a mean needs floating-point tensors");
  }
  return success();
}

std::optional<unsigned> UnscaleGradientsOp::getTiedOperandIndex(unsigned result) {
  return tiedGradient(*this, result);
}
LogicalResult UnscaleGradientsOp::verify() {
  return verifyGradientList(*this, getGrads(), getOperation()->getResults());
}

std::optional<unsigned> ClipGradNormOp::getTiedOperandIndex(unsigned result) { return tiedGradient(*this, result); }
LogicalResult ClipGradNormOp::verify() {
  if (!(getMaxNorm().convertToDouble() > 0))
    return emitOpError("max_norm must be positive");
  return verifyGradientList(*this, getGrads(), getOperation()->getResults());
}

std::optional<unsigned> UpdateLossScaleOp::getTiedOperandIndex(unsigned result) { return result; }

LogicalResult LrScheduleOp::verify() {
  StringRef kind = getKind();
  if (std::string error = choices::checkChoice("kind", kind, choices::kSchedules); !error.empty())
    return emitOpError(error) << ", got '" << kind << "'";
  if (int64_t(getWarmupSteps()) < 0 || int64_t(getStepSize()) < 1 || int64_t(getTotalSteps()) < 1)
    return emitOpError("warmup_steps must be >= 0, step_size and total_steps >= 1");
  return success();
}

#define GET_OP_CLASSES
#include "castor/Dialect/OptimizerOps.cpp.inc"

void CastorDialect::registerOptimizerOps() {
  addOperations<
#define GET_OP_LIST
#include "castor/Dialect/OptimizerOps.cpp.inc"
      >();
}
