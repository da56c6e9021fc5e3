#include "StepFunctions.h"
// castor-make-train-step: the whole training step from the forward function with its loss.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Support/OptionChoices.h"
#include "castor/state_names.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/GlobPattern.h"

namespace castor {
#define GEN_PASS_DEF_CASTORMAKETRAINSTEP
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;
using namespace castor;

namespace {

// One state tensor of the step: an argument of train_step and, updated, one of its results.
struct StateSlot {
  std::string name;
  Type type;
  Init init;
  bool trainable = false;
  Value arg;     // in train_step
  Value updated; // the value returned; the argument itself when unchanged
};

class TrainStepBuilder {
public:
  TrainStepBuilder(func::FuncOp forward, const CastorMakeTrainStepOptions &opts)
      : forward_(forward), opts_(opts), b_(forward.getContext()) {}

  LogicalResult run();

private:
  size_t addState(const std::string &name, Type type, Init init, bool trainable = false) {
    slots_.push_back({name, type, init, trainable, {}, {}});
    return slots_.size() - 1;
  }
  // Seeds every loss with its weight, then one reverse sweep over the body.
  LogicalResult buildBackward(ArrayRef<Value> losses, double weight);
  LogicalResult buildOptimizer();
  LogicalResult zeroGradients();
  void accumulate(Value value, Value grad);

