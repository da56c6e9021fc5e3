#include "Matching.h"
#include "StepFunctions.h"
// castor-loss-scale: dynamic loss scaling and gradient clipping inside the training step.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Support/OptionChoices.h"
#include "castor/state_names.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORLOSSSCALE
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;
using namespace castor;

std::string castor::checkLossScaleOptions(StringRef mode, double init) {
  if (std::string error = choices::checkChoice("loss-scale mode", mode, choices::kLossScaleModes); !error.empty())
    return error + ", got '" + mode.str() + "'";
  if ((mode == "dynamic" || mode == "static") && !(init > 0))
    return "the loss scale must be positive";
  return {};
}

namespace {

struct LossScalePass : castor::impl::CastorLossScaleBase<LossScalePass> {
  using CastorLossScaleBase::CastorLossScaleBase;

  void runOnOperation() override {
    auto step = castor::trainStepFunction(getOperation());
    if (!step)
      return signalPassFailure();
    if (std::string error = checkLossScaleOptions(mode, init); !error.empty()) {
      step.emitError(error);
      return signalPassFailure();
    }
    if (mode == "none" && clipGradNorm <= 0)
      return; // nothing to do
    if (failed(rewrite(step)))
      signalPassFailure();
  }

  // Appends a state argument (unchanged unless `updated_` gets a new value for its name);
  // returns the argument.
  Value addState(func::FuncOp step, StringRef name, Type type, Init initKind, std::optional<double> value) {
    OpBuilder b(step.getContext());
    unsigned argIndex = 0;
    while (argIndex < step.getNumArguments() && step.getArgAttr(argIndex, attr::kState))
      ++argIndex;
    SmallVector<NamedAttribute> attrs{b.getNamedAttr(attr::kState, b.getStringAttr(name)),
                                      b.getNamedAttr(attr::kInit, InitAttr::get(b.getContext(), initKind))};
    if (value)
      attrs.push_back(b.getNamedAttr(attr::kInitValue, b.getF64FloatAttr(*value)));
    step.insertArgument(argIndex, type, b.getDictionaryAttr(attrs), step.getLoc());
    updated_[name] = step.getArgument(argIndex);
    return step.getArgument(argIndex);
  }

  LogicalResult rewrite(func::FuncOp step) {
    MLIRContext *ctx = &getContext();
    Block &body = step.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    Location loc = step.getLoc();
    auto f32 = RankedTensorType::get({}, Float32Type::get(ctx));
    auto i64 = RankedTensorType::get({}, IntegerType::get(ctx, 64));

    SmallVector<Operation *> updates;
    for (Operation &op : body)
      if (llvm::isa<SgdUpdateOp, AdamwUpdateOp>(op))
        updates.push_back(&op);
    if (updates.empty() && mode == "guard" && clipGradNorm <= 0)
      return success(); // no update to guard (--optimizer none)
    if (updates.empty())
      return step.emitError("loss scaling and clipping need an optimizer");

    Value scale, tracker, skipped;
    if (mode == "dynamic") {
      scale = addState(step, names::kLossScale, f32, Init::fill, double(init));
      tracker = addState(step, names::kLossScaleGrowthTracker, i64, Init::zeros, std::nullopt);
    }
    if (mode != "none")
      skipped = addState(step, names::kSkippedSteps, i64, Init::zeros, std::nullopt);

    OpBuilder b(updates.front());
    // `guard` checks the gradients as an unscale by exactly 1 does (x * 1 keeps every bit), without
    // scaling the loss: an fp32 or bf16 step then skips a non-finite update as a scaled one does.
    if (mode == "static" || mode == "guard") {
      OpBuilder atStart = OpBuilder::atBlockBegin(&body);
      const float value = mode == "guard" ? 1.0f : float(init);
      scale = atStart.create<ConstantOp>(loc, DenseElementsAttr::get(f32, b.getF32FloatAttr(value)));
    }

    // The seed of the backward pass, d(loss) = 1, becomes the scale; with k micro-batches each
    // one's seed, 1/k, becomes the scale times 1/k (one product for the seeds that share it), as
    // GradScaler scales each micro-batch's loss/k. The scale is a power of two, so the product
    // is exact.
    if (scale && mode != "guard") {
      SmallVector<SoftmaxCrossEntropyBackwardOp> seeds;
      for (auto bwd : body.getOps<SoftmaxCrossEntropyBackwardOp>())
        if (bwd.getLossGrad().getDefiningOp<ConstantOp>())
          seeds.push_back(bwd);
      if (seeds.empty())
        return step.emitError("expects the loss gradient seeded with a constant, found none");
      llvm::DenseMap<Value, Value> scaled;
      for (SoftmaxCrossEntropyBackwardOp seed : seeds) {
        Value weight = seed.getLossGrad();
        if (weight.getType() != scale.getType())
          return seed.emitError("the loss gradient's seed is ") << weight.getType() << ", the loss scale " << scale.getType();
        Value &seedValue = scaled[weight];
        if (!seedValue) {
          std::optional<double> w = splatValue(weight);
          OpBuilder before(seeds.front());
          seedValue = w && *w == 1.0 ? scale : before.create<MulOp>(loc, scale.getType(), scale, weight).getResult();
        }
        seed.getLossGradMutable().assign(seedValue);
      }
    }

    // Unscale (and clip) every gradient the optimizer applies, once each.
    SmallVector<Value> grads;
    for (Operation *u : updates)
      if (!llvm::is_contained(grads, u->getOperand(1)))
        grads.push_back(u->getOperand(1));
    Value foundInf;
    auto replaceLaterUses = [&](ValueRange from, ValueRange to, Operation *after) {
      for (auto [f, t] : llvm::zip(from, to))
        f.replaceUsesWithIf(t, [&](OpOperand &use) { return after->isBeforeInBlock(use.getOwner()); });
    };
    if (scale) {
      SmallVector<Type> types(ValueRange(grads).getTypes());
      types.push_back(f32);
      auto unscale = b.create<UnscaleGradientsOp>(loc, types, grads, scale);
      foundInf = unscale.getFoundInf();
      replaceLaterUses(grads, unscale.getUnscaled(), unscale);
      grads.assign(unscale.getUnscaled().begin(), unscale.getUnscaled().end());
    }
    if (clipGradNorm > 0) {
      SmallVector<Type> types(ValueRange(grads).getTypes());
      types.push_back(f32);
      auto clip = b.create<ClipGradNormOp>(loc, types, grads, b.getF64FloatAttr(clipGradNorm));
      replaceLaterUses(grads, clip.getClipped(), clip);
    }
    if (!foundInf) {
      finishResults(step, ret);
      return success();
    }

    // On overflow nothing the optimizer owns changes, its step count included.
    for (Operation *u : updates) {
      if (auto sgd = llvm::dyn_cast<SgdUpdateOp>(u))
        sgd.getFoundInfMutable().assign(foundInf);
      else
        llvm::cast<AdamwUpdateOp>(u).getFoundInfMutable().assign(foundInf);
    }
    for (auto inc : llvm::to_vector(body.getOps<IncrementOp>()))
      if (auto arg = llvm::dyn_cast<BlockArgument>(inc.getCounter());
          arg && step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kState) &&
          step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kState).getValue() == names::kOptimizerStep) {
        inc.getFlagMutable().assign(foundInf);
        inc.setWhen("clear");
        inc->moveAfter(foundInf.getDefiningOp());
      }

