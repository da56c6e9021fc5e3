#include "BatchNormInference.h"

using namespace mlir;

LogicalResult castor::replaceWithInferenceForm(BatchNormTrainingOp bn) {
  if (bn.getRunningStats().size() != 2)
    return bn.emitError("needs its running statistics for inference");
  if (!bn.getBatchMean().use_empty() || !bn.getBatchInvStd().use_empty())
    return bn.emitError("its batch statistics are used, so it has no inference form");
  OpBuilder b(bn);
  Value y = b.create<BatchNormInferenceOp>(bn.getLoc(), bn.getOutput().getType(), bn.getInput(), bn.getScale(),
                                           bn.getBias(), bn.getRunningStats()[0], bn.getRunningStats()[1],
                                           bn.getEpsilonAttr());
  bn.getOutput().replaceAllUsesWith(y);
  bn.erase();
  return success();
}
