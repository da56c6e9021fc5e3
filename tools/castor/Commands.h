// Subcommands of the `castor` compiler driver.
#pragma once

#include "llvm/Support/CommandLine.h"

namespace castor::cli {

extern llvm::cl::SubCommand importCommand;
int runImport();

} // namespace castor::cli
