// castor compile MODEL.onnx -o MODEL.plan: import, lower to plan-level form, plan memory,
// validate and write the plan (and the weights the plan needs beside it).
#include "Commands.h"
#include "MemoryReport.h"

#include "castor/Dialect/CastorOps.h"
#include "castor/Frontends/Onnx/Importer.h"
#include "castor/Passes/Passes.h"
#include "castor/Plan/PlanEmitter.h"
#include "castor/Plan/PlanPasses.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/text_format.h>

#include <chrono>
#include <map>

namespace cl = llvm::cl;

namespace castor::cli {

namespace {

enum class Emit { None, Mlir, PlanText };

cl::opt<std::string> planPath("o", cl::desc("Plan file to write"), cl::value_desc("MODEL.plan"), cl::Required,
                              cl::sub(compileCommand));
cl::opt<std::string> target("target", cl::desc("cpu or cuda"), cl::init("cpu"), cl::sub(compileCommand));
cl::opt<bool> train("train", cl::desc("Compile the whole training step (loss, backward, optimizer)"),
                    cl::sub(compileCommand));
cl::opt<bool> eval("eval", cl::desc("Compile the inference form (BatchNorm on running statistics) for castor-run eval"),
                   cl::sub(compileCommand));
cl::opt<std::string> optimizer("optimizer", cl::desc("sgd, adamw or none (gradients only)"), cl::init("sgd"),
                               cl::sub(compileCommand));
cl::opt<double> lr("lr", cl::desc("Base learning rate"), cl::init(0.1), cl::sub(compileCommand));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(0.9), cl::sub(compileCommand));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"), cl::sub(compileCommand));
cl::opt<double> weightDecay("weight-decay", cl::desc("Weight decay (decoupled for AdamW)"), cl::init(0.0),
                            cl::sub(compileCommand));
cl::opt<bool> noDecayBnBias("no-decay-bn-bias", cl::desc("Exempt BatchNorm and bias parameters from weight decay"),
                            cl::sub(compileCommand));
cl::opt<double> beta1("beta1", cl::desc("AdamW beta1"), cl::init(0.9), cl::sub(compileCommand));
cl::opt<double> beta2("beta2", cl::desc("AdamW beta2"), cl::init(0.999), cl::sub(compileCommand));
cl::opt<double> adamEps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8), cl::sub(compileCommand));
cl::opt<double> labelSmoothing("label-smoothing", cl::desc("Label smoothing of the loss"), cl::init(0.0),
                               cl::sub(compileCommand));
cl::opt<std::string> schedule("schedule", cl::desc("Learning-rate schedule: constant, step or cosine"),
                              cl::init("constant"), cl::sub(compileCommand));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warm-up steps"), cl::init(0), cl::sub(compileCommand));
cl::opt<int64_t> stepSize("step-size", cl::desc("Step schedule: steps between decays"), cl::init(1),
                          cl::sub(compileCommand));
cl::opt<double> gamma("gamma", cl::desc("Step schedule: decay factor"), cl::init(0.1), cl::sub(compileCommand));
cl::opt<int64_t> totalSteps("total-steps", cl::desc("Cosine schedule: number of steps"), cl::init(1),
                            cl::sub(compileCommand));
cl::opt<double> minLr("min-lr", cl::desc("Cosine schedule: final learning rate"), cl::init(0.0),
                      cl::sub(compileCommand));
cl::opt<bool> emitGradients("emit-gradients", cl::desc("Also output every parameter's gradient (gradient checks)"),
                            cl::sub(compileCommand));
cl::opt<std::string> zeroGradients("zero-gradients",
                                   cl::desc("Comma-separated globs of parameters whose gradients are forced to zero "
                                            "(ablation studies)"),
                                   cl::sub(compileCommand));
cl::opt<std::string> precision("precision", cl::desc("fp32, fp16 or bf16 (mixed precision: see castor-autocast)"),
                               cl::init("fp32"), cl::sub(compileCommand));
cl::opt<std::string> precisionPolicy("precision-policy", cl::desc("JSON file of per-op and per-layer precision overrides"),
                                     cl::sub(compileCommand));
cl::opt<std::string> fuse("fuse",
                          cl::desc("auto: fuse batch norm, residual add and relu, forward and backward, where the "
                                   "pattern holds (castor-fuse-batch-norm-relu), an exported linear layer (MatMul by a "
                                   "transposed weight, Add of the bias) into one gemm (castor-fuse-linear), the "
                                   "exported erf chain of GELU into one op (castor-fuse-gelu), attention "
                                   "(castor-fuse-attention) and the sum of an input's gradients into its "
                                   "convolution's data gradient (castor-fuse-gradient-add), and the step's casts placed "
                                   "together so that the GPU casts them in one launch (castor-schedule-casts); none: no fusion"),
                          cl::init("auto"), cl::sub(compileCommand));
