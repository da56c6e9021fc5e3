// castor-train-pipeline and castor-inference-pipeline: the compile pipeline for castor-opt, its
// options named as castor compile's flags, with castor compile's defaults and validation.
#include "castor/Pipeline/Pipeline.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

namespace castor {

namespace {

const CompileOptions &defaults() {
  static const CompileOptions options;
  return options;
}

// The options both pipelines take.
template <typename Derived>
struct SharedOptions : mlir::PassPipelineOptions<Derived> {
  template <typename T>
  using Option = typename mlir::PassPipelineOptions<Derived>::template Option<T>;

  Option<std::string> target{*this, "target", llvm::cl::desc("cpu or cuda"), llvm::cl::init(defaults().target)};
  Option<std::string> precision{*this, "precision", llvm::cl::desc("fp32, fp16 or bf16"),
                                llvm::cl::init(defaults().precision)};
  Option<std::string> precisionPolicy{*this, "precision-policy",
                                      llvm::cl::desc("JSON file of per-op and per-layer precision overrides"),
                                      llvm::cl::init(defaults().precisionPolicy)};
  Option<std::string> fuse{*this, "fuse", llvm::cl::desc("auto (every fusion where its pattern holds) or none"),
                           llvm::cl::init(defaults().fuse)};
  Option<std::string> workspaceLimit{*this, "workspace-limit",
                                     llvm::cl::desc("library workspace of the planned peak: auto or a size"),
                                     llvm::cl::init(defaults().workspaceLimit)};

  void fill(CompileOptions &options) const {
    options.target = target;
    options.precision = precision;
    options.precisionPolicy = precisionPolicy;
    options.fuse = fuse;
    options.workspaceLimit = workspaceLimit;
  }
};

struct InferencePipelineOptions : SharedOptions<InferencePipelineOptions> {
  Option<bool> eval{*this, "eval", llvm::cl::desc("the inference form (BatchNorm on running statistics)"),
                    llvm::cl::init(defaults().eval)};

  CompileOptions compileOptions() const {
    CompileOptions options;
    fill(options);
    options.eval = eval;
    return options;
  }
};

struct TrainPipelineOptions : SharedOptions<TrainPipelineOptions> {
  Option<std::string> batchNorm{*this, "batch-norm", llvm::cl::desc("as-exported, train or frozen"),
                                llvm::cl::init(defaults().batchNorm)};
  Option<double> labelSmoothing{*this, "label-smoothing", llvm::cl::desc("label smoothing of the loss"),
                                llvm::cl::init(defaults().labelSmoothing)};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd, adamw or none"),
                                llvm::cl::init(defaults().optimizer)};
  Option<double> lr{*this, "lr", llvm::cl::desc("base learning rate"), llvm::cl::init(defaults().lr)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"), llvm::cl::init(defaults().momentum)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(defaults().nesterov)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("weight decay (decoupled for AdamW)"),
                             llvm::cl::init(defaults().weightDecay)};
  Option<bool> noDecayBnBias{*this, "no-decay-bn-bias",
                             llvm::cl::desc("exempt BatchNorm and bias parameters from weight decay"),
                             llvm::cl::init(defaults().noDecayBnBias)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(defaults().beta1)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(defaults().beta2)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"), llvm::cl::init(defaults().eps)};
  Option<std::string> schedule{*this, "schedule", llvm::cl::desc("constant, step or cosine"),
                               llvm::cl::init(defaults().schedule)};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::desc("linear warm-up steps"),
                              llvm::cl::init(defaults().warmupSteps)};
  Option<int64_t> stepSize{*this, "step-size", llvm::cl::desc("step schedule: steps between decays"),
                           llvm::cl::init(defaults().stepSize)};
  Option<double> gamma{*this, "gamma", llvm::cl::desc("step schedule: decay factor"),
                       llvm::cl::init(defaults().gamma)};
  Option<int64_t> totalSteps{*this, "total-steps", llvm::cl::desc("cosine schedule: number of steps"),
                             llvm::cl::init(defaults().totalSteps)};
  Option<double> minLr{*this, "min-lr", llvm::cl::desc("cosine schedule: final learning rate"),
                       llvm::cl::init(defaults().minLr)};
  Option<int64_t> dropoutSeed{*this, "dropout-seed", llvm::cl::desc("seed of the dropout masks"),
                              llvm::cl::init(defaults().dropoutSeed)};
  Option<bool> emitGradients{*this, "emit-gradients", llvm::cl::desc("also output every parameter's gradient"),
                             llvm::cl::init(defaults().emitGradients)};
  Option<std::string> zeroGradients{*this, "zero-gradients",
                                    llvm::cl::desc("comma-separated globs of parameters whose gradients are zero"),
                                    llvm::cl::init(defaults().zeroGradients)};
  Option<int64_t> accumulate{*this, "accumulate", llvm::cl::desc("micro-batches per step"),
                             llvm::cl::init(defaults().accumulate)};
  Option<std::string> lossScale{*this, "loss-scale",
                                llvm::cl::desc("dynamic, static:S, guard or none (default: dynamic for fp16, "
                                               "guard otherwise)"),
                                llvm::cl::init(defaults().lossScale)};
  Option<double> lossScaleInit{*this, "loss-scale-init", llvm::cl::desc("initial loss scale"),
                               llvm::cl::init(defaults().lossScaleInit)};
  Option<double> lossScaleGrowth{*this, "loss-scale-growth", llvm::cl::desc("growth factor of the scale"),
                                 llvm::cl::init(defaults().lossScaleGrowth)};
  Option<double> lossScaleBackoff{*this, "loss-scale-backoff", llvm::cl::desc("backoff factor on overflow"),
                                  llvm::cl::init(defaults().lossScaleBackoff)};
  Option<int64_t> lossScaleInterval{*this, "loss-scale-interval", llvm::cl::desc("clean steps before growth"),
                                    llvm::cl::init(defaults().lossScaleInterval)};
  Option<double> clipGradNorm{*this, "clip-grad-norm", llvm::cl::desc("clip the global gradient norm (0: off)"),
                              llvm::cl::init(defaults().clipGradNorm)};
  Option<bool> dataParallel{*this, "data-parallel", llvm::cl::desc("average the gradients across replicas"),
                            llvm::cl::init(defaults().dataParallel)};
  Option<bool> syncBatchNorm{*this, "sync-batch-norm", llvm::cl::desc("batch statistics over every replica"),
                             llvm::cl::init(defaults().syncBatchNorm)};
  Option<double> bucketSize{*this, "bucket-size", llvm::cl::desc("largest bucket of gradients, in MiB"),
                            llvm::cl::init(defaults().bucketSizeMiB)};
  Option<bool> gradStats{*this, "grad-stats", llvm::cl::desc("output per-parameter gradient statistics"),
                         llvm::cl::init(defaults().gradStats)};
  Option<std::string> recompute{*this, "recompute", llvm::cl::desc("none, cheap or auto"),
                                llvm::cl::init(defaults().recompute)};
  Option<std::string> memoryBudget{*this, "memory-budget", llvm::cl::desc("what recompute=auto must fit, e.g. 6GiB"),
                                   llvm::cl::init(defaults().memoryBudget)};

