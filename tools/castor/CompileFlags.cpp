// castor compile's flags that shape the compiled step, parsed into CompileOptions: the
// defaults are CompileOptions's, the checks CompileOptions::validate's.
#include "Commands.h"
#include "Compile.h"

namespace cl = llvm::cl;

namespace castor::cli {

namespace {

const CompileOptions defaults;

cl::opt<std::string> target("target", cl::desc("cpu or cuda"), cl::init(defaults.target), cl::sub(compileCommand));
cl::opt<bool> train("train", cl::desc("Compile the whole training step (loss, backward, optimizer)"),
                    cl::sub(compileCommand));
cl::opt<bool> eval("eval", cl::desc("Compile the inference form (BatchNorm on running statistics) for castor-run eval"),
                   cl::sub(compileCommand));
cl::opt<std::string> optimizer("optimizer", cl::desc("sgd, adamw or none (gradients only)"),
                               cl::init(defaults.optimizer), cl::sub(compileCommand));
cl::opt<double> lr("lr", cl::desc("Base learning rate"), cl::init(defaults.lr), cl::sub(compileCommand));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(defaults.momentum), cl::sub(compileCommand));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"), cl::sub(compileCommand));
cl::opt<double> weightDecay("weight-decay", cl::desc("Weight decay (decoupled for AdamW)"),
                            cl::init(defaults.weightDecay), cl::sub(compileCommand));
cl::opt<bool> noDecayBnBias("no-decay-bn-bias", cl::desc("Exempt BatchNorm and bias parameters from weight decay"),
                            cl::sub(compileCommand));
cl::opt<double> beta1("beta1", cl::desc("AdamW beta1"), cl::init(defaults.beta1), cl::sub(compileCommand));
cl::opt<double> beta2("beta2", cl::desc("AdamW beta2"), cl::init(defaults.beta2), cl::sub(compileCommand));
cl::opt<double> adamEps("eps", cl::desc("AdamW epsilon"), cl::init(defaults.eps), cl::sub(compileCommand));
cl::opt<double> labelSmoothing("label-smoothing", cl::desc("Label smoothing of the loss"),
                               cl::init(defaults.labelSmoothing), cl::sub(compileCommand));
cl::opt<std::string> schedule("schedule", cl::desc("Learning-rate schedule: constant, step or cosine"),
                              cl::init(defaults.schedule), cl::sub(compileCommand));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warm-up steps"), cl::init(defaults.warmupSteps),
                             cl::sub(compileCommand));
cl::opt<int64_t> stepSize("step-size", cl::desc("Step schedule: steps between decays"), cl::init(defaults.stepSize),
                          cl::sub(compileCommand));
cl::opt<double> gamma("gamma", cl::desc("Step schedule: decay factor"), cl::init(defaults.gamma),
                      cl::sub(compileCommand));
cl::opt<int64_t> totalSteps("total-steps", cl::desc("Cosine schedule: number of steps"), cl::init(defaults.totalSteps),
                            cl::sub(compileCommand));
cl::opt<double> minLr("min-lr", cl::desc("Cosine schedule: final learning rate"), cl::init(defaults.minLr),
                      cl::sub(compileCommand));
cl::opt<bool> emitGradients("emit-gradients", cl::desc("Also output every parameter's gradient (gradient checks)"),
                            cl::sub(compileCommand));
cl::opt<std::string> zeroGradients("zero-gradients",
                                   cl::desc("Comma-separated globs of parameters whose gradients are forced to zero "
                                            "(ablation studies)"),
                                   cl::sub(compileCommand));
cl::opt<std::string> precision("precision", cl::desc("fp32, fp16 or bf16 (mixed precision: see castor-autocast)"),
                               cl::init(defaults.precision), cl::sub(compileCommand));
cl::opt<std::string> precisionPolicy("precision-policy",
                                     cl::desc("JSON file of per-op and per-layer precision overrides"),
                                     cl::sub(compileCommand));
cl::opt<std::string>
    fuse("fuse",
         cl::desc("auto: fuse batch norm, residual add and relu, forward and backward, where the "
                  "pattern holds (castor-fuse-batch-norm-relu), an exported linear layer (MatMul by a "
                  "transposed weight, Add of the bias) into one gemm (castor-fuse-linear), the "
                  "exported erf chain of GELU into one op (castor-fuse-gelu), attention "
                  "(castor-fuse-attention) and the sum of an input's gradients into its "
                  "convolution's data gradient (castor-fuse-gradient-add), and the step's casts placed "
                  "together so that the GPU casts them in one launch (castor-schedule-casts); none: no fusion"),
         cl::init(defaults.fuse), cl::sub(compileCommand));
