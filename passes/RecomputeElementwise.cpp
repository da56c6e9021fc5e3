// castor-recompute-elementwise: forward values that the backward's element-wise groups can compute
// again from what the backward keeps anyway are recomputed there instead of stored (Passes.td).
#include "ProgramOps.h"
#include "RecomputeCopies.h"

#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Plan/StepLiveness.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace castor {
#define GEN_PASS_DEF_CASTORRECOMPUTEELEMENTWISE
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

struct RecomputeElementwisePass : castor::impl::CastorRecomputeElementwiseBase<RecomputeElementwisePass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (f.isExternal() || !f.getBody().hasOneBlock())
      return;
    Operation *loss = castor::lastLoss(f); // the backward starts after it (castor-recompute's boundary)
    if (!loss)
      return;
    std::vector<Operation *> ops = castor::opsOf(f);
    const size_t boundary = size_t(std::find(ops.begin(), ops.end(), loss) - ops.begin());
    llvm::DenseMap<Operation *, size_t> position;
    for (size_t i = 0; i < ops.size(); ++i)
      position[ops[i]] = i;

    auto readInBackward = [&](Value w) {
      return llvm::any_of(w.getUsers(), [&](Operation *user) { return position.lookup(user) > boundary; });
    };
    // Alive through the backward whatever this pass does: read there, or never freed.
    auto keptAnyway = [&](Value w) {
      Operation *def = w.getDefiningOp();
      return !def || llvm::isa<castor::ParameterOp, castor::ConstantOp>(def) || readInBackward(w);
    };
    std::vector<castor::RecomputedValue> chosen;
    for (size_t i = 0; i < boundary; ++i) {
      Operation *op = ops[i];
      auto cheap = llvm::dyn_cast<castor::RecomputeOpInterface>(op);
      if (!cheap || !cheap.isCheapToRecompute() || !castor::programInstructionOf(op))
        continue;
      Value v = op->getResult(0);
      auto domain = llvm::cast<RankedTensorType>(v.getType()).getShape();
      bool backward = false, joins = true;
      for (Operation *user : v.getUsers()) {
        if (llvm::isa<func::ReturnOp>(user)) {
          joins = false;
          break;
        }
        if (position.lookup(user) <= boundary)
          continue;
        backward = true;
        // The copy joins its reader's group: an element-wise op over the same domain.
        joins &= castor::programInstructionOf(user) &&
                 llvm::cast<RankedTensorType>(user->getResult(0).getType()).getShape() == domain;
      }
      if (backward && joins && llvm::all_of(op->getOperands(), keptAnyway))
        chosen.push_back({i, 0});
    }
    castor::recomputeInBackward(f, boundary, chosen);
    f->setAttr(castor::attr::kRecomputedInGroups, Builder(&getContext()).getI64IntegerAttr(int64_t(chosen.size())));
  }
};

} // namespace