cl::opt<std::string> batchNorm(
    "batch-norm",
    cl::desc("With --train: as-exported (training-form BatchNorm trains on batch statistics, inference-form "
             "BatchNorm from an eval-mode export with its statistics frozen), train (every BatchNorm on batch "
             "statistics, its running statistics updated) or frozen (every BatchNorm on its running statistics, "
             "frozen; scale and bias still train)"),
    cl::init("as-exported"), cl::sub(compileCommand));
cl::opt<std::string> recomputePolicy(
    "recompute",
    cl::desc("none; cheap: recompute every cheap value the backward reads (activations, casts, the residual add, "
             "batch-norm outputs) instead of keeping it; auto: the fewest of them that fit --memory-budget "
             "(castor-recompute)"),
    cl::init("none"), cl::sub(compileCommand));
cl::opt<std::string> memoryBudget("memory-budget",
                                  cl::desc("Planned device memory the step must fit with --recompute auto, e.g. 6GiB"),
                                  cl::sub(compileCommand));
cl::opt<std::string> workspaceLimit("workspace-limit",
                                    cl::desc("Device memory for library workspaces, part of the planned peak: a "
                                             "size such as 256MiB, or auto (1/32 of the arena between 128 MiB and "
                                             "1 GiB); the fused kernels' reserve is added to it"),
                                    cl::init("auto"), cl::sub(compileCommand));
cl::opt<std::string> reportDir("report",
                               cl::desc("Directory for the memory report: memory.json, memory.png/.svg (planned "
                                        "memory over the kernels by kind) and report.html (with the saved tensors)"),
                               cl::value_desc("DIR"), cl::sub(compileCommand));
cl::opt<std::string> lossScale("loss-scale",
                               cl::desc("dynamic, static:S, guard (no scaling; a step with non-finite gradients "
                                        "changes no parameter) or none (default: dynamic for fp16, guard "
                                        "otherwise)"),
                               cl::sub(compileCommand));
cl::opt<double> lossScaleInit("loss-scale-init", cl::desc("Initial loss scale"), cl::init(65536.0),
                              cl::sub(compileCommand));
cl::opt<double> lossScaleGrowth("loss-scale-growth", cl::desc("Growth factor of the scale"), cl::init(2.0),
                                cl::sub(compileCommand));
cl::opt<double> lossScaleBackoff("loss-scale-backoff", cl::desc("Backoff factor on overflow"), cl::init(0.5),
                                 cl::sub(compileCommand));
cl::opt<int64_t> lossScaleInterval("loss-scale-interval", cl::desc("Clean steps before the scale grows"),
                                   cl::init(2000), cl::sub(compileCommand));
cl::opt<double> clipGradNorm("clip-grad-norm", cl::desc("Clip the global norm of the unscaled gradients (0: off)"),
                             cl::init(0.0), cl::sub(compileCommand));
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
                          cl::init(25.0), cl::sub(compileCommand));
cl::opt<bool> gradStats("grad-stats", cl::desc("Output per-parameter gradient statistics (castor-run --grad-stats)"),
                        cl::sub(compileCommand));
cl::opt<int64_t> accumulate("accumulate",
                             cl::desc("Gradient accumulation: micro-batches of --batch per step (the step's batch is "
                                      "their total)"),
                             cl::init(1), cl::sub(compileCommand));
cl::opt<Emit> emit("emit", cl::desc("Also print an intermediate form to stdout"), cl::init(Emit::None),
                   cl::values(clEnumValN(Emit::Mlir, "mlir", "the plan-level castor dialect"),
                              clEnumValN(Emit::PlanText, "plan-text", "the plan as protobuf text")),
                   cl::sub(compileCommand));

// "model.plan" -> "model.weights.safetensors"
std::string weightsPathFor(const std::string &plan) {
  std::string stem = plan;
  auto slash = stem.rfind('/');
  auto dot = stem.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    stem.resize(dot);
  return stem + ".weights.safetensors";
}

