// castor-cast-cleanup: folds cast chains only where the first cast loses nothing, and casts of
// constants.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"

#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace castor {
#define GEN_PASS_DEF_CASTORCASTCLEANUP
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// True when every value of `from` is exactly representable in `to`.
bool isExactConversion(Type from, Type to) {
  if (from == to)
    return true;
  auto f = llvm::dyn_cast<FloatType>(from);
  auto t = llvm::dyn_cast<FloatType>(to);
  if (!f || !t)
    return false;
  // f16 and bf16 each lack the other's range or precision; any narrower float fits f32/f64.
  return f.getWidth() < t.getWidth() && t.getWidth() >= 32;
}

struct FoldExactCastChain : OpRewritePattern<castor::CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(castor::CastOp outer, PatternRewriter &rewriter) const override {
    auto inner = outer.getInput().getDefiningOp<castor::CastOp>();
    if (!inner)
      return failure();
    Type a = getElementTypeOrSelf(inner.getInput().getType());
    Type b = getElementTypeOrSelf(inner.getType());
    if (!isExactConversion(a, b))
      return rewriter.notifyMatchFailure(outer, "the first cast rounds");
    if (inner.getInput().getType() == outer.getType())
      rewriter.replaceOp(outer, inner.getInput());
    else
      rewriter.replaceOpWithNewOp<castor::CastOp>(outer, outer.getType(), inner.getInput());
    return success();
  }
};

// cast(constant) becomes a constant of the cast's type, rounded to nearest-even as the cast
// kernels round: no kernel per step for the casts autocast gives an exporter's scalars.
struct FoldCastOfConstant : OpRewritePattern<castor::CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(castor::CastOp cast, PatternRewriter &rewriter) const override {
    auto constant = cast.getInput().getDefiningOp<castor::ConstantOp>();
    if (!constant)
      return failure();
    auto values = llvm::dyn_cast<DenseFPElementsAttr>(constant.getValue());
    auto target = llvm::dyn_cast<FloatType>(getElementTypeOrSelf(cast.getType()));
    if (!values || !target)
      return rewriter.notifyMatchFailure(cast, "not a floating-point constant cast to a float type");
    auto type = llvm::cast<ShapedType>(cast.getType());
    auto converted = values.mapValues(target, [&](const APFloat &v) {
      APFloat f = v;
      bool lost = false;
      f.convert(target.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      return f.bitcastToAPInt();
    });
    rewriter.replaceOpWithNewOp<castor::ConstantOp>(cast, llvm::cast<DenseElementsAttr>(converted).reshape(type));
    return success();
  }
};

struct CastCleanupPass : castor::impl::CastorCastCleanupBase<CastCleanupPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    castor::populateCastCleanupPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void castor::populateCastCleanupPatterns(RewritePatternSet &patterns) {
  patterns.add<FoldExactCastChain, FoldCastOfConstant>(patterns.getContext());
}
