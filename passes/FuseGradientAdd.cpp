// castor-fuse-gradient-add: the sum of an input's gradients, where one of them is a
// convolution's data gradient, becomes that convolution's accumulate operand, so that the GPU
// backend may add it in the convolution's epilogue instead of a separate pass over the tensor.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "Matching.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace castor {
#define GEN_PASS_DEF_CASTORFUSEGRADIENTADD
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// `v`'s defining data gradient when it can take an accumulate operand in `add`'s place: its
// only user is `add`, it has none yet, and it has the sum's type.
castor::Conv2dBackwardDataOp foldableGradient(Value v, castor::AddOp add) {
  auto dgrad = v.getDefiningOp<castor::Conv2dBackwardDataOp>();
  if (!dgrad || dgrad.getAccumulate() || !v.hasOneUse() || v.getType() != add.getType() ||
      dgrad->getBlock() != add->getBlock())
    return {};
  return dgrad;
}

// Whether `v` is available before `op` in op's block.
bool definedBefore(Value v, Operation *op) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return v.getParentBlock() == op->getBlock() || v.getParentBlock()->getParentOp()->isProperAncestor(op);
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

struct FuseGradientAddPass : castor::impl::CastorFuseGradientAddBase<FuseGradientAddPass> {
  void runOnOperation() override {
    for (castor::AddOp add : castor::collectOps<castor::AddOp>(getOperation())) {
      if (add.getLhs().getType() != add.getType() || add.getRhs().getType() != add.getType())
        continue; // a broadcasting add
      castor::Conv2dBackwardDataOp lhs = foldableGradient(add.getLhs(), add);
      castor::Conv2dBackwardDataOp rhs = foldableGradient(add.getRhs(), add);
      // Of two data gradients, the later one takes the earlier as its accumulator.
      castor::Conv2dBackwardDataOp dgrad = lhs && rhs ? (lhs->isBeforeInBlock(rhs) ? rhs : lhs) : (lhs ? lhs : rhs);
      if (!dgrad)
        continue;
      Value other = dgrad.getResult() == add.getLhs() ? add.getRhs() : add.getLhs();
      // At the convolution's place when the other gradient is ready by then, else at the sum's.
      Operation *at = definedBefore(other, dgrad) ? dgrad.getOperation() : add.getOperation();
      OpBuilder b(at);
      Location loc = FusedLoc::get(&getContext(), {dgrad.getLoc(), add.getLoc()});
      auto fused = b.create<castor::Conv2dBackwardDataOp>(
          loc, add.getType(), dgrad.getOutputGrad(), dgrad.getFilter(), other, dgrad.getStridesAttr(),
          dgrad.getPadsAttr(), dgrad.getDilationsAttr(), dgrad.getGroupsAttr());
      add.getResult().replaceAllUsesWith(fused.getResult());
      add.erase();
      dgrad.erase();
    }
  }
};

} // namespace
