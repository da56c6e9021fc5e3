// castor compile's flags that shape the compiled step, parsed into CompileOptions: the
// defaults are CompileOptions's, the checks CompileOptions::validate's.
#include "Commands.h"
#include "Compile.h"

namespace cl = llvm::cl;

namespace castor::cli {

namespace {

const CompileOptions defaults;

// castor compile's flags from CompileOptions.def: every option but those a pipeline decides.
#define CASTOR_FLAG(T, MEMBER, FLAG, INIT, DESC)                                                                 \
  cl::opt<T> MEMBER(FLAG, cl::desc(DESC), cl::init(defaults.MEMBER), cl::sub(compileCommand));
#define CASTOR_SHARED_OPTION CASTOR_FLAG
#define CASTOR_INFERENCE_OPTION CASTOR_FLAG
#define CASTOR_TRAIN_OPTION CASTOR_FLAG
#define CASTOR_TOOL_OPTION CASTOR_FLAG
#include "castor/Pipeline/CompileOptions.def"
#undef CASTOR_FLAG

} // namespace

CompileOptions compileOptionsFromFlags() {
  CompileOptions options;
#define CASTOR_FILL(T, MEMBER, FLAG, INIT, DESC) options.MEMBER = MEMBER;
#define CASTOR_SHARED_OPTION CASTOR_FILL
#define CASTOR_INFERENCE_OPTION CASTOR_FILL
#define CASTOR_TRAIN_OPTION CASTOR_FILL
#define CASTOR_TOOL_OPTION CASTOR_FILL
#include "castor/Pipeline/CompileOptions.def"
#undef CASTOR_FILL
  options.dropoutSeed = int64_t(modelSeed()); // the model's --seed
  return options;
}

} // namespace castor::cli