  CompileOptions compileOptions() const {
    CompileOptions options;
    fill(options);
    options.train = true;
    options.batchNorm = batchNorm;
    options.labelSmoothing = labelSmoothing;
    options.optimizer = optimizer;
    options.lr = lr;
    options.momentum = momentum;
    options.nesterov = nesterov;
    options.weightDecay = weightDecay;
    options.noDecayBnBias = noDecayBnBias;
    options.beta1 = beta1;
    options.beta2 = beta2;
    options.eps = eps;
    options.schedule = schedule;
    options.warmupSteps = warmupSteps;
    options.stepSize = stepSize;
    options.gamma = gamma;
    options.totalSteps = totalSteps;
    options.minLr = minLr;
    options.dropoutSeed = dropoutSeed;
    options.emitGradients = emitGradients;
    options.zeroGradients = zeroGradients;
    options.accumulate = accumulate;
    options.lossScale = lossScale;
    options.lossScaleInit = lossScaleInit;
    options.lossScaleGrowth = lossScaleGrowth;
    options.lossScaleBackoff = lossScaleBackoff;
    options.lossScaleInterval = lossScaleInterval;
    options.clipGradNorm = clipGradNorm;
    options.dataParallel = dataParallel;
    options.syncBatchNorm = syncBatchNorm;
    options.bucketSizeMiB = bucketSize;
    options.gradStats = gradStats;
    options.recompute = recompute;
    options.memoryBudget = memoryBudget;
    return options;
  }
};

// What PassPipelineRegistration<Options> does, except that its builder cannot fail: this one
// refuses options that CompileOptions::validate refuses, before any pass is added, so a
// wrong option fails castor-opt with castor compile's message instead of building a pipeline.
template <typename Options>
void registerPipeline(llvm::StringRef name, llvm::StringRef summary) {
  mlir::registerPassPipeline(
      name, summary,
      [name](mlir::OpPassManager &pm, llvm::StringRef text,
             llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> errorHandler) {
        Options parsed;
        if (mlir::failed(parsed.parseFromString(text)))
          return mlir::failure();
        const CompileOptions options = parsed.compileOptions();
        if (std::string error = options.validate(); !error.empty())
          return errorHandler(name + ": " + error);
        buildCompilePipeline(pm, options);
        return mlir::success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> handler) { handler(Options()); });
}

} // namespace

void registerCastorPipelines() {
  registerPipeline<TrainPipelineOptions>(
      "castor-train-pipeline", "castor compile --train: @forward to @train_step in plan-level form");
  registerPipeline<InferencePipelineOptions>("castor-inference-pipeline",
                                             "castor compile (--eval): @forward in plan-level form");
}

} // namespace castor
