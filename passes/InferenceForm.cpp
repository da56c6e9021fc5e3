#include "StepFunctions.h"
// castor-inference-form: @forward as evaluation runs it.
#include "BatchNormInference.h"
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/state_names.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORINFERENCEFORM
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

struct InferenceFormPass : castor::impl::CastorInferenceFormBase<InferenceFormPass> {
  void runOnOperation() override {
    auto forward = castor::forwardFunction(getOperation());
    if (!forward)
      return signalPassFailure();
    WalkResult result = forward.walk([&](Operation *op) {
      if (auto bn = llvm::dyn_cast<castor::BatchNormTrainingOp>(op)) {
        if (failed(castor::replaceWithInferenceForm(bn)))
          return WalkResult::interrupt();
      } else if (auto dropout = llvm::dyn_cast<castor::DropoutOp>(op)) {
        dropout.getOutput().replaceAllUsesWith(dropout.getInput());
        dropout.erase();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    OpBuilder b(forward);
    if (forward.getNumArguments() != 1 || forward.getNumResults() != 1) {
      forward.emitError("evaluation needs a model with one input and one output");
      return signalPassFailure();
    }
    forward.setArgAttr(0, castor::attr::kName, b.getStringAttr(castor::names::kImages));
    forward.setResultAttr(0, castor::attr::kName, b.getStringAttr(castor::names::kOutput));
  }
};

} // namespace
