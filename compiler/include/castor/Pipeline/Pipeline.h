// The compile pipeline as a library: from the castor dialect's @forward (what castor import
// gives) to a function in plan-level form (kernels chosen, views, memory planned), which the
// plan emitter serializes. The order of the passes and what each is asked live here;
// importing, writing the plan and weights, and reports are the tool's (tools/castor).
#pragma once

#include "castor/Pipeline/CompileOptions.h"

#include "mlir/Pass/PassManager.h"

namespace castor {

// Each builder expects options whose validate() is empty, and a pass manager on the module.
// @forward -> @train_step (options.train): loss, backward, optimizer, loss scaling.
void buildTrainingPipeline(mlir::OpPassManager &pm, const CompileOptions &options);
// @forward stays @forward (in inference form with options.eval).
void buildInferencePipeline(mlir::OpPassManager &pm, const CompileOptions &options);
// The one of the two that options.train asks for.
void buildCompilePipeline(mlir::OpPassManager &pm, const CompileOptions &options);

// The function a pipeline leaves in plan-level form: "train_step" or "forward".
llvm::StringRef compiledFunctionName(const CompileOptions &options);

// castor-train-pipeline and castor-inference-pipeline, for castor-opt.
void registerCastorPipelines();

} // namespace castor
