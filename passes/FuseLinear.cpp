// castor-fuse-linear: a linear layer as exporters split it, MatMul(x, Transpose(W)) [+ b],
// becomes one gemm over the rows of x, with W read transposed and b added by the gemm.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "Matching.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace castor {
#define GEN_PASS_DEF_CASTORFUSELINEAR
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// W when `v` is transpose(W, [1, 0]) of a parameter W; null otherwise.
Value transposedParameter(Value v) {
  auto t = v.getDefiningOp<castor::TransposeOp>();
  if (!t || !t.getInput().getDefiningOp<castor::ParameterOp>())
    return {};
  auto perm = t.getPerm();
  return perm.size() == 2 && perm[0] == 1 && perm[1] == 0 ? t.getInput() : Value();
}

// The rank-1 parameter of length n added to `product` by its only user; null when none is.
castor::AddOp biasAdd(Value product, int64_t n) {
  auto add = castor::singleUser<castor::AddOp>(product);
  if (!add)
    return {};
  Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto type = llvm::cast<RankedTensorType>(other.getType());
  if (!other.getDefiningOp<castor::ParameterOp>() || type.getRank() != 1 || type.getDimSize(0) != n ||
      add.getType() != product.getType())
    return {};
  return add;
}

struct FuseLinearPass : castor::impl::CastorFuseLinearBase<FuseLinearPass> {
  void runOnOperation() override {
    for (castor::MatmulOp m : castor::collectOps<castor::MatmulOp>(getOperation())) {
      Value w = transposedParameter(m.getB());
      auto xType = llvm::cast<RankedTensorType>(m.getA().getType());
      auto yType = llvm::cast<RankedTensorType>(m.getType());
      if (!w || xType.getRank() < 2 || !xType.hasStaticShape())
        continue;
      const int64_t k = xType.getShape().back(), n = yType.getShape().back();
      const int64_t rows = xType.getNumElements() / k;
      castor::AddOp add = biasAdd(m.getResult(), n);
      Operation *last = add ? add.getOperation() : m.getOperation();
      SmallVector<Location> locs{m.getLoc()};
      if (add)
        locs.push_back(add.getLoc());
      Location loc = FusedLoc::get(&getContext(), locs);
      OpBuilder b(last);
      Value x = m.getA();
      if (xType.getRank() != 2)
        x = b.create<castor::ReshapeOp>(loc, RankedTensorType::get({rows, k}, xType.getElementType()), x);
      Value bias = add ? (add.getLhs() == m.getResult() ? add.getRhs() : add.getLhs()) : Value();
      auto flatType = RankedTensorType::get({rows, n}, yType.getElementType());
      Value y = b.create<castor::GemmOp>(loc, flatType, x, w, bias, b.getBoolAttr(false), b.getBoolAttr(true),
                                         b.getF64FloatAttr(1.0), b.getF64FloatAttr(1.0));
      if (yType.getRank() != 2)
        y = b.create<castor::ReshapeOp>(loc, yType, y);
      last->getResult(0).replaceAllUsesWith(y);
      Operation *transpose = m.getB().getDefiningOp();
      if (add)
        add.erase();
      m.erase();
      if (transpose->use_empty())
        transpose->erase();
    }
  }
};

} // namespace
