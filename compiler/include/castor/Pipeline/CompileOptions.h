// What the compile pipeline is asked to do: every option of `castor compile` that shapes the
// compiled step, with its default, and the one check of them all (validate). castor compile
// fills it from its flags, castor-opt's registered pipelines from their options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace castor {

struct CompileOptions {
  // What is compiled: the forward (neither), its inference form for evaluation, or the
  // training step.
  bool train = false;
  bool eval = false;
  std::string target = "cpu"; // cpu or cuda

  std::string precision = "fp32"; // fp32, fp16 or bf16 (mixed precision: castor-autocast)
  std::string precisionPolicy;    // JSON file of per-op and per-layer precision overrides
  std::string fuse = "auto";      // auto (every fusion where its pattern holds) or none
  // Library workspace in the planned peak: auto, or a size such as 256MiB.
  std::string workspaceLimit = "auto";

  // The training step (train).
  std::string batchNorm = "as-exported"; // as-exported, train or frozen
  double labelSmoothing = 0.0;
  std::string optimizer = "sgd"; // sgd, adamw or none (gradients only)
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weightDecay = 0.0;
  bool noDecayBnBias = false;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  std::string schedule = "constant"; // constant, step or cosine
  int64_t warmupSteps = 0;
  int64_t stepSize = 1;
  double gamma = 0.1;
  int64_t totalSteps = 1;
  double minLr = 0.0;
  int64_t dropoutSeed = 0;
  bool emitGradients = false;
  std::string zeroGradients; // comma-separated globs of parameters
  int64_t accumulate = 1;    // micro-batches per step

  // dynamic, static (at lossScaleInit), static:S, guard or none; empty: dynamic for fp16,
  // guard otherwise.
  std::string lossScale;
  double lossScaleInit = 65536.0;
  double lossScaleGrowth = 2.0;
  double lossScaleBackoff = 0.5;
  int64_t lossScaleInterval = 2000;
  double clipGradNorm = 0.0; // 0: off

  bool dataParallel = false;
  bool syncBatchNorm = false;
  double bucketSizeMiB = 25.0;
  bool gradStats = false;
  std::string recompute = "none"; // none, cheap or auto
  std::string memoryBudget;       // what --recompute auto must fit, e.g. 6GiB

  // Empty when the options are valid together; else the first problem, naming the flags of
  // castor compile (which the pipelines' options share).
  std::string validate() const;

  // Derived from valid options.
  bool mixedPrecision() const { return precision != "fp32"; }
  bool fuses() const { return fuse == "auto"; }
  uint64_t workspaceBytes() const; // 0: auto
  struct LossScaling {
    std::string mode; // dynamic, static, guard or none
    double init;
  };
  // nullopt when lossScale is static:S without a number S.
  std::optional<LossScaling> lossScaling() const;
};

} // namespace castor
