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

cl::SubCommand importCommand("import", "Import an ONNX model and print it in the castor dialect");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"), cl::Required, cl::sub(importCommand));
static cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"), cl::value_desc("FILE"),
                                       cl::init("-"), cl::sub(importCommand));
static cl::opt<int64_t> batch("batch", cl::desc("Batch size: fixes the first dimension of every input (default: a symbolic one becomes 1)"), cl::init(1),
                              cl::sub(importCommand));
static cl::opt<onnx_import::WeightInit> init(
    "init", cl::desc("Where initial weights come from"), cl::init(onnx_import::WeightInit::File),
    cl::values(clEnumValN(onnx_import::WeightInit::File, "onnx", "the model file's initializers"),
               clEnumValN(onnx_import::WeightInit::Kaiming, "kaiming",
                          "a seeded initialisation as torchvision's (the file's weight data is not needed)")),
    cl::sub(importCommand));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed of --init kaiming"), cl::init(0), cl::sub(importCommand));

int runImport() {
  mlir::MLIRContext context;
  onnx_import::ImportOptions options;
  if (batch.getNumOccurrences())
    options.batch = batch;
  options.init = init;
  options.seed = seed;
  auto result = onnx_import::importOnnxFile(context, modelPath, options);
  if (!result.errors.empty()) {
    for (const auto &e : result.errors)
      llvm::errs() << "error: " << e << "\n";
    return 1;
  }
  // Opened only after a successful import, so a failure leaves no partial file.
  std::string error;
  auto out = mlir::openOutputFile(outputPath, &error);
  if (!out) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  result.module->print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}

} // namespace castor::cli
