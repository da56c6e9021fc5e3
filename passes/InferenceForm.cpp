// castor-inference-form: @forward as evaluation runs it.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORINFERENCEFORM
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

struct InferenceFormPass : castor::impl::CastorInferenceFormBase<InferenceFormPass> {
  void runOnOperation() override {
    auto forward = getOperation().lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      getOperation().emitError("no @forward function");
      return signalPassFailure();
    }
    WalkResult result = forward.walk([&](Operation *op) {
      OpBuilder b(op);
      if (auto bn = llvm::dyn_cast<castor::BatchNormTrainingOp>(op)) {
        if (bn.getRunningStats().size() != 2) {
          bn.emitError("needs its running statistics for inference");
          return WalkResult::interrupt();
        }
        if (!bn.getBatchMean().use_empty() || !bn.getBatchInvStd().use_empty()) {
          bn.emitError("its batch statistics are used, so it has no inference form");
          return WalkResult::interrupt();
        }
        Value y = b.create<castor::BatchNormInferenceOp>(bn.getLoc(), bn.getOutput().getType(), bn.getInput(),
                                                         bn.getScale(), bn.getBias(), bn.getRunningStats()[0],
                                                         bn.getRunningStats()[1], bn.getEpsilonAttr());
        bn.getOutput().replaceAllUsesWith(y);
        bn.erase();
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
    forward.setArgAttr(0, "castor.name", b.getStringAttr("images"));
    forward.setResultAttr(0, "castor.name", b.getStringAttr("output"));
  }
};

} // namespace
