// CompileOptions::validate: the rules of the compile options, checked before any pass runs. A
// rule that a pass also applies when it runs alone (castor-opt) is the pass's own function or
// list of values, called here, so that both say the same; a bound on one number that only its
// pass reads (label smoothing, micro-batches) is left to that pass.
#include "castor/Pipeline/CompileOptions.h"

#include "castor/Passes/Passes.h"
#include "castor/Support/OptionChoices.h"

#include "llvm/ADT/StringRef.h"

namespace castor {

uint64_t CompileOptions::workspaceBytes() const {
  return workspaceLimit == "auto" ? 0 : parseByteSize(workspaceLimit);
}

std::optional<CompileOptions::LossScaling> CompileOptions::lossScaling() const {
  llvm::StringRef mode = lossScale;
  if (mode.empty())
    mode = precision == "fp16" ? "dynamic" : "guard";
  LossScaling scaling{mode.str(), lossScaleInit};
  if (mode.consume_front("static:")) {
    scaling.mode = "static";
    if (mode.getAsDouble(scaling.init))
      return std::nullopt;
  }
  return scaling;
}

std::string CompileOptions::validate() const {
  using choices::checkChoice;
  if (train && eval)
    return "--train and --eval exclude each other";
  if (std::string error = checkChoice("--precision", precision, choices::kPrecisions); !error.empty())
    return error;
  if (std::string error = checkChoice("--fuse", fuse, choices::kFuseModes); !error.empty())
    return error;
  if (std::string error = checkChoice("--target", target, choices::kTargets); !error.empty())
    return error;
  if (workspaceLimit != "auto" && !workspaceBytes())
    return "--workspace-limit must be auto or a size such as 512MiB, got '" + workspaceLimit + "'";
  if (std::string error = checkChoice("--batch-norm", batchNorm, choices::kBatchNormForms); !error.empty())
    return error;
  if (!train && batchNorm != "as-exported")
    return "--batch-norm " + batchNorm + " needs --train";
  if (!train && dataParallel)
    return "--data-parallel needs --train (replicas share the gradients of a training step)";
  if (!train && recompute != "none")
    return "--recompute needs --train (only a training step has a backward to recompute in)";
  if (syncBatchNorm && !dataParallel)
    return "--sync-batch-norm needs --data-parallel";
  if (!train)
    return {}; // the options of the training step are not read
  if (dataParallel && !(bucketSizeMiB > 0))
    return "--bucket-size must be positive";
  auto scaling = lossScaling();
  if (!scaling)
    return "--loss-scale static:S needs a number S";
  if (std::string error = checkLossScaleOptions(scaling->mode, scaling->init); !error.empty())
    return error;
  if (std::string error = checkChoice("--optimizer", optimizer, choices::kOptimizers); !error.empty())
    return error;
  if (std::string error = checkChoice("--schedule", schedule, choices::kSchedules); !error.empty())
    return error;
  return checkRecomputeOptions(recompute, memoryBudget);
}

} // namespace castor
