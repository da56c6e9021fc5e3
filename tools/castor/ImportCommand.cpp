// castor import MODEL.onnx: prints the castor dialect of an ONNX model.
#include "Commands.h"

#include "castor/Frontends/Onnx/Importer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace castor::cli {

static cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"), cl::value_desc("FILE"),
                                       cl::init("-"), cl::sub(importCommand));

int runImport() {
  mlir::MLIRContext context;
  auto result = importModel(context);
  if (!result)
    return 1;
  // Opened only after a successful import, so a failure leaves no partial file.
  std::string error;
  auto out = mlir::openOutputFile(outputPath, &error);
  if (!out) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  result->module->print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}

} // namespace castor::cli