void printReport(const plan::Plan &p, mlir::ModuleOp module, double seconds, const std::string &weightsFile) {
  std::map<std::string, int> kernels;
  for (const auto &k : p.kernels())
    ++kernels[k.op()];
  uint64_t paramBytes = 0, trainable = 0;
  for (const auto &param : p.parameters()) {
    paramBytes += p.tensors(int(param.tensor())).bytes();
    trainable += param.trainable();
  }
  uint64_t tensorBytes = 0;
  module.walk([&](mlir::func::FuncOp f) {
    if (auto a = f->getAttrOfType<mlir::IntegerAttr>("castor.tensor_bytes"))
      tensorBytes = uint64_t(a.getInt());
  });
  auto mib = [](uint64_t b) { return double(b) / (1024.0 * 1024.0); };
  llvm::errs() << llvm::formatv("compiled {0} -> {1} (target {2}, batch {3}) in {4:F2} s\n", modelFile(), planPath,
                                p.target(), p.batch(), seconds);
  llvm::errs() << llvm::formatv("  kernels: {0}\n", p.kernels_size());
  for (const auto &[op, n] : kernels)
    llvm::errs() << llvm::formatv("    {0,-24} {1}\n", op, n);
  llvm::errs() << llvm::formatv("  parameters: {0} ({1} trainable), {2:F1} MiB\n", p.parameters_size(), trainable,
                                mib(paramBytes));
  llvm::errs() << llvm::formatv("  tensors: {0}, {1:F1} MiB in all; arena {2:F1} MiB ({3:F1}% of all tensors)\n",
                                p.tensors_size(), mib(tensorBytes), mib(p.arena_bytes()),
                                tensorBytes ? 100.0 * double(p.arena_bytes()) / double(tensorBytes) : 0.0);
  if (p.predicted_peak_bytes() > 0)
    llvm::errs() << llvm::formatv("  planned device peak: {0:F1} MiB (arena, inputs and staging, workspace limit "
                                  "{1:F1} MiB with the fused kernels' reserve)\n",
                                  mib(p.predicted_peak_bytes()), mib(p.workspace_limit_bytes()));
  module.walk([&](mlir::func::FuncOp f) {
    auto values = f->getAttrOfType<mlir::IntegerAttr>("castor.recomputed_values");
    auto flops = f->getAttrOfType<mlir::IntegerAttr>("castor.recompute_flops");
    auto policy = f->getAttrOfType<mlir::StringAttr>("castor.recompute_policy");
    if (values && flops && policy)
      llvm::errs() << llvm::formatv("  recompute ({0}): {1} values, {2:F2} GFLOP a step\n", policy.getValue(),
                                    values.getInt(), double(flops.getInt()) / 1e9);
  });
  if (!weightsFile.empty())
    llvm::errs() << "  weights: " << weightsFile << "\n";
}

// What a training compile does with the model's BatchNorms, said once: an eval-mode export's
// inference-form BatchNorm trains differently from the training-mode one, and one whose
// BatchNorms were folded into its convolutions cannot be trained as the original at all.
void noteBatchNormForms(mlir::ModuleOp module, llvm::StringRef mode) {
  int64_t inference = 0, training = 0, folded = 0;
  module.walk([&](mlir::Operation *op) {
    inference += llvm::isa<castor::BatchNormInferenceOp>(op);
    training += llvm::isa<castor::BatchNormTrainingOp>(op);
    // torch.onnx.export names the constants it folds "onnx::<Op>_<n>": a convolution filter so
    // named is a convolution with a BatchNorm folded into it.
    if (auto conv = llvm::dyn_cast<castor::Conv2dOp>(op))
      if (auto filter = conv.getFilter().getDefiningOp<castor::ParameterOp>())
        folded += filter.getName().starts_with("onnx::");
  });
  if (inference > 0 && mode == "as-exported")
    llvm::errs() << llvm::formatv(
        "note: {0} BatchNormalization layer(s) are in inference form (an eval-mode export): they train with "
        "their running statistics frozen, as PyTorch's BatchNorm in eval mode; --batch-norm train trains them "
        "on batch statistics as in training mode\n",
        inference);
  if (inference == 0 && training == 0 && folded > 0)
    llvm::errs() << llvm::formatv(
        "note: the model has no BatchNormalization and {0} convolution(s) whose filters are constants the "
        "exporter folded ('onnx::...'): an eval-mode export folds BatchNorm into the convolutions, and the "
        "result cannot be trained as the original; export with torch.onnx.export(..., "
        "training=torch.onnx.TrainingMode.TRAINING)\n",
        folded);
}

} // namespace

