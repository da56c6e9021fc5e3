#include "StepFunctions.h"
// castor-gradient-stats: per-parameter gradient statistics as outputs of train_step.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/state_names.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORGRADIENTSTATS
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;
using namespace castor;

namespace {

struct GradientStatsPass : castor::impl::CastorGradientStatsBase<GradientStatsPass> {
  void runOnOperation() override {
    auto step = castor::trainStepFunction(getOperation());
    if (!step)
      return signalPassFailure();
    Block &body = step.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    auto statsType = RankedTensorType::get({3}, b.getF32Type());
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> attrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      attrs.push_back(step.getResultAttrDict(i));
    for (Operation &op : body) {
      if (!llvm::isa<SgdUpdateOp, AdamwUpdateOp>(op))
        continue;
      auto param = llvm::dyn_cast<BlockArgument>(op.getOperand(0));
      auto name = param ? step.getArgAttrOfType<StringAttr>(param.getArgNumber(), attr::kState) : StringAttr();
      if (!name) {
        op.emitError("updates a parameter that is not training state");
        return signalPassFailure();
      }
      results.push_back(b.create<GradientStatsOp>(op.getLoc(), statsType, op.getOperand(1)));
      StringAttr output = b.getStringAttr(names::kGradStatsPrefix + name.str());
      attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(attr::kName, output)));
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    step.setFunctionType(b.getFunctionType(step.getArgumentTypes(), ValueRange(results).getTypes()));
    step.setAllResultAttrs(attrs);
  }
};

} // namespace
