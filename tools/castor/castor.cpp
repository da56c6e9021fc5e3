// castor: the compiler driver (import, compile).
#include "Commands.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv, "Castor: compiles ONNX models into training steps\n");
  if (castor::cli::importCommand)
    return castor::cli::runImport();
  if (castor::cli::compileCommand)
    return castor::cli::runCompile();
  llvm::errs() << "castor: name a command (castor --help lists them)\n";
  return 2;
}