    // Nor do BatchNorm's running statistics: a skipped step is a no-op on the whole state (the
    // batch that overflowed may hold the non-finite activations that made it overflow). The
    // updates move after the flag, in their order (micro-batches chain them).
    Operation *after = foundInf.getDefiningOp();
    for (auto running : llvm::to_vector(body.getOps<BatchNormRunningUpdateOp>())) {
      running.getFoundInfMutable().assign(foundInf);
      running->moveAfter(after);
      after = running;
    }

    b.setInsertionPoint(ret);
    Value skippedNext = b.create<IncrementOp>(loc, i64, skipped, foundInf, b.getStringAttr("set"));
    updated_[names::kSkippedSteps] = skippedNext;
    outputs_.push_back({names::kSkippedStepsOutput, b.create<IdentityOp>(loc, skippedNext)});
    Value scaleOut = scale, trackerOut;
    if (mode == "dynamic") {
      auto update = b.create<UpdateLossScaleOp>(loc, f32, i64, scale, tracker, foundInf, b.getF64FloatAttr(growth),
                                                b.getF64FloatAttr(backoff), b.getI64IntegerAttr(interval));
      updated_[names::kLossScale] = update.getNewScale();
      updated_[names::kLossScaleGrowthTracker] = update.getNewGrowthTracker();
      scaleOut = update.getNewScale();
      trackerOut = update.getNewGrowthTracker();
    }
    if (mode != "guard")
      outputs_.push_back({names::kLossScaleOutput, b.create<IdentityOp>(loc, scaleOut)});
    if (trackerOut)
      outputs_.push_back({names::kStepsSinceOverflow, b.create<IdentityOp>(loc, trackerOut)});
    finishResults(step, ret);
    return success();
  }

  // New state results go after the existing ones (in argument order), new outputs last.
  void finishResults(func::FuncOp step, func::ReturnOp ret) {
    OpBuilder b(ret);
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> attrs;
    unsigned i = 0;
    for (; i < ret.getNumOperands() && step.getResultAttr(i, attr::kState); ++i) {
      results.push_back(ret.getOperand(i));
      attrs.push_back(step.getResultAttrDict(i));
    }
    for (unsigned a = 0; a < step.getNumArguments(); ++a) {
      auto name = step.getArgAttrOfType<StringAttr>(a, attr::kState);
      if (!name || !updated_.count(name.getValue()))
        continue;
      results.push_back(updated_[name.getValue()]);
      attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(attr::kState, name)));
    }
    for (; i < ret.getNumOperands(); ++i) {
      results.push_back(ret.getOperand(i));
      attrs.push_back(step.getResultAttrDict(i));
    }
    for (auto &[name, value] : outputs_) {
      results.push_back(value);
      attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(attr::kName, b.getStringAttr(name))));
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    step.setFunctionType(b.getFunctionType(step.getArgumentTypes(), ValueRange(results).getTypes()));
    step.setAllResultAttrs(attrs);
  }

  // The state this pass adds, by name: its new value (the argument itself until updated).
  llvm::StringMap<Value> updated_;
  std::vector<std::pair<std::string, Value>> outputs_;
};

} // namespace
