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
#include "llvm/ADT/DenseSet.h"

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

    // An operand the copy of `v` at position `at` may read without raising the step's memory at
    // any point: one never freed; one kept for the backward (read there) and still read at `at`
    // or later; or one no larger than `v`, which then lives in v's stead until `at` (v lived
    // through that stretch before): kept for the backward but last read before `at`, or itself
    // recomputed (the copy reads its copy: SiLU's product from the recomputed sigmoid).
    llvm::DenseSet<Value> recomputed;
    auto operandFor = [&](Value w, Value v, size_t at) {
      Operation *def = w.getDefiningOp();
      if (!def || llvm::isa<castor::ParameterOp, castor::ConstantOp>(def))
        return true;
      const bool noLarger = castor::tensorBytes(w.getType()) <= castor::tensorBytes(v.getType());
      if (recomputed.contains(w))
        return noLarger;
      size_t last = 0;
      for (Operation *user : w.getUsers())
        last = std::max(last, position.lookup(user));
      return last > boundary && (last >= at || noLarger);
    };
    std::vector<castor::RecomputedValue> chosen;
    for (size_t i = 0; i < boundary; ++i) {
      Operation *op = ops[i];
      auto cheap = llvm::dyn_cast<castor::RecomputeOpInterface>(op);
      if (!cheap || !cheap.isCheapToRecompute() || !castor::programInstructionOf(op))
        continue;
      Value v = op->getResult(0);
      auto domain = llvm::cast<RankedTensorType>(v.getType()).getShape();
      size_t firstReader = ops.size(); // the copy's place: before v's first backward reader
      bool joins = true;
      for (Operation *user : v.getUsers()) {
        if (llvm::isa<func::ReturnOp>(user)) {
          joins = false;
          break;
        }
        const size_t at = position.lookup(user);
        if (at <= boundary)
          continue;
        firstReader = std::min(firstReader, at);
        // The copy joins its reader's group: an element-wise op over the same domain.
        joins &= castor::programInstructionOf(user) &&
                 llvm::cast<RankedTensorType>(user->getResult(0).getType()).getShape() == domain;
      }
      if (firstReader == ops.size() || !joins ||
          !llvm::all_of(op->getOperands(), [&](Value w) { return operandFor(w, v, firstReader); }))
        continue;
      chosen.push_back({i, 0});
      recomputed.insert(v);
    }
    uint64_t bytes = 0;
    for (Value v : recomputed)
      bytes += castor::tensorBytes(v.getType());
    castor::recomputeInBackward(f, boundary, chosen);
    Builder b(&getContext());
    f->setAttr(castor::attr::kRecomputedInGroups, b.getI64IntegerAttr(int64_t(chosen.size())));
    f->setAttr(castor::attr::kRecomputedInGroupsBytes, b.getI64IntegerAttr(int64_t(bytes)));
  }
};

} // namespace