  func::FuncOp forward_;
  const CastorMakeTrainStepOptions &opts_;
  OpBuilder b_;
  func::FuncOp step_;
  std::vector<StateSlot> slots_;
  llvm::DenseMap<Value, Value> grads_;
  Value lr_; // this step's learning rate (an optimizer's schedule), reported as the output "lr"
  size_t iteration_ = 0, optimizerStep_ = 0;
  // Trainable parameters' slots, each with the slot of its first optimizer buffer.
  std::vector<std::pair<size_t, size_t>> trainable_;
  llvm::DenseMap<Value, size_t> slotOfArg_;
};

void TrainStepBuilder::accumulate(Value value, Value grad) {
  auto it = grads_.find(value);
  if (it == grads_.end()) {
    grads_[value] = grad;
    return;
  }
  it->second = b_.create<AddOp>(grad.getLoc(), value.getType(), it->second, grad);
}

LogicalResult TrainStepBuilder::run() {
  MLIRContext *ctx = forward_.getContext();
  Block &fwd = forward_.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(fwd.getTerminator());
  if (fwd.getNumArguments() != 2 || ret.getNumOperands() != 2)
    return forward_.emitError("expects @forward(images, labels) -> (loss, logits): run castor-attach-loss first");

  // State: parameters in their order, then optimizer buffers, then the counters.
  SmallVector<ParameterOp> params;
  for (auto p : fwd.getOps<ParameterOp>()) {
    params.push_back(p);
    addState(p.getName().str(), p.getType(), p.getInit(), p.getTrainable());
    if (p.getTrainable() && opts_.optimizer != "none")
      trainable_.push_back({slots_.size() - 1, 0});
  }
  for (auto &[i, buffer] : trainable_) {
    std::string name = slots_[i].name;
    Type type = slots_[i].type;
    buffer = slots_.size();
    if (opts_.optimizer == "sgd")
      addState(name + names::kMomentumBufferSuffix, type, Init::zeros);
    else {
      addState(name + names::kExpAvgSuffix, type, Init::zeros);
      addState(name + names::kExpAvgSqSuffix, type, Init::zeros);
    }
  }
  auto counterType = RankedTensorType::get({}, IntegerType::get(ctx, 64));
  iteration_ = addState(names::kIteration, counterType, Init::zeros);
  optimizerStep_ = addState(names::kOptimizerStep, counterType, Init::zeros);

  // train_step(state..., images, labels); with k micro-batches the batch is k times larger.
  int64_t k = opts_.microBatches;
  if (k < 1)
    return forward_.emitError("micro-batches must be at least 1");
  auto scaleBatch = [&](Type t) {
    auto ranked = llvm::cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(ranked.getShape());
    shape[0] *= k;
    return RankedTensorType::get(shape, ranked.getElementType());
  };
  SmallVector<Type> argTypes;
  for (auto &s : slots_)
    argTypes.push_back(s.type);
  argTypes.push_back(scaleBatch(fwd.getArgument(0).getType()));
  argTypes.push_back(scaleBatch(fwd.getArgument(1).getType()));
  b_.setInsertionPointAfter(forward_);
  step_ = b_.create<func::FuncOp>(forward_.getLoc(), "train_step", b_.getFunctionType(argTypes, {}));
  Block *body = step_.addEntryBlock();
  for (auto [i, s] : llvm::enumerate(slots_)) {
    s.arg = s.updated = body->getArgument(i);
    slotOfArg_[s.arg] = i;
    step_.setArgAttr(i, attr::kState, b_.getStringAttr(s.name));
    step_.setArgAttr(i, attr::kInit, InitAttr::get(ctx, s.init));
    if (s.trainable)
      step_.setArgAttr(i, attr::kTrainable, b_.getUnitAttr());
  }
  Value images = body->getArgument(slots_.size()), labels = body->getArgument(slots_.size() + 1);
  step_.setArgAttr(slots_.size(), attr::kName, b_.getStringAttr(names::kImages));
  step_.setArgAttr(slots_.size() + 1, attr::kName, b_.getStringAttr(names::kLabels));
  Value iteration = slots_[iteration_].arg;
  b_.setInsertionPointToEnd(body);
  SmallVector<Value> imageParts{images}, labelParts{labels};
  if (k > 1) {
    auto axis = b_.getI64IntegerAttr(0);
    imageParts = b_.create<SplitOp>(forward_.getLoc(), SmallVector<Type>(k, fwd.getArgument(0).getType()), images, axis)
                     .getResults();
    labelParts = b_.create<SplitOp>(forward_.getLoc(), SmallVector<Type>(k, fwd.getArgument(1).getType()), labels, axis)
                     .getResults();
  }

  // The forward computation per micro-batch, parameters replaced by state and dropout keyed
  // by the iteration (and a salt per dropout op and micro-batch).
  int64_t salt = 0;
  SmallVector<Value> losses, logitParts;
  for (int64_t j = 0; j < k; ++j) {
    IRMapping map;
    map.map(fwd.getArgument(0), imageParts[j]);
    map.map(fwd.getArgument(1), labelParts[j]);
    for (auto [i, p] : llvm::enumerate(params))
      map.map(p.getResult(), slots_[i].arg);
    for (Operation &op : fwd.without_terminator()) {
      if (llvm::isa<ParameterOp>(op))
        continue;
      if (auto d = llvm::dyn_cast<DropoutOp>(op); d && !d.getIteration()) {
        Value y = b_.create<DropoutOp>(d.getLoc(), d.getType(), map.lookup(d.getInput()), iteration, d.getRatioAttr(),
                                       b_.getI64IntegerAttr(opts_.dropoutSeed), b_.getI64IntegerAttr(salt++),
                                       d.getPerSampleAttr());
        map.map(d.getResult(), y);
        continue;
      }
      b_.clone(op, map);
    }
    losses.push_back(map.lookup(ret.getOperand(0)));
    logitParts.push_back(map.lookup(ret.getOperand(1)));
  }

  if (failed(buildBackward(losses, 1.0 / double(k))) || failed(zeroGradients()))
    return failure();

  // The step's loss is the mean over the micro-batches; accuracy counts the whole batch.
  Value loss = losses.front(), logits = logitParts.front();
  if (k > 1) {
    Location loc = forward_.getLoc();
    for (Value l : ArrayRef<Value>(losses).drop_front())
      loss = b_.create<AddOp>(loc, loss.getType(), loss, l);
    auto lossType = llvm::cast<RankedTensorType>(loss.getType());
    Value invK = b_.create<ConstantOp>(
        loc, DenseElementsAttr::get(lossType, b_.getFloatAttr(lossType.getElementType(), 1.0 / double(k))));
    loss = b_.create<MulOp>(loc, loss.getType(), loss, invK);
    logits = b_.create<ConcatOp>(loc, scaleBatch(logits.getType()), logitParts, b_.getI64IntegerAttr(0));
  }

  // BatchNorm running statistics, as PyTorch keeps them.
  for (auto bn : llvm::to_vector(body->getOps<BatchNormTrainingOp>())) {
    if (bn.getRunningStats().size() != 2)
      continue;
    auto x = llvm::cast<RankedTensorType>(bn.getInput().getType());
    int64_t count = x.getNumElements() / x.getDimSize(1);
    if (!slotOfArg_.count(bn.getRunningStats()[0]) || !slotOfArg_.count(bn.getRunningStats()[1]))
      return bn.emitError("running statistics must be parameters of the model");
    // Micro-batches update the statistics one after another.
    Value rm = slots_[slotOfArg_[bn.getRunningStats()[0]]].updated;
    Value rv = slots_[slotOfArg_[bn.getRunningStats()[1]]].updated;
    auto update = b_.create<BatchNormRunningUpdateOp>(bn.getLoc(), rm.getType(), rv.getType(), rm, rv,
                                                      bn.getBatchMean(), bn.getBatchInvStd(), /*found_inf=*/Value(),
                                                      bn.getMomentumAttr(),
                                                      bn.getEpsilonAttr(), b_.getI64IntegerAttr(count), bn.getSyncAttr());
    slots_[slotOfArg_[bn.getRunningStats()[0]]].updated = update.getNewRunningMean();
    slots_[slotOfArg_[bn.getRunningStats()[1]]].updated = update.getNewRunningVar();
  }

  if (failed(buildOptimizer()))
    return failure();

  Value correct = b_.create<CountCorrectOp>(forward_.getLoc(), RankedTensorType::get({}, IntegerType::get(ctx, 64)),
                                            logits, labels);
  SmallVector<Value> results;
  for (auto &s : slots_)
    results.push_back(s.updated);
  results.append({loss, correct});
  if (lr_)
    results.push_back(lr_);
  if (opts_.emitGradients)
    for (auto &s : slots_)
      if (s.trainable) {
        Value g = grads_.lookup(s.arg);
        if (!g)
          return forward_.emitError("parameter '") << s.name << "' does not affect the loss";
        results.push_back(g);
      }
  b_.create<func::ReturnOp>(forward_.getLoc(), results);
  step_.setFunctionType(b_.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, s] : llvm::enumerate(slots_))
    step_.setResultAttr(i, attr::kState, b_.getStringAttr(s.name));
  step_.setResultAttr(slots_.size(), attr::kName, b_.getStringAttr(names::kLoss));
  step_.setResultAttr(slots_.size() + 1, attr::kName, b_.getStringAttr(names::kCorrect));
  unsigned r = slots_.size() + 2;
  if (lr_)
    step_.setResultAttr(r++, attr::kName, b_.getStringAttr(names::kLr));
  if (opts_.emitGradients)
    for (auto &s : slots_)
      if (s.trainable)
        step_.setResultAttr(r++, attr::kName, b_.getStringAttr(names::kGradPrefix + s.name));
  forward_.erase();
  return success();
}

// Reverse-mode autodiff over the ops between the state and the loss.
LogicalResult TrainStepBuilder::buildBackward(ArrayRef<Value> losses, double weight) {
  Block *body = Value(losses.front()).getParentBlock();
  SmallVector<Operation *> forwardOps;
  for (Operation &op : *body)
    forwardOps.push_back(&op);
  auto lossType = llvm::cast<RankedTensorType>(losses.front().getType());
  Value seed = b_.create<ConstantOp>(losses.front().getLoc(),
                                     DenseElementsAttr::get(lossType, b_.getFloatAttr(lossType.getElementType(), weight)));
  for (Value loss : losses)
    grads_[loss] = seed;

  // Only values computed from trainable state need gradients: the backward pass never goes
  // through the images or labels.
  llvm::DenseSet<Value> active;
  for (auto &s : slots_)
    if (s.trainable)
      active.insert(s.arg);
  for (Operation *op : forwardOps)
    if (llvm::any_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
      active.insert(op->result_begin(), op->result_end());

  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(grads_.lookup(r));
      any |= bool(resultGrads.back());
    }
    if (!any || llvm::none_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
      continue;
    auto vjp = llvm::dyn_cast<AutodiffOpInterface>(op);
    if (!vjp)
      return op->emitError("'") << op->getName() << "' has no VJP, so the loss cannot be differentiated through it";
    SmallVector<Value> operandGrads;
    if (failed(vjp.buildVjp(b_, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitError("its VJP returned ") << operandGrads.size() << " gradients for " << op->getNumOperands()
                                                << " operands";
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!grad || !active.contains(operand))
        continue;
      if (grad.getType() != operand.getType())
        return op->emitError("its VJP gives a gradient of type ") << grad.getType() << " for an operand of type "
                                                                   << operand.getType();
      accumulate(operand, grad);
    }
  }
  return success();
}

// Ablations: the gradients of the parameters matching `zero-gradients` become zero.
LogicalResult TrainStepBuilder::zeroGradients() {
  if (opts_.zeroGradients.empty())
    return success();
  SmallVector<llvm::GlobPattern> patterns;
  SmallVector<StringRef> parts;
  StringRef(opts_.zeroGradients).split(parts, ',', -1, false);
  for (StringRef part : parts) {
    auto pattern = llvm::GlobPattern::create(part.trim());
    if (!pattern)
      return forward_.emitError("invalid zero-gradients pattern '") << part << "'";
    patterns.push_back(std::move(*pattern));
  }
  for (auto &s : slots_) {
    Value grad = grads_.lookup(s.arg);
    if (!grad || !llvm::any_of(patterns, [&](const llvm::GlobPattern &p) { return p.match(s.name); }))
      continue;
    grads_[s.arg] = b_.create<ReduceSumToOp>(grad.getLoc(), grad.getType(), grad, b_.getF64FloatAttr(0.0));
  }
  return success();
}

LogicalResult TrainStepBuilder::buildOptimizer() {
  Location loc = forward_.getLoc();
  auto f32Scalar = RankedTensorType::get({}, b_.getF32Type());
  Value iteration = slots_[iteration_].arg;
  // The counter advances last: the schedule and dropout read this step's value.
  auto advance = llvm::make_scope_exit(
      [&] { slots_[iteration_].updated = b_.create<IncrementOp>(loc, iteration.getType(), iteration); });
  if (opts_.optimizer == "none")
    return success();
  if (std::string error = choices::checkChoice("optimizer", opts_.optimizer, choices::kOptimizers); !error.empty())
    return forward_.emitError(error) << ", got '" << opts_.optimizer << "'";

  Value lr = b_.create<LrScheduleOp>(loc, f32Scalar, iteration, b_.getStringAttr(opts_.schedule),
                                     b_.getF64FloatAttr(opts_.lr), b_.getI64IntegerAttr(opts_.warmupSteps),
                                     b_.getI64IntegerAttr(opts_.stepSize), b_.getF64FloatAttr(opts_.gamma),
                                     b_.getI64IntegerAttr(opts_.totalSteps), b_.getF64FloatAttr(opts_.minLr));
  lr_ = b_.create<IdentityOp>(loc, f32Scalar, lr); // an output of its own
  Value stepArg = slots_[optimizerStep_].arg;
  Value step = b_.create<IncrementOp>(loc, stepArg.getType(), stepArg);
  slots_[optimizerStep_].updated = step;

  for (auto [i, buffer] : trainable_) {
    StateSlot &p = slots_[i];
    Value grad = grads_.lookup(p.arg);
    if (!grad)
      return forward_.emitError("parameter '") << p.name << "' does not affect the loss";
    bool exempt = opts_.noDecayBnBias && llvm::cast<RankedTensorType>(p.type).getRank() <= 1;
    double decay = exempt ? 0.0 : double(opts_.weightDecay);
    if (opts_.optimizer == "sgd") {
      StateSlot &buf = slots_[buffer];
      auto update = b_.create<SgdUpdateOp>(loc, p.type, buf.type, p.arg, grad, buf.arg, lr, step, Value(),
                                           b_.getF64FloatAttr(opts_.momentum), b_.getBoolAttr(opts_.nesterov),
                                           b_.getF64FloatAttr(decay), b_.getF64FloatAttr(0.0));
      p.updated = update.getNewParam();
      buf.updated = update.getNewMomentumBuffer();
    } else {
      StateSlot &m = slots_[buffer];
      StateSlot &v = slots_[buffer + 1];
      auto update = b_.create<AdamwUpdateOp>(loc, p.type, m.type, v.type, p.arg, grad, m.arg, v.arg, lr, step, Value(),
                                             b_.getF64FloatAttr(opts_.beta1), b_.getF64FloatAttr(opts_.beta2),
                                             b_.getF64FloatAttr(opts_.eps), b_.getF64FloatAttr(decay));
      p.updated = update.getNewParam();
      m.updated = update.getNewExpAvg();
      v.updated = update.getNewExpAvgSq();
    }
  }
  return success();
}

} // namespace

namespace {
struct MakeTrainStepPass : castor::impl::CastorMakeTrainStepBase<MakeTrainStepPass> {
  using CastorMakeTrainStepBase::CastorMakeTrainStepBase;

  void runOnOperation() override {
    auto forward = castor::forwardFunction(getOperation(), " to train");
    if (!forward)
      return signalPassFailure();
    CastorMakeTrainStepOptions opts;
    opts.optimizer = optimizer;
    opts.lr = lr;
    opts.momentum = momentum;
    opts.nesterov = nesterov;
    opts.weightDecay = weightDecay;
    opts.noDecayBnBias = noDecayBnBias;
    opts.beta1 = beta1;
    opts.beta2 = beta2;
    opts.eps = eps;
    opts.schedule = schedule;
    opts.warmupSteps = warmupSteps;
    opts.stepSize = stepSize;
    opts.gamma = gamma;
    opts.totalSteps = totalSteps;
    opts.minLr = minLr;
    opts.dropoutSeed = dropoutSeed;
    opts.emitGradients = emitGradients;
    opts.zeroGradients = zeroGradients;
    opts.microBatches = microBatches;
    if (failed(TrainStepBuilder(forward, opts).run()))
      signalPassFailure();
  }
};
} // namespace