cl::opt<std::string> batchNorm(
    "batch-norm",
    cl::desc("With --train: as-exported (training-form BatchNorm trains on batch statistics, inference-form "
             "BatchNorm from an eval-mode export with its statistics frozen), train (every BatchNorm on batch "
             "statistics, its running statistics updated) or frozen (every BatchNorm on its running statistics, "
             "frozen; scale and bias still train)"),
    cl::init(defaults.batchNorm), cl::sub(compileCommand));
cl::opt<std::string> recomputePolicy(
    "recompute",
    cl::desc("none; cheap: recompute every cheap value the backward reads (activations, casts, the residual add, "
             "batch-norm outputs) instead of keeping it; auto: the fewest of them that fit --memory-budget "
             "(castor-recompute)"),
    cl::init(defaults.recompute), cl::sub(compileCommand));
cl::opt<std::string> memoryBudget("memory-budget",
                                  cl::desc("Planned device memory the step must fit with --recompute auto, e.g. 6GiB"),
                                  cl::sub(compileCommand));
cl::opt<std::string> workspaceLimit("workspace-limit",
                                    cl::desc("Device memory for library workspaces, part of the planned peak: a "
                                             "size such as 256MiB, or auto (1/32 of the arena between 128 MiB and "
                                             "1 GiB); the fused kernels' reserve is added to it"),
                                    cl::init(defaults.workspaceLimit), cl::sub(compileCommand));
cl::opt<std::string> lossScale("loss-scale",
                               cl::desc("dynamic, static:S, guard (no scaling; a step with non-finite gradients "
                                        "changes no parameter) or none (default: dynamic for fp16, guard "
                                        "otherwise)"),
                               cl::sub(compileCommand));
cl::opt<double> lossScaleInit("loss-scale-init", cl::desc("Initial loss scale"), cl::init(defaults.lossScaleInit),
                              cl::sub(compileCommand));
cl::opt<double> lossScaleGrowth("loss-scale-growth", cl::desc("Growth factor of the scale"),
                                cl::init(defaults.lossScaleGrowth), cl::sub(compileCommand));
cl::opt<double> lossScaleBackoff("loss-scale-backoff", cl::desc("Backoff factor on overflow"),
                                 cl::init(defaults.lossScaleBackoff), cl::sub(compileCommand));
cl::opt<int64_t> lossScaleInterval("loss-scale-interval", cl::desc("Clean steps before the scale grows"),
                                   cl::init(defaults.lossScaleInterval), cl::sub(compileCommand));
cl::opt<double> clipGradNorm("clip-grad-norm", cl::desc("Clip the global norm of the unscaled gradients (0: off)"),
                             cl::init(defaults.clipGradNorm), cl::sub(compileCommand));
cl::opt<bool> dataParallel("data-parallel",
                           cl::desc("Average the gradients across replicas (castor-run train --replicas N, torchrun, "
                                    "srun): one all_reduce per bucket of gradients, placed as the backward computes "
                                    "them; --batch is each replica's"),
                           cl::sub(compileCommand));
cl::opt<bool> syncBatchNorm("sync-batch-norm",
                            cl::desc("--data-parallel: batch statistics over every replica's batch together, forward "
                                     "and backward (torch.nn.SyncBatchNorm; the CPU backend so far)"),
                            cl::sub(compileCommand));
cl::opt<double> bucketMiB("bucket-size", cl::desc("--data-parallel: largest bucket of gradients, in MiB (default 25)"),
                          cl::init(defaults.bucketSizeMiB), cl::sub(compileCommand));
cl::opt<bool> gradStats("grad-stats", cl::desc("Output per-parameter gradient statistics (castor-run --grad-stats)"),
                        cl::sub(compileCommand));
cl::opt<int64_t> accumulate("accumulate",
                            cl::desc("Gradient accumulation: micro-batches of --batch per step (the step's batch is "
                                     "their total)"),
                            cl::init(defaults.accumulate), cl::sub(compileCommand));
} // namespace

CompileOptions compileOptionsFromFlags() {
  CompileOptions options;
  options.train = train;
  options.eval = eval;
  options.target = target;
  options.precision = precision;
  options.precisionPolicy = precisionPolicy;
  options.fuse = fuse;
  options.workspaceLimit = workspaceLimit;
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
  options.eps = adamEps;
  options.schedule = schedule;
  options.warmupSteps = warmupSteps;
  options.stepSize = stepSize;
  options.gamma = gamma;
  options.totalSteps = totalSteps;
  options.minLr = minLr;
  options.dropoutSeed = int64_t(modelSeed());
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
  options.bucketSizeMiB = bucketMiB;
  options.gradStats = gradStats;
  options.recompute = recomputePolicy;
  options.memoryBudget = memoryBudget;
  return options;
}

} // namespace castor::cli
