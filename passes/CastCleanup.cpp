// castor-cast-cleanup: folds cast chains only where the first cast loses nothing.
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
  patterns.add<FoldExactCastChain>(patterns.getContext());
}
