// castor-fuse-gelu: the erf chain exporters write for GELU becomes castor.gelu.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "Matching.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <optional>

namespace castor {
#define GEN_PASS_DEF_CASTORFUSEGELU
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

using castor::splatValue;

// The exporters' f32 constants: 1/sqrt(2) rounded to f32 is within 3e-8 of it.
bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want); }

// The operand of `op` (an OpTy) other than a constant `want`; null when `op` is no such op.
template <typename OpTy> Value otherThanConstant(Operation *op, double want) {
  auto b = llvm::dyn_cast_or_null<OpTy>(op);
  if (!b)
    return {};
  if (near(splatValue(b.getRhs()), want))
    return b.getLhs();
  if (near(splatValue(b.getLhs()), want))
    return b.getRhs();
  return {};
}

using castor::singleUser;

// The chain around one erf, outermost op last; empty when the erf is not GELU's.
struct Chain {
  Value x;
  SmallVector<Operation *> ops;
};

std::optional<Chain> match(castor::ErfOp erf) {
  constexpr double kInvSqrt2 = 0.70710678118654752;
  Chain c;
  Operation *scaled = erf.getInput().getDefiningOp();
  c.x = otherThanConstant<castor::MulOp>(scaled, kInvSqrt2);
  if (!c.x || !erf.getInput().hasOneUse())
    return std::nullopt;
  auto onePlus = singleUser<castor::AddOp>(erf.getResult());
  if (!onePlus || otherThanConstant<castor::AddOp>(onePlus, 1.0) != erf.getResult())
    return std::nullopt;
  auto product = singleUser<castor::MulOp>(onePlus.getResult());
  if (!product)
    return std::nullopt;
  c.ops = {scaled, erf, onePlus, product};
  Value other = product.getLhs() == onePlus.getResult() ? product.getRhs() : product.getLhs();
  if (other == c.x) { // (x * (1 + erf)) * 0.5
    auto half = singleUser<castor::MulOp>(product.getResult());
    if (!half || otherThanConstant<castor::MulOp>(half, 0.5) != product.getResult())
      return std::nullopt;
    c.ops.push_back(half);
  } else { // (x * 0.5) * (1 + erf)
    if (otherThanConstant<castor::MulOp>(other.getDefiningOp(), 0.5) != c.x || !other.hasOneUse())
      return std::nullopt;
    c.ops.insert(c.ops.begin() + 3, other.getDefiningOp());
  }
  if (c.ops.back()->getResult(0).getType() != c.x.getType()) // a constant that broadcasts x
    return std::nullopt;
  return c;
}

struct FuseGeluPass : castor::impl::CastorFuseGeluBase<FuseGeluPass> {
  void runOnOperation() override {
    for (castor::ErfOp erf : castor::collectOps<castor::ErfOp>(getOperation())) {
      auto chain = match(erf);
      if (!chain)
        continue;
      Operation *last = chain->ops.back();
      SmallVector<Location> locs;
      llvm::SetVector<Operation *> constants;
      for (Operation *op : chain->ops) {
        locs.push_back(op->getLoc());
        for (Value operand : op->getOperands())
          if (auto c = operand.getDefiningOp<castor::ConstantOp>())
            constants.insert(c);
      }
      OpBuilder b(last);
      auto gelu = b.create<castor::GeluOp>(FusedLoc::get(&getContext(), locs), chain->x.getType(), chain->x);
      last->getResult(0).replaceAllUsesWith(gelu.getResult());
      for (Operation *op : llvm::reverse(chain->ops))
        op->erase();
      for (Operation *c : constants)
        if (c->use_empty())
          c->erase();
    }
  }
};

} // namespace
