// castor-fuse-batch-norm-relu: batch_norm_training [+ add] + relu, with their backward
// (relu_backward + batch_norm_training_backward), become batch_norm_relu_training and
// batch_norm_relu_training_backward; so do batch_norm_training + clip at 0 and a positive max
// (ReLU6) with clip_backward + batch_norm_training_backward, the ops' clip_max set.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "Matching.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <optional>

namespace castor {
#define GEN_PASS_DEF_CASTORFUSEBATCHNORMRELU
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// One fusible group: the forward ops and the backward ops that differentiate them.
struct Group {
  castor::BatchNormTrainingOp bn;
  castor::AddOp add; // null without a residual
  Value residual;
  Operation *act = nullptr;         // relu, or clip with clipMax
  Operation *actBackward = nullptr; // relu_backward, or clip_backward
  std::optional<double> clipMax;
  castor::BatchNormTrainingBackwardOp bnBackward;
};

// clip at 0 and a positive, finite max: its max.
std::optional<double> reluSixMax(std::optional<llvm::APFloat> min, std::optional<llvm::APFloat> max) {
  if (!min || !max || !min->isZero() || min->isNegative())
    return std::nullopt;
  const double m = max->convertToDouble();
  if (!(m > 0) || !std::isfinite(m))
    return std::nullopt;
  return m;
}

// The batch_norm_training_backward of `bn` that differentiates `grad` (and nothing else does).
castor::BatchNormTrainingBackwardOp onlyBackwardOf(castor::BatchNormTrainingOp bn, Value grad) {
  castor::BatchNormTrainingBackwardOp found;
  for (Operation *u : grad.getUsers()) {
    auto bb = llvm::dyn_cast<castor::BatchNormTrainingBackwardOp>(u);
    if (!bb || bb.getOutputGrad() != grad || bb.getBatchMean() != bn.getBatchMean())
      continue;
    if (found)
      return {};
    found = bb;
  }
  return found;
}

// The clip form: the normalised value's users are exactly one clip at 0 and a positive max and
// the clip_backward of that clip (same bounds, reading the normalised value), whose gradient
// feeds only this bn's backward.
bool matchClip(Group &g) {
  Value normalised = g.bn.getOutput();
  castor::ClipOp clip;
  castor::ClipBackwardOp clipBackward;
  for (Operation *u : normalised.getUsers()) {
    if (auto c = llvm::dyn_cast<castor::ClipOp>(u); c && !clip)
      clip = c;
    else if (auto cb = llvm::dyn_cast<castor::ClipBackwardOp>(u); cb && !clipBackward && cb.getSaved() == normalised)
      clipBackward = cb;
    else
      return false;
  }
  if (!clip || !clipBackward)
    return false;
  g.clipMax = reluSixMax(clip.getMin(), clip.getMax());
  if (!g.clipMax || clipBackward.getMinAttr() != clip.getMinAttr() || clipBackward.getMaxAttr() != clip.getMaxAttr())
    return false;
  Value masked = clipBackward.getResult();
  if (!masked.hasOneUse())
    return false;
  g.act = clip, g.actBackward = clipBackward;
  g.bnBackward = onlyBackwardOf(g.bn, masked);
  return bool(g.bnBackward);
}

bool isLowPrecision(Value v) {
  Type t = getElementTypeOrSelf(v.getType());
  return t.isF16() || t.isBF16();
}

using castor::singleUser;

// The relu form: the normalised value feeds one relu, directly or through one add of a tensor of
// its own type (a residual; no broadcast), and nothing else; the relu output is differentiated by
// exactly one relu_backward, whose result feeds exactly one batch_norm_training_backward of this
// bn.
bool matchRelu(Group &g) {
  Value normalised = g.bn.getOutput();
  if (!normalised.hasOneUse())
    return false;
  Operation *user = *normalised.getUsers().begin();
  castor::ReluOp relu;
  if (auto add = llvm::dyn_cast<castor::AddOp>(user)) {
    Value other = add.getLhs() == normalised ? add.getRhs() : add.getLhs();
    if (other.getType() != normalised.getType() || add.getType() != normalised.getType())
      return false;
    g.add = add, g.residual = other;
    relu = singleUser<castor::ReluOp>(add.getResult());
  } else {
    relu = llvm::dyn_cast<castor::ReluOp>(user);
  }
  if (!relu)
    return false;
  Value y = relu.getResult();
  castor::ReluBackwardOp reluBackward;
  for (Operation *u : y.getUsers()) {
    auto rb = llvm::dyn_cast<castor::ReluBackwardOp>(u);
    if (!rb || rb.getSaved() != y)
      continue;
    if (reluBackward)
      return false; // two gradients of one relu: not a graph the autodiff makes
    reluBackward = rb;
  }
  if (!reluBackward)
    return false;
  g.act = relu, g.actBackward = reluBackward;
  g.bnBackward = onlyBackwardOf(g.bn, reluBackward.getResult());
  return bool(g.bnBackward);
}

// The group around `bn`, when every condition holds:
// - low-precision data (a layer the policy keeps in fp32 has no fused kernel to gain from);
// - the relu form or the clip form above (the forward without its backward stays unfused);
// - the backward is of the same batch norm (input, scale, statistics, attributes), and every op
//   sits in one block, the activation before its gradient.
std::optional<Group> matchGroup(castor::BatchNormTrainingOp bn) {
  Group g;
  g.bn = bn;
  if (!isLowPrecision(bn.getInput()))
    return std::nullopt;
  if (!matchRelu(g)) {
    g = Group{};
    g.bn = bn;
    if (!matchClip(g))
      return std::nullopt;
  }
  auto bb = g.bnBackward;
  if (!bb || bb.getInput() != bn.getInput() || bb.getScale() != bn.getScale() ||
      bb.getBatchInvStd() != bn.getBatchInvStd() || bb.getEpsilon() != bn.getEpsilon() ||
      bb.getSync() != bn.getSync())
    return std::nullopt;
  // One block, forward before backward, so the fused ops may sit where relu and relu_backward were.
  Block *block = bn->getBlock();
  if (g.act->getBlock() != block || g.actBackward->getBlock() != block || bb->getBlock() != block ||
      !g.act->isBeforeInBlock(g.actBackward))
    return std::nullopt;
  return g;
}

// "a + b + c" of the ops' location names, so the plan's kernel names say what was fused.
Location fusedName(MLIRContext *ctx, Location fallback, ArrayRef<Operation *> ops) {
  std::string name;
  for (Operation *op : ops) {
    if (!op)
      continue;
    auto named = llvm::dyn_cast<NameLoc>(op->getLoc());
    if (!named)
      return fallback;
    name += (name.empty() ? "" : " + ") + named.getName().str();
  }
  return NameLoc::get(StringAttr::get(ctx, name));
}

void fuse(Group g) {
  MLIRContext *ctx = g.bn->getContext();
  castor::BatchNormTrainingOp bn = g.bn;
  OpBuilder b(g.act);
  FloatAttr clipMax = g.clipMax ? b.getF64FloatAttr(*g.clipMax) : FloatAttr();
  Location fwdLoc = fusedName(ctx, bn.getLoc(), {bn, g.add, g.act});
  auto fwd = b.create<castor::BatchNormReluTrainingOp>(fwdLoc, bn.getInput(), bn.getScale(), bn.getBias(), g.residual,
                                                       bn.getEpsilonAttr(), bn.getMomentumAttr(), bn.getSyncAttr(),
                                                       clipMax);
  g.act->getResult(0).replaceAllUsesWith(fwd.getOutput());
  bn.getBatchMean().replaceAllUsesWith(fwd.getBatchMean());
  bn.getBatchInvStd().replaceAllUsesWith(fwd.getBatchInvStd());

  // The masked gradient goes on to whatever else used it (the residual's gradient) as dz.
  Value masked = g.actBackward->getResult(0);
  bool needsResidualGrad = !masked.hasOneUse();
  b.setInsertionPoint(g.actBackward);
  SmallVector<Type> types{bn.getInput().getType(), bn.getScale().getType(), bn.getScale().getType()};
  if (needsResidualGrad)
    types.push_back(masked.getType());
  auto bb = g.bnBackward;
  Location bwdLoc = fusedName(ctx, bb.getLoc(), {bb, g.actBackward});
  auto bwd = b.create<castor::BatchNormReluTrainingBackwardOp>(
      bwdLoc, types, g.actBackward->getOperand(0), bn.getInput(), fwd.getOutput(), bn.getScale(), bn.getBias(),
      fwd.getBatchMean(), fwd.getBatchInvStd(), bn.getEpsilonAttr(), bn.getMomentumAttr(), bn.getSyncAttr(), clipMax);
  bb.getInputGrad().replaceAllUsesWith(bwd.getInputGrad());
  bb.getScaleGrad().replaceAllUsesWith(bwd.getScaleGrad());
  bb.getBiasGrad().replaceAllUsesWith(bwd.getBiasGrad());
  bb->erase();
  if (needsResidualGrad)
    masked.replaceAllUsesWith(bwd.getResidualGrad());
  g.actBackward->erase();
  g.act->erase();
  if (g.add)
    g.add->erase();
  bn->erase();
}

struct FuseBatchNormReluPass : castor::impl::CastorFuseBatchNormReluBase<FuseBatchNormReluPass> {
  void runOnOperation() override {
    // Matched and fused one at a time: fusing a group replaces values (a relu output that is the
    // next group's residual) that a group matched earlier would still hold.
    for (castor::BatchNormTrainingOp bn : castor::collectOps<castor::BatchNormTrainingOp>(getOperation()))
      if (auto g = matchGroup(bn))
        fuse(*g);
  }
};

} // namespace
