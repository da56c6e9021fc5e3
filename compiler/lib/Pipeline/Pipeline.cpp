// The order of the compile pipeline's passes and the options each gets from CompileOptions.
#include "castor/Pipeline/Pipeline.h"

#include "castor/Passes/Passes.h"
#include "castor/Plan/PlanPasses.h"
#include "plan/plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cassert>

namespace castor {

namespace {

// The runtime's arena alignment, which castor-recompute's estimate of the plan shares.
constexpr int64_t kArenaAlignment = int64_t(plan::kArenaAlignment);

// Fusions of exported patterns, before autocast: they match the exporters' f32 graphs.
void addForwardFusions(mlir::OpPassManager &pm, const CompileOptions &options) {
  if (!options.fuses())
    return;
  mlir::OpPassManager &funcPm = pm.nest<mlir::func::FuncOp>();
  funcPm.addPass(createCastorFuseLinear());
  funcPm.addPass(createCastorFuseGelu());
  if (options.mixedPrecision()) // cuDNN's fused attention runs in f16 or bf16
    funcPm.addPass(createCastorFuseAttention());
}

void addAutocast(mlir::OpPassManager &pm, const CompileOptions &options) {
  if (options.mixedPrecision())
    pm.addPass(createCastorAutocast(CastorAutocastOptions{options.precision, options.precisionPolicy}));
}

CastorMakeTrainStepOptions trainStepOptions(const CompileOptions &options) {
  CastorMakeTrainStepOptions step;
  step.optimizer = options.optimizer;
  step.lr = options.lr;
  step.momentum = options.momentum;
  step.nesterov = options.nesterov;
  step.weightDecay = options.weightDecay;
  step.noDecayBnBias = options.noDecayBnBias;
  step.beta1 = options.beta1;
  step.beta2 = options.beta2;
  step.eps = options.eps;
  step.schedule = options.schedule;
  step.warmupSteps = options.warmupSteps;
  step.stepSize = options.stepSize;
  step.gamma = options.gamma;
  step.totalSteps = options.totalSteps;
  step.minLr = options.minLr;
  step.dropoutSeed = options.dropoutSeed;
  step.emitGradients = options.emitGradients;
  step.zeroGradients = options.zeroGradients;
  step.microBatches = options.accumulate;
  return step;
}

CastorLossScaleOptions lossScaleOptions(const CompileOptions &options) {
  const auto scaling = options.lossScaling();
  assert(scaling && "validated options");
  CastorLossScaleOptions loss;
  loss.mode = scaling->mode;
  loss.init = scaling->init;
  loss.growth = options.lossScaleGrowth;
  loss.backoff = options.lossScaleBackoff;
  loss.interval = options.lossScaleInterval;
  loss.clipGradNorm = options.clipGradNorm;
  return loss;
}

// Cast cleanup, then lowering to plan-level form.
void addLowering(mlir::OpPassManager &pm, const CompileOptions &options, bool training) {
  mlir::OpPassManager &funcPm = pm.nest<mlir::func::FuncOp>();
  funcPm.addPass(createCastorCastCleanup());
  if (options.fuses())
    funcPm.addPass(createCastorScheduleCasts(CastorScheduleCastsOptions{options.recompute == "none"}));
  const int64_t workspaceBytes = int64_t(options.workspaceBytes());
  // Before castor-recompute, so that its plan of the step's memory (and a --memory-budget) is that
  // of the fused step; a group recomputes as a whole.
  if (options.generatesKernels()) {
    // First, so that its copies join the backward's groups.
    if (training)
      funcPm.addPass(createCastorRecomputeElementwise());
    funcPm.addPass(createCastorFuseElementwise());
  }
  if (training)
    funcPm.addPass(createCastorRecompute(
        CastorRecomputeOptions{options.recompute, options.memoryBudget, workspaceBytes, kArenaAlignment}));
  funcPm.addPass(createCastorSelectKernels(CastorSelectKernelsOptions{options.target}));
  funcPm.addPass(createCastorPlanViews(CastorPlanViewsOptions{options.transposedViews}));
  funcPm.addPass(createCastorPlanMemory(CastorPlanMemoryOptions{kArenaAlignment, workspaceBytes}));
}

} // namespace

void buildTrainingPipeline(mlir::OpPassManager &pm, const CompileOptions &options) {
  assert(options.train && options.validate().empty() && "validated training options");
  addForwardFusions(pm, options);
  pm.addPass(createCastorBatchNormForm(CastorBatchNormFormOptions{options.batchNorm}));
  pm.addPass(createCastorAttachLoss(CastorAttachLossOptions{options.labelSmoothing}));
  addAutocast(pm, options); // on the forward, so that the backward inherits its casts
  pm.addPass(createCastorMakeTrainStep(trainStepOptions(options)));
  if (options.dataParallel)
    pm.addPass(createCastorDataParallel(
        CastorDataParallelOptions{int64_t(options.bucketSizeMiB * double(1 << 20)), options.syncBatchNorm}));
  pm.addPass(createCastorLossScale(lossScaleOptions(options)));
  if (options.gradStats)
    pm.addPass(createCastorGradientStats());
  if (options.fuses()) { // these need the backward
    mlir::OpPassManager &funcPm = pm.nest<mlir::func::FuncOp>();
    funcPm.addPass(createCastorFuseBatchNormRelu());
    funcPm.addPass(createCastorFuseGradientAdd());
  }
  addLowering(pm, options, /*training=*/true);
}

void buildInferencePipeline(mlir::OpPassManager &pm, const CompileOptions &options) {
  assert(!options.train && options.validate().empty() && "validated inference options");
  addForwardFusions(pm, options);
  if (options.eval)
    pm.addPass(createCastorInferenceForm());
  addAutocast(pm, options);
  addLowering(pm, options, /*training=*/false);
}

void buildCompilePipeline(mlir::OpPassManager &pm, const CompileOptions &options) {
  if (options.train)
    buildTrainingPipeline(pm, options);
  else
    buildInferencePipeline(pm, options);
}

llvm::StringRef compiledFunctionName(const CompileOptions &options) {
  return options.train ? "train_step" : "forward";
}

} // namespace castor
