// castor compile MODEL.onnx -o MODEL.plan: import, run the compile pipeline (castor/Pipeline),
// validate and write the plan (and the weights the plan needs beside it).
#include "Commands.h"
#include "Compile.h"
#include "FusionReport.h"
#include "MemoryReport.h"

#include "castor/Dialect/AttributeNames.h"
#include "castor/Pipeline/Pipeline.h"
#include "castor/Plan/PlanEmitter.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/text_format.h>

#include <chrono>

namespace cl = llvm::cl;

namespace castor::cli {

namespace {

enum class Emit { None, Mlir, PlanText };

cl::opt<std::string> planPath("o", cl::desc("Plan file to write"), cl::value_desc("MODEL.plan"), cl::Required,
                              cl::sub(compileCommand));
cl::opt<std::string> reportDir("report",
                               cl::desc("Directory for the memory report: memory.json, memory.png/.svg (planned "
                                        "memory over the kernels by kind) and report.html (with the saved tensors); "
                                        "and fusion.json (every fused element-wise group: its ops, the bytes it "
                                        "moves and what its ops would move unfused)"),
                               cl::value_desc("DIR"), cl::sub(compileCommand));
cl::opt<bool> reportPicture("report-picture",
                            cl::desc("With --report, draw memory.png/.svg and report.html (python3 with matplotlib, "
                                     "about a second); =false writes the JSON files only"),
                            cl::init(true), cl::sub(compileCommand));
cl::opt<Emit> emit("emit", cl::desc("Also print an intermediate form to stdout"), cl::init(Emit::None),
                   cl::values(clEnumValN(Emit::Mlir, "mlir", "the plan-level castor dialect"),
                              clEnumValN(Emit::PlanText, "plan-text", "the plan as protobuf text")),
                   cl::sub(compileCommand));

// "model.plan" -> "model.weights.safetensors"
std::string weightsPathFor(const std::string &plan) {
  std::string stem = plan;
  auto slash = stem.rfind('/');
  auto dot = stem.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    stem.resize(dot);
  return stem + ".weights.safetensors";
}

// The imported weights and the plan's constants as one safetensors file beside the plan, which
// the plan then names (so that castor-run finds it, and no other by mistake). Returns the
// file's path, "" when there is nothing to write, nullopt after printing an error.
std::optional<std::string> writeWeights(std::vector<onnx_import::WeightData> &imported, EmittedPlan &emitted) {
  weights::TensorFile weightFile;
  for (auto &w : imported) {
    auto dtype = planDtypeOf(w.elementType);
    if (mlir::failed(dtype)) {
      llvm::errs() << "error: weight '" << w.name << "' has an unsupported element type\n";
      return std::nullopt;
    }
    weights::NamedTensor t;
    t.name = w.name;
    t.dtype = *dtype;
    t.shape = w.shape;
    t.data.assign(w.bytes.begin(), w.bytes.end());
    weightFile.tensors.push_back(std::move(t));
  }
  for (auto &c : emitted.constants)
    weightFile.tensors.push_back(std::move(c));
  if (weightFile.tensors.empty())
    return std::string();
  const std::string path = weightsPathFor(planPath);
  weightFile.metadata["producer"] = "castor 0.1.0";
  weightFile.metadata["model"] = modelFile();
  if (Status s = weights::writeSafetensors(weightFile, path); !s) {
    llvm::errs() << "error: " << s.message() << "\n";
    return std::nullopt;
  }
  auto digest = plan::fileSha256(path);
  if (!digest) {
    llvm::errs() << "error: " << digest.message() << "\n";
    return std::nullopt;
  }
  plan::WeightsFile &paired = *emitted.plan.mutable_weights_file();
  paired.set_name(path.substr(path.rfind('/') + 1));
  paired.set_sha256(*digest);
  return path;
}

} // namespace

int runCompile() {
  auto start = std::chrono::steady_clock::now();
  const CompileOptions options = compileOptionsFromFlags();
  if (std::string error = options.validate(); !error.empty()) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  if (!reportDir.empty() && !options.train) {
    llvm::errs() << "error: --report needs --train\n";
    return 1;
  }
  mlir::MLIRContext context;
  auto imported = importModel(context);
  if (!imported)
    return 1;
  mlir::ModuleOp module = *imported->module;
  if (options.train)
    noteBatchNormForms(module, options.batchNorm);

  mlir::PassManager pm(&context);
  buildCompilePipeline(pm, options);
  if (mlir::failed(pm.run(module)))
    return 1;

  auto compiled = module.lookupSymbol<mlir::func::FuncOp>(compiledFunctionName(options));
  if (!reportDir.empty()) {
    if (std::string error = writeMemoryReport(compiled, reportDir, "castor", reportPicture); !error.empty())
      llvm::errs() << "warning: memory report: " << error << "\n";
    else
      llvm::errs() << "memory report: " << reportDir << (reportPicture ? "/report.html\n" : "/memory.json\n");
  }
  auto batchAttr = module->getAttrOfType<mlir::IntegerAttr>(castor::attr::kBatch);
  int64_t planBatch = (batchAttr ? batchAttr.getInt() : 1) * (options.train ? options.accumulate : 1);
  auto emitted = emitPlan(compiled, planBatch, options.target);
  if (mlir::failed(emitted))
    return 1;
  // The compiler's own output must pass the runtime's validator (arena bounds, overlaps).
  if (Status s = plan::validatePlan(emitted->plan); !s) {
    llvm::errs() << "error: internal: the compiled plan is invalid: " << s.message() << "\n";
    return 1;
  }
  auto weightsFile = writeWeights(imported->weights, *emitted);
  if (!weightsFile)
    return 1;
  if (Status s = plan::writePlanFile(emitted->plan, planPath); !s) {
    llvm::errs() << "error: " << s.message() << "\n";
    return 1;
  }

  if (emit == Emit::Mlir) {
    module.print(llvm::outs());
    llvm::outs() << "\n";
  } else if (emit == Emit::PlanText) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(emitted->plan, &text);
    llvm::outs() << text;
  }
  if (!reportDir.empty())
    if (std::string error = writeFusionReport(fusedGroups(emitted->plan), reportDir); !error.empty())
      llvm::errs() << "warning: fusion report: " << error << "\n";
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printCompileReport(emitted->plan, module, planPath, seconds, *weightsFile);
  return 0;
}

} // namespace castor::cli
