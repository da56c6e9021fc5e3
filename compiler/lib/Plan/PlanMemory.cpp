// castor-plan-memory: places every tensor of a function in one arena by liveness.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Plan/StepLiveness.h"
#include "castor/Plan/PlanPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORPLANMEMORY
#include "castor/Plan/PlanPasses.h.inc"
} // namespace castor

using namespace mlir;

namespace {

struct PlanMemoryPass : castor::impl::CastorPlanMemoryBase<PlanMemoryPass> {
  using CastorPlanMemoryBase::CastorPlanMemoryBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      func.emitError("alignment must be a power of two, got ") << alignment;
      return signalPassFailure();
    }
    auto liveness = castor::analyzeStepLiveness(func, /*requireKernels=*/true);
    if (failed(liveness))
      return signalPassFailure();
    Block &body = func.getBody().front();
    const std::vector<Value> &values = liveness->values;

    castor::ArenaLayout layout = castor::planArena(liveness->lifetimes, uint64_t(alignment));
    llvm::DenseMap<Value, int64_t> offsetOf;
    for (size_t i = 0; i < values.size(); ++i)
      offsetOf[values[i]] = int64_t(layout.offsets[i]);
    for (auto [result, operand] : liveness->tiedTo)
      offsetOf[result] = offsetOf[liveness->root(operand)];

    Builder b(&getContext());
    SmallVector<int64_t> inputOffsets;
    for (BlockArgument arg : body.getArguments())
      inputOffsets.push_back(offsetOf[arg]);
    func->setAttr(castor::attr::kInputOffsets, b.getDenseI64ArrayAttr(inputOffsets));
    for (Operation &op : body) {
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults())
        offsets.push_back(offsetOf[r]);
      op.setAttr(castor::attr::kOffsets, b.getDenseI64ArrayAttr(offsets));
    }
    func->setAttr(castor::attr::kArenaBytes, b.getI64IntegerAttr(int64_t(layout.arenaBytes)));
    func->setAttr(castor::attr::kTensorBytes, b.getI64IntegerAttr(int64_t(layout.totalBytes)));
    if (workspaceLimit >= 0)
      func->setAttr(castor::attr::kWorkspaceLimit, b.getI64IntegerAttr(workspaceLimit));
  }
};

} // namespace
