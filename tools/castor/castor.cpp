// castor: the compiler driver (import, compile, and train: compile into the plan cache, then
// castor-run train).
#include "Commands.h"

#include <cstring>

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // castor train routes its flags itself (compile flags by name, the rest to castor-run train).
  if (argc > 1 && std::strcmp(argv[1], "train") == 0)
    return castor::cli::runTrain(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv, "Castor: compiles ONNX models into training steps\n");
  if (castor::cli::importCommand)
    return castor::cli::runImport();
  if (castor::cli::compileCommand)
    return castor::cli::runCompile();
  llvm::errs() << "castor: name a command (castor --help lists them)\n";
  return 2;
}
