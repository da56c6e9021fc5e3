// castor-schedule-casts: orders the step's casts so that the runtime can run many of them as one
// launch. Each cast is one small kernel (ResNet-50's mixed-precision step has 53 casts of its
// weights to f16 and 53 of their gradients back to f32, each a few microseconds of mostly launch
// latency); placed next to each other, a backend runs a run of them together.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Plan/StepLiveness.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"

namespace castor {
#define GEN_PASS_DEF_CASTORSCHEDULECASTS
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// The op of `body` that holds `user` (itself, or the ancestor it is nested in).
Operation *inBody(Operation *user, Block &body) { return body.findAncestorOpInBlock(*user); }

// Whether some reader of `v` comes after `op` in its block.
bool readAfter(Value v, Operation *op) {
  for (Operation *user : v.getUsers())
    if (Operation *at = inBody(user, *op->getBlock()); at && op->isBeforeInBlock(at))
      return true;
  return false;
}

// The first reader of `v` in `body`, or null.
Operation *firstReader(Value v, Block &body) {
  Operation *first = nullptr;
  for (Operation *user : v.getUsers())
    if (Operation *at = inBody(user, body); at && (!first || at->isBeforeInBlock(first)))
      first = at;
  return first;
}

unsigned floatWidth(Type t) {
  auto f = llvm::dyn_cast<FloatType>(getElementTypeOrSelf(t));
  return f ? f.getWidth() : 0;
}

struct ScheduleCastsPass : castor::impl::CastorScheduleCastsBase<ScheduleCastsPass> {
  using CastorScheduleCastsBase::CastorScheduleCastsBase;
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (!f.getBody().hasOneBlock())
      return;
    Block &body = f.getBody().front();
    SmallVector<castor::CastOp> casts(body.getOps<castor::CastOp>());

    // The casts of the step's arguments that the backward reads too move to the start: their
    // results live into the backward anyway, so only the forward before their old place holds
    // them longer. A cast the forward alone reads stays where it is, and so do all of them in a
    // step that recomputes values (hoist-parameter-casts=false): its schedule was planned
    // against a memory budget with the casts where they were.
    Operation *loss = hoistParameterCasts ? castor::lastLoss(f) : nullptr;
    Operation *previous = nullptr;
    for (castor::CastOp cast : casts) {
      auto arg = llvm::dyn_cast<BlockArgument>(cast.getInput());
      if (!loss || !arg || arg.getOwner() != &body || !cast->isBeforeInBlock(loss) ||
          !readAfter(cast.getResult(), loss))
        continue;
      if (previous)
        cast->moveAfter(previous);
      else
        cast->moveBefore(&body.front());
      previous = cast;
    }

    // Widening casts of computed values move down to just before their first reader: the wider
    // result lives for less, the narrower operand for longer. The f32 copies of the gradients
    // then sit together before the optimizer's first reader (or their bucket's all_reduce), in
    // the order the backward produced them.
    for (castor::CastOp cast : casts) {
      if (llvm::isa<BlockArgument>(cast.getInput()) ||
          floatWidth(cast.getResult().getType()) <= floatWidth(cast.getInput().getType()))
        continue;
      Operation *reader = firstReader(cast.getResult(), body);
      if (reader && cast->isBeforeInBlock(reader))
        cast->moveBefore(reader);
    }
  }
};

} // namespace
