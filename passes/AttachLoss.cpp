#include "StepFunctions.h"
// castor-attach-loss: appends the training loss to @forward.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/state_names.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORATTACHLOSS
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

struct AttachLossPass : castor::impl::CastorAttachLossBase<AttachLossPass> {
  using CastorAttachLossBase::CastorAttachLossBase;

  void runOnOperation() override {
    auto forward = castor::forwardFunction(getOperation(), " to attach a loss to");
    if (!forward)
      return signalPassFailure();
    if (labelSmoothing < 0.0 || labelSmoothing > 1.0) {
      forward.emitError("label smoothing must be in [0, 1], got ") << labelSmoothing;
      return signalPassFailure();
    }
    auto ret = llvm::cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    auto logitsType = ret.getNumOperands() == 1 ? llvm::dyn_cast<RankedTensorType>(ret.getOperand(0).getType())
                                                : RankedTensorType();
    if (forward.getNumArguments() != 1 || !logitsType || logitsType.getRank() != 2 ||
        !llvm::isa<FloatType>(logitsType.getElementType())) {
      forward.emitError("a loss needs a model with one input and one [N, C] floating-point output");
      return signalPassFailure();
    }

    OpBuilder b(ret);
    MLIRContext *ctx = &getContext();
    auto labelsType = RankedTensorType::get({logitsType.getDimSize(0)}, IntegerType::get(ctx, 64));
    Block &body = forward.getBody().front();
    forward.insertArgument(1, labelsType, {}, forward.getLoc());
    Value labels = body.getArgument(1);
    Value logits = ret.getOperand(0);
    Value loss = b.create<castor::SoftmaxCrossEntropyOp>(
        NameLoc::get(b.getStringAttr("loss")), RankedTensorType::get({}, logitsType.getElementType()), logits, labels,
        b.getF64FloatAttr(labelSmoothing), castor::ReductionAttr::get(ctx, castor::Reduction::mean));
    b.create<func::ReturnOp>(ret.getLoc(), ValueRange{loss, logits});
    ret.erase();

    forward.setFunctionType(b.getFunctionType(body.getArgumentTypes(), {loss.getType(), logits.getType()}));
    auto named = [&](StringRef name) {
      return b.getDictionaryAttr(b.getNamedAttr(castor::attr::kName, b.getStringAttr(name)));
    };
    forward.setAllArgAttrs(ArrayRef<DictionaryAttr>{named(castor::names::kImages), named(castor::names::kLabels)});
    forward.setAllResultAttrs(ArrayRef<DictionaryAttr>{named(castor::names::kLoss), named(castor::names::kLogits)});
  }
};

} // namespace
