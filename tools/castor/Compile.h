// castor compile's parts: its flags as CompileOptions (CompileFlags.cpp) and what it prints
// (CompileReport.cpp); the command itself is CompileCommand.cpp.
#pragma once

#include "castor/Pipeline/CompileOptions.h"
#include "plan/plan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace castor::cli {

// The flags of castor compile that shape the compiled step, unchecked (see validate()).
CompileOptions compileOptionsFromFlags();

// Notes on how a training compile treats the model's BatchNorms (`mode`: --batch-norm).
void noteBatchNormForms(mlir::ModuleOp module, llvm::StringRef mode);

// The compiled plan's summary, on stderr.
void printCompileReport(const plan::Plan &p, mlir::ModuleOp module, const std::string &planPath, double seconds,
                        const std::string &weightsFile);

} // namespace castor::cli
