// The names by which the compiler and the runtime agree on a plan's training state and
// bindings: the compiler's passes give them, the trainer, castor-run and checkpoints read them.
// One spelling for both sides; plain C++, since the runtime never includes MLIR.
#pragma once

namespace castor::names {

// Training state (plan parameters of kind STATE) besides the model's own parameters.
inline constexpr char kIteration[] = "castor.iteration";          // steps run, skipped ones too
inline constexpr char kOptimizerStep[] = "castor.optimizer_step"; // updates applied
inline constexpr char kSkippedSteps[] = "castor.skipped_steps";   // updates skipped (non-finite)
inline constexpr char kLossScale[] = "castor.loss_scale";         // dynamic loss scaling
inline constexpr char kLossScaleGrowthTracker[] = "castor.loss_scale_growth_tracker";

// A parameter's optimizer state is its name with one of these after it.
inline constexpr char kMomentumBufferSuffix[] = ".momentum_buffer"; // SGD
inline constexpr char kExpAvgSuffix[] = ".exp_avg";                 // AdamW
inline constexpr char kExpAvgSqSuffix[] = ".exp_avg_sq";            // AdamW

// Bindings of a training step (castor-run train, bench).
inline constexpr char kImages[] = "images";
inline constexpr char kLabels[] = "labels";
inline constexpr char kLoss[] = "loss";
inline constexpr char kCorrect[] = "correct"; // samples classified right, an i64 []
inline constexpr char kLogits[] = "logits";   // the forward's output beside its loss
inline constexpr char kLr[] = "lr";           // the step's learning rate
// What the loss scaler reports, each a scalar output.
inline constexpr char kLossScaleOutput[] = "loss_scale";
inline constexpr char kStepsSinceOverflow[] = "steps_since_overflow";
inline constexpr char kSkippedStepsOutput[] = "skipped_steps";
// Per-parameter outputs: the prefix, then the parameter's name.
inline constexpr char kGradPrefix[] = "grad:";            // its gradient (--emit-gradients)
inline constexpr char kGradStatsPrefix[] = "grad_stats:"; // mean |g|, max |g|, non-finite count

// The output of an inference-form forward (castor-run eval).
inline constexpr char kOutput[] = "output";

} // namespace castor::names
