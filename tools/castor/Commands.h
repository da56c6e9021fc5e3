// Subcommands of the `castor` compiler driver.
#pragma once

#include "castor/Frontends/Onnx/Importer.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"

#include <optional>
#include <string>

namespace castor::cli {

extern llvm::cl::SubCommand importCommand;
extern llvm::cl::SubCommand compileCommand;
int runImport();
int runCompile();
// castor train MODEL.onnx [compile flags] [castor-run train flags] (TrainCommand.cpp).
int runTrain(int argc, char **argv);

// The model named on the command line, imported with the shared options (--batch, --init,
// --seed); nullopt after printing the import's errors.
std::optional<onnx_import::ImportResult> importModel(mlir::MLIRContext &context);
const std::string &modelFile();
uint64_t modelSeed();

} // namespace castor::cli
