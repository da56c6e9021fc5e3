// The subcommands and the model options they share (castor import and castor compile).
#include "Commands.h"

#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace castor::cli {

// Defined here, before the options that refer to them, so static initialisation order holds.
cl::SubCommand importCommand("import", "Import an ONNX model and print it in the castor dialect");
cl::SubCommand compileCommand("compile", "Compile an ONNX model into a plan for castor-run");

namespace {

cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"), cl::Required, cl::sub(importCommand),
                               cl::sub(compileCommand));
cl::opt<int64_t> batch("batch",
                       cl::desc("Batch size: fixes the first dimension of every input (default: a symbolic one "
                                "becomes 1)"),
                       cl::init(1), cl::sub(importCommand), cl::sub(compileCommand));
cl::opt<onnx_import::WeightInit> init(
    "init", cl::desc("Where initial weights come from"), cl::init(onnx_import::WeightInit::File),
    cl::values(clEnumValN(onnx_import::WeightInit::File, "onnx", "the model file's initializers"),
               clEnumValN(onnx_import::WeightInit::Kaiming, "kaiming",
                          "a seeded initialisation as torchvision's (the file's weight data is not needed)")),
    cl::sub(importCommand), cl::sub(compileCommand));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of --init kaiming (and of dropout masks when training)"), cl::init(0),
                       cl::sub(importCommand), cl::sub(compileCommand));

} // namespace

const std::string &modelFile() { return modelPath; }
uint64_t modelSeed() { return seed; }

std::optional<onnx_import::ImportResult> importModel(mlir::MLIRContext &context) {
  onnx_import::ImportOptions options;
  if (batch.getNumOccurrences())
    options.batch = batch;
  options.init = init;
  options.seed = seed;
  auto result = onnx_import::importOnnxFile(context, modelPath, options);
  for (const auto &note : result.notes)
    llvm::errs() << "note: " << note << "\n";
  if (result.errors.empty())
    return result;
  for (const auto &e : result.errors)
    llvm::errs() << "error: " << e << "\n";
  return std::nullopt;
}

} // namespace castor::cli
