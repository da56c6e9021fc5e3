// castor-fuse-batch-norm-relu: batch_norm_training [+ add] + relu, with their backward
// (relu_backward + batch_norm_training_backward), become batch_norm_relu_training and
// batch_norm_relu_training_backward.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "Matching.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

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
  castor::ReluOp relu;
  castor::ReluBackwardOp reluBackward;
  castor::BatchNormTrainingBackwardOp bnBackward;
};

bool isLowPrecision(Value v) {
  Type t = getElementTypeOrSelf(v.getType());
  return t.isF16() || t.isBF16();
}

using castor::singleUser;

// The group around `bn`, when every condition holds:
// - low-precision data (a layer the policy keeps in fp32 has no fused kernel to gain from);
// - the normalised value feeds one relu, directly or through one add of a tensor of its own type
//   (a residual; no broadcast), and nothing else;
// - the relu output is differentiated by exactly one relu_backward, whose result feeds exactly one
//   batch_norm_training_backward of this bn (the forward without its backward stays unfused).
std::optional<Group> matchGroup(castor::BatchNormTrainingOp bn) {
  Group g;
  g.bn = bn;
  if (!isLowPrecision(bn.getInput()))
    return std::nullopt;
  Value normalised = bn.getOutput();
  if (!normalised.hasOneUse())
    return std::nullopt;
  Operation *user = *normalised.getUsers().begin();
  if (auto add = llvm::dyn_cast<castor::AddOp>(user)) {
    Value other = add.getLhs() == normalised ? add.getRhs() : add.getLhs();
    if (other.getType() != normalised.getType() || add.getType() != normalised.getType())
      return std::nullopt;
    g.add = add, g.residual = other;
    g.relu = singleUser<castor::ReluOp>(add.getResult());
  } else {
    g.relu = llvm::dyn_cast<castor::ReluOp>(user);
  }
  if (!g.relu)
    return std::nullopt;
  Value y = g.relu.getResult();
  for (Operation *u : y.getUsers()) {
    auto rb = llvm::dyn_cast<castor::ReluBackwardOp>(u);
    if (!rb || rb.getSaved() != y)
      continue;
    if (g.reluBackward)
      return std::nullopt; // two gradients of one relu: not a graph the autodiff makes
    g.reluBackward = rb;
  }
  if (!g.reluBackward)
    return std::nullopt;
  for (Operation *u : g.reluBackward.getResult().getUsers()) {
    auto bb = llvm::dyn_cast<castor::BatchNormTrainingBackwardOp>(u);
    if (!bb || bb.getOutputGrad() != g.reluBackward.getResult() || bb.getBatchMean() != bn.getBatchMean())
      continue;
    if (g.bnBackward)
      return std::nullopt;
    g.bnBackward = bb;
  }
  auto bb = g.bnBackward;
  if (!bb || bb.getInput() != bn.getInput() || bb.getScale() != bn.getScale() ||
      bb.getBatchInvStd() != bn.getBatchInvStd() || bb.getEpsilon() != bn.getEpsilon() ||
      bb.getSync() != bn.getSync())
    return std::nullopt;
  // One block, forward before backward, so the fused ops may sit where relu and relu_backward were.
  Block *block = bn->getBlock();
  if (g.relu->getBlock() != block || g.reluBackward->getBlock() != block || bb->getBlock() != block ||
      !g.relu->isBeforeInBlock(g.reluBackward))
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
  OpBuilder b(g.relu);
  Location fwdLoc = fusedName(ctx, bn.getLoc(), {bn, g.add, g.relu});
  auto fwd = b.create<castor::BatchNormReluTrainingOp>(fwdLoc, bn.getInput(), bn.getScale(), bn.getBias(), g.residual,
                                                       bn.getEpsilonAttr(), bn.getMomentumAttr(), bn.getSyncAttr());
  g.relu.getResult().replaceAllUsesWith(fwd.getOutput());
  bn.getBatchMean().replaceAllUsesWith(fwd.getBatchMean());
  bn.getBatchInvStd().replaceAllUsesWith(fwd.getBatchInvStd());

  // The masked gradient goes on to whatever else used it (the residual's gradient) as dz.
  Value masked = g.reluBackward.getResult();
  bool needsResidualGrad = !masked.hasOneUse();
  b.setInsertionPoint(g.reluBackward);
  SmallVector<Type> types{bn.getInput().getType(), bn.getScale().getType(), bn.getScale().getType()};
  if (needsResidualGrad)
    types.push_back(masked.getType());
  auto bb = g.bnBackward;
  Location bwdLoc = fusedName(ctx, bb.getLoc(), {bb, g.reluBackward});
  auto bwd = b.create<castor::BatchNormReluTrainingBackwardOp>(
      bwdLoc, types, g.reluBackward.getOutputGrad(), bn.getInput(), fwd.getOutput(), bn.getScale(), bn.getBias(),
      fwd.getBatchMean(), fwd.getBatchInvStd(), bn.getEpsilonAttr(), bn.getMomentumAttr(), bn.getSyncAttr());
  bb.getInputGrad().replaceAllUsesWith(bwd.getInputGrad());
  bb.getScaleGrad().replaceAllUsesWith(bwd.getScaleGrad());
  bb.getBiasGrad().replaceAllUsesWith(bwd.getBiasGrad());
  bb->erase();
  if (needsResidualGrad)
    masked.replaceAllUsesWith(bwd.getResidualGrad());
  g.reluBackward->erase();
  g.relu->erase();
  if (g.add)
    g.add->erase();
  bn->erase();
}

struct FuseBatchNormReluPass : castor::impl::CastorFuseBatchNormReluBase<FuseBatchNormReluPass> {
  void runOnOperation() override {
    // Matched and fused one at a time: fusing a group replaces values (a relu output that is the
    // next group's residual) that a group matched earlier would still hold.
    SmallVector<castor::BatchNormTrainingOp> bns;
    getOperation()->walk([&](castor::BatchNormTrainingOp bn) { bns.push_back(bn); });
    for (castor::BatchNormTrainingOp bn : bns)
      if (auto g = matchGroup(bn))
        fuse(*g);
  }
};

} // namespace
