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

// One pipeline option of CompileOptions.def, named and documented as castor compile's flag.
#define CASTOR_PIPELINE_OPTION(T, MEMBER, FLAG, INIT, DESC)                                                    \
  Option<T> MEMBER{*this, FLAG, llvm::cl::desc(DESC), llvm::cl::init(defaults().MEMBER)};
#define CASTOR_FILL_OPTION(T, MEMBER, FLAG, INIT, DESC) options.MEMBER = MEMBER;

// The options both pipelines take.
template <typename Derived>
struct SharedOptions : mlir::PassPipelineOptions<Derived> {
  template <typename T>
  using Option = typename mlir::PassPipelineOptions<Derived>::template Option<T>;

#define CASTOR_SHARED_OPTION CASTOR_PIPELINE_OPTION
#include "castor/Pipeline/CompileOptions.def"

  void fill(CompileOptions &options) const {
#define CASTOR_SHARED_OPTION CASTOR_FILL_OPTION
#include "castor/Pipeline/CompileOptions.def"
  }
};

struct InferencePipelineOptions : SharedOptions<InferencePipelineOptions> {
#define CASTOR_INFERENCE_OPTION CASTOR_PIPELINE_OPTION
#include "castor/Pipeline/CompileOptions.def"

  CompileOptions compileOptions() const {
    CompileOptions options;
    fill(options);
#define CASTOR_INFERENCE_OPTION CASTOR_FILL_OPTION
#include "castor/Pipeline/CompileOptions.def"
    return options;
  }
};

struct TrainPipelineOptions : SharedOptions<TrainPipelineOptions> {
#define CASTOR_TRAIN_OPTION CASTOR_PIPELINE_OPTION
#define CASTOR_PIPELINE_TRAIN_OPTION CASTOR_PIPELINE_OPTION
#include "castor/Pipeline/CompileOptions.def"

  CompileOptions compileOptions() const {
    CompileOptions options;
    fill(options);
    options.train = true;
#define CASTOR_TRAIN_OPTION CASTOR_FILL_OPTION
#define CASTOR_PIPELINE_TRAIN_OPTION CASTOR_FILL_OPTION
#include "castor/Pipeline/CompileOptions.def"
    return options;
  }
};

#undef CASTOR_PIPELINE_OPTION
#undef CASTOR_FILL_OPTION

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
