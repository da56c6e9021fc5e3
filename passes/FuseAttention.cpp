// castor-fuse-attention: the exporters' matmul-softmax-matmul becomes castor.attention.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "Matching.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

namespace castor {
#define GEN_PASS_DEF_CASTORFUSEATTENTION
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

using castor::singleUser;
using castor::splatValue;

// One chain, from q, k, v to the product by v; `ops` are erased once the fused op replaces it.
struct Chain {
  Value q, k, v;
  double scale = 1;
  castor::MatmulOp output;
  SmallVector<Operation *> ops;
  SmallVector<Value> factors; // the scale constants, erased with the chain where nothing else reads them
};

// `v` through an optional mul by a one-value constant that only it uses: the other operand,
// with the constant folded into `scale`.
Value peelScale(Value v, Chain &c) {
  auto mul = v.getDefiningOp<castor::MulOp>();
  if (!mul || !v.hasOneUse())
    return v;
  for (auto [data, factor] : {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}}) {
    auto s = splatValue(factor);
    if (!s || data.getType() != v.getType())
      continue;
    c.scale *= *s;
    c.ops.push_back(mul);
    c.factors.push_back(factor);
    return data;
  }
  return v;
}

bool isHeadSize(int64_t d) { return d > 0 && d % 8 == 0 && d <= 128; }

std::optional<Chain> match(castor::SoftmaxOp softmax) {
  Chain c;
  auto probs = llvm::cast<RankedTensorType>(softmax.getOutput().getType());
  if (probs.getRank() != 4 || (int64_t(softmax.getAxis()) != -1 && int64_t(softmax.getAxis()) != 3))
    return std::nullopt;
  c.output = singleUser<castor::MatmulOp>(softmax.getOutput());
  if (!c.output || c.output.getA() != softmax.getOutput())
    return std::nullopt;
  c.v = c.output.getB();
  c.ops.push_back(softmax);

  Value scores = peelScale(softmax.getInput(), c);
  auto product = scores.getDefiningOp<castor::MatmulOp>();
  if (!product || !scores.hasOneUse())
    return std::nullopt;
  c.ops.push_back(product);
  c.q = peelScale(product.getA(), c);
  Value kt = peelScale(product.getB(), c);
  auto transpose = kt.getDefiningOp<castor::TransposeOp>();
  if (!transpose || !kt.hasOneUse() || transpose.getPerm() != ArrayRef<int64_t>{0, 1, 3, 2})
    return std::nullopt;
  c.ops.push_back(transpose);
  c.k = peelScale(transpose.getInput(), c);

  auto q = llvm::cast<RankedTensorType>(c.q.getType()), k = llvm::cast<RankedTensorType>(c.k.getType()),
       v = llvm::cast<RankedTensorType>(c.v.getType());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4 || q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return std::nullopt;
  if (q.getShape().take_front(2) != k.getShape().take_front(2) || q.getShape().take_front(2) != v.getShape().take_front(2) ||
      k.getDimSize(2) != v.getDimSize(2) || q.getDimSize(3) != k.getDimSize(3))
    return std::nullopt;
  if (!isHeadSize(q.getDimSize(3)) || !isHeadSize(v.getDimSize(3)))
    return std::nullopt;
  return c;
}

struct FuseAttentionPass : castor::impl::CastorFuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    for (castor::SoftmaxOp softmax : castor::collectOps<castor::SoftmaxOp>(getOperation())) {
      std::optional<Chain> c = match(softmax);
      if (!c)
        continue;
      OpBuilder b(c->output);
      auto fused = b.create<castor::AttentionOp>(c->output.getLoc(), c->q, c->k, c->v, b.getF64FloatAttr(c->scale));
      c->output.getResult().replaceAllUsesWith(fused.getOutput());
      c->output.erase();
      for (Operation *op : c->ops) // from the softmax back to the scales of q and k
        op->erase();
      llvm::SmallPtrSet<Operation *, 4> erased;
      for (Value factor : c->factors)
        if (Operation *def = factor.getDefiningOp(); !erased.contains(def) && factor.use_empty()) {
          erased.insert(def);
          def->erase();
        }
    }
  }
};

} // namespace
