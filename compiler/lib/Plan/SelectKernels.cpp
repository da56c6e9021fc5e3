// castor-select-kernels: names the runtime kernel of every op of a function.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Plan/PlanPasses.h"
#include "castor/Support/OptionChoices.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORSELECTKERNELS
#include "castor/Plan/PlanPasses.h.inc"
} // namespace castor

using namespace mlir;

namespace {

struct SelectKernelsPass : castor::impl::CastorSelectKernelsBase<SelectKernelsPass> {
  using CastorSelectKernelsBase::CastorSelectKernelsBase;

  void runOnOperation() override {
    if (std::string error = castor::choices::checkChoice("target", target, castor::choices::kTargets);
        !error.empty()) {
      getOperation().emitError(error) << ", got '" << target << "'";
      return signalPassFailure();
    }
    // A plan's outputs are written by kernels: copy returned arguments, parameters and
    // state updated in place (a loss scale reported as an output, say).
    getOperation().walk([&](func::ReturnOp ret) {
      OpBuilder builder(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        // Unchanged training state stays where it is.
        if (getOperation().getResultAttr(operand.getOperandNumber(), castor::attr::kState))
          continue;
        Operation *def = operand.get().getDefiningOp();
        auto inPlace = llvm::dyn_cast_or_null<castor::InPlaceOpInterface>(def);
        bool writesState =
            inPlace && inPlace.getTiedOperandIndex(llvm::cast<OpResult>(operand.get()).getResultNumber()).has_value();
        if (!def || writesState || llvm::isa<castor::ParameterOp, castor::ConstantOp>(def))
          operand.set(builder.create<castor::IdentityOp>(ret.getLoc(), operand.get()));
      }
    });

    Builder b(&getContext());
    WalkResult result = getOperation().walk([&](Operation *op) {
      if (op == getOperation() || llvm::isa<func::ReturnOp, castor::ParameterOp, castor::ConstantOp>(op))
        return WalkResult::advance();
      auto kernel = llvm::dyn_cast<castor::KernelOpInterface>(op);
      if (!kernel) {
        op->emitError("no runtime kernel computes '") << op->getName() << "'";
        return WalkResult::interrupt();
      }
      op->setAttr(castor::attr::kKernel, b.getStringAttr(kernel.getKernelName(target)));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
