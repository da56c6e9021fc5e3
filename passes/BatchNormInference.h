// A training-form BatchNorm replaced by the inference form on its running statistics: what
// evaluation runs (castor-inference-form) and what training with frozen statistics runs
// (castor-batch-norm-form=frozen).
#pragma once

#include "castor/Dialect/CastorOps.h"

namespace castor {

// Fails, with the reason on `bn`, when it has no running statistics or its batch statistics are
// used; otherwise replaces it and erases it.
mlir::LogicalResult replaceWithInferenceForm(BatchNormTrainingOp bn);

} // namespace castor
