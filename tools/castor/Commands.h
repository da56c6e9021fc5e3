// Subcommands of the `castor` compiler driver.
#pragma once

#include "llvm/Support/CommandLine.h"

namespace castor::cli {

extern llvm::cl::SubCommand importCommand;
int runImport();

extern llvm::cl::SubCommand compileCommand;
int runCompile();

} // namespace castor::cli