int runCompile() {
  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  auto imported = importModel(context);
  if (!imported)
    return 1;
  mlir::ModuleOp module = *imported->module;

  if (train && eval) {
    llvm::errs() << "error: --train and --eval exclude each other\n";
    return 1;
  }
  mlir::PassManager pm(&context);
  if (precision != "fp32" && precision != "fp16" && precision != "bf16") {
    llvm::errs() << "error: --precision must be fp32, fp16 or bf16\n";
    return 1;
  }
  bool mixed = precision != "fp32";
  if (fuse != "auto" && fuse != "none") {
    llvm::errs() << "error: --fuse must be auto or none\n";
    return 1;
  }
  const uint64_t workspaceBytes = workspaceLimit == "auto" ? 0 : parseByteSize(workspaceLimit);
  if (!workspaceBytes && workspaceLimit != "auto") {
    llvm::errs() << "error: --workspace-limit must be auto or a size such as 512MiB, got '" << workspaceLimit << "'\n";
    return 1;
  }
  if (batchNorm != "as-exported" && batchNorm != "train" && batchNorm != "frozen") {
    llvm::errs() << "error: --batch-norm must be as-exported, train or frozen\n";
    return 1;
  }
  if (!train && batchNorm != "as-exported") {
    llvm::errs() << "error: --batch-norm " << batchNorm << " needs --train\n";
    return 1;
  }
  if (train)
    noteBatchNormForms(module, batchNorm);
  if (!train && dataParallel) {
    llvm::errs() << "error: --data-parallel needs --train (replicas share the gradients of a training step)\n";
    return 1;
  }
  if (!train && recomputePolicy != "none") {
    llvm::errs() << "error: --recompute needs --train (only a training step has a backward to recompute in)\n";
    return 1;
  }
  if (fuse == "auto") {
    pm.nest<mlir::func::FuncOp>().addPass(createCastorFuseLinear());
    pm.nest<mlir::func::FuncOp>().addPass(createCastorFuseGelu());
    if (mixed) // cuDNN's fused attention runs in f16 or bf16
      pm.nest<mlir::func::FuncOp>().addPass(createCastorFuseAttention());
  }
  if (train) {
    pm.addPass(createCastorBatchNormForm(CastorBatchNormFormOptions{batchNorm}));
    pm.addPass(createCastorAttachLoss(CastorAttachLossOptions{labelSmoothing}));
    if (mixed)
      pm.addPass(createCastorAutocast(CastorAutocastOptions{precision, precisionPolicy}));
    CastorMakeTrainStepOptions step;
    step.optimizer = optimizer;
    step.lr = lr;
    step.momentum = momentum;
    step.nesterov = nesterov;
    step.weightDecay = weightDecay;
    step.noDecayBnBias = noDecayBnBias;
    step.beta1 = beta1;
    step.beta2 = beta2;
    step.eps = adamEps;
    step.schedule = schedule;
    step.warmupSteps = warmupSteps;
    step.stepSize = stepSize;
    step.gamma = gamma;
    step.totalSteps = totalSteps;
    step.minLr = minLr;
    step.dropoutSeed = int64_t(modelSeed());
    step.emitGradients = emitGradients;
    step.zeroGradients = zeroGradients;
    step.microBatches = accumulate;
    pm.addPass(createCastorMakeTrainStep(step));
    if (dataParallel) {
      if (!(bucketMiB > 0)) {
        llvm::errs() << "error: --bucket-size must be positive\n";
        return 1;
      }
      pm.addPass(createCastorDataParallel(
          CastorDataParallelOptions{int64_t(bucketMiB * double(1 << 20)), bool(syncBatchNorm)}));
    } else if (syncBatchNorm) {
      llvm::errs() << "error: --sync-batch-norm needs --data-parallel\n";
      return 1;
    }
    CastorLossScaleOptions scaling;
    std::string modeText = lossScale.getNumOccurrences() ? std::string(lossScale)
                                                         : std::string(precision == "fp16" ? "dynamic" : "guard");
    scaling.mode = modeText;
    scaling.init = lossScaleInit;
    if (llvm::StringRef(modeText).starts_with("static:")) {
      scaling.mode = "static";
      if (llvm::StringRef(modeText).drop_front(7).getAsDouble(scaling.init)) {
        llvm::errs() << "error: --loss-scale static:S needs a number S\n";
        return 1;
      }
    }
    scaling.growth = lossScaleGrowth;
    scaling.backoff = lossScaleBackoff;
    scaling.interval = lossScaleInterval;
    scaling.clipGradNorm = clipGradNorm;
    pm.addPass(createCastorLossScale(scaling));
    if (gradStats)
      pm.addPass(createCastorGradientStats());
    if (fuse == "auto") {
      pm.nest<mlir::func::FuncOp>().addPass(createCastorFuseBatchNormRelu());
      pm.nest<mlir::func::FuncOp>().addPass(createCastorFuseGradientAdd());
    }
  } else {
    if (eval)
      pm.addPass(createCastorInferenceForm());
    if (mixed)
      pm.addPass(createCastorAutocast(CastorAutocastOptions{precision, precisionPolicy}));
  }
  auto &funcPm = pm.nest<mlir::func::FuncOp>();
  funcPm.addPass(createCastorCastCleanup());
  if (fuse == "auto")
    funcPm.addPass(createCastorScheduleCasts(CastorScheduleCastsOptions{recomputePolicy == "none"}));
  if (train)
    funcPm.addPass(createCastorRecompute(
        CastorRecomputeOptions{recomputePolicy, memoryBudget, int64_t(workspaceBytes), /*alignment=*/256}));
  funcPm.addPass(createCastorSelectKernels(CastorSelectKernelsOptions{target}));
  funcPm.addPass(createCastorPlanViews());
  funcPm.addPass(createCastorPlanMemory());
  if (mlir::failed(pm.run(module)))
    return 1;

  mlir::func::FuncOp forward = module.lookupSymbol<mlir::func::FuncOp>(train ? "train_step" : "forward");
  forward->setAttr("castor.workspace_limit",
                   mlir::Builder(&context).getI64IntegerAttr(int64_t(workspaceBytes)));
  if (!reportDir.empty()) {
    if (!train) {
      llvm::errs() << "error: --report needs --train\n";
      return 1;
    }
    if (std::string error = writeMemoryReport(forward, reportDir, "castor"); !error.empty())
      llvm::errs() << "warning: memory report: " << error << "\n";
    else
      llvm::errs() << "memory report: " << reportDir << "/report.html\n";
  }
  auto batchAttr = module->getAttrOfType<mlir::IntegerAttr>("castor.batch");
  int64_t planBatch = (batchAttr ? batchAttr.getInt() : 1) * (train ? int64_t(accumulate) : 1);
  auto emitted = emitPlan(forward, planBatch, target);
  if (mlir::failed(emitted))
    return 1;
  // The compiler's own output must pass the runtime's validator (arena bounds, overlaps).
  if (Status s = plan::validatePlan(emitted->plan); !s) {
    llvm::errs() << "error: internal: the compiled plan is invalid: " << s.message() << "\n";
    return 1;
  }

  weights::TensorFile weightFile;
  for (auto &w : imported->weights) {
    auto dtype = planDtypeOf(w.elementType);
    if (mlir::failed(dtype)) {
      llvm::errs() << "error: weight '" << w.name << "' has an unsupported element type\n";
      return 1;
    }
    weights::NamedTensor t;
    t.name = w.name;
    t.dtype = *dtype;
    t.shape = w.shape;
    t.data.assign(w.bytes.begin(), w.bytes.end());
    weightFile.tensors.push_back(std::move(t));
  }
  for (auto &c : emitted->constants)
    weightFile.tensors.push_back(std::move(c));
  std::string weightsFile;
  if (!weightFile.tensors.empty()) {
    weightsFile = weightsPathFor(planPath);
    weightFile.metadata["producer"] = "castor 0.1.0";
    weightFile.metadata["model"] = modelFile();
    if (Status s = weights::writeSafetensors(weightFile, weightsFile); !s) {
      llvm::errs() << "error: " << s.message() << "\n";
      return 1;
    }
    // The plan names its weights file, so that castor-run finds it (and no other by mistake).
    auto digest = plan::fileSha256(weightsFile);
    if (!digest) {
      llvm::errs() << "error: " << digest.message() << "\n";
      return 1;
    }
    plan::WeightsFile &paired = *emitted->plan.mutable_weights_file();
    paired.set_name(weightsFile.substr(weightsFile.rfind('/') + 1));
    paired.set_sha256(*digest);
  }
  if (Status s = plan::writePlanFile(emitted->plan, planPath); !s) {
    llvm::errs() << "error: " << s.message() << "\n";
    return 1;
  }

  if (emit == Emit::Mlir) {
    module.print(llvm::outs());
    llvm::outs() << "\n";
  } else if (emit == Emit::PlanText) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(emitted->plan, &text);
    llvm::outs() << text;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printReport(emitted->plan, module, seconds, weightsFile);
  return 0;
}

} // namespace castor::cli
