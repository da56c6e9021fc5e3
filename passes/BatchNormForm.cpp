#include "StepFunctions.h"
// castor-batch-norm-form: every BatchNorm of @forward in the form the user chose to train it in.
#include "BatchNormInference.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Support/OptionChoices.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORBATCHNORMFORM
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// Running statistics must be buffers: a trainable parameter there (an exporter merged a fresh
// model's zero mean or unit variance with its bias or weight) would be both updated by the
// optimizer and read as a statistic.
LogicalResult checkStatistics(Operation *bn, ValueRange stats) {
  for (Value stat : stats) {
    auto param = stat.getDefiningOp<castor::ParameterOp>();
    if (!param)
      return bn->emitError("its running statistics must be parameters of the model, not computed values");
    if (param.getTrainable())
      return bn->emitError("reads running statistics from the trainable parameter '")
             << param.getName()
             << "' (an exporter merges equal initializers: a fresh model's zero mean and unit variance can "
                "become its bias and weight); export a model whose statistics differ from its weights";
  }
  return success();
}

struct BatchNormFormPass : castor::impl::CastorBatchNormFormBase<BatchNormFormPass> {
  using CastorBatchNormFormBase::CastorBatchNormFormBase;

  void runOnOperation() override {
    if (std::string error = castor::choices::checkChoice("form", form, castor::choices::kBatchNormForms);
        !error.empty()) {
      getOperation().emitError(error) << ", not '" << form << "'";
      return signalPassFailure();
    }
    auto forward = castor::forwardFunction(getOperation());
    if (!forward)
      return signalPassFailure();
    WalkResult result = forward.walk([&](Operation *op) {
      if (auto bn = llvm::dyn_cast<castor::BatchNormInferenceOp>(op)) {
        // Trained as it is (frozen statistics) or on batch statistics: either way its mean and
        // variance are statistics.
        if (failed(checkStatistics(op, {bn.getMean(), bn.getVariance()})))
          return WalkResult::interrupt();
        if (form != "train")
          return WalkResult::advance();
        // The statistics' momentum is not in an inference-form export: PyTorch's default.
        OpBuilder b(op);
        auto train = b.create<castor::BatchNormTrainingOp>(
            bn.getLoc(), bn.getOutput().getType(), bn.getScale().getType(), bn.getScale().getType(), bn.getInput(),
            bn.getScale(), bn.getBias(), ValueRange{bn.getMean(), bn.getVariance()}, bn.getEpsilonAttr(),
            b.getF64FloatAttr(0.1), /*sync=*/nullptr);
        bn.getOutput().replaceAllUsesWith(train.getOutput());
        bn.erase();
      } else if (auto bn = llvm::dyn_cast<castor::BatchNormTrainingOp>(op); bn && form == "frozen") {
        if (failed(checkStatistics(op, bn.getRunningStats())) || failed(castor::replaceWithInferenceForm(bn)))
          return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
