// Drives an import: validate the model, reject unsupported ops all at once, then convert the
// nodes in topological order into one func.func @forward.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Frontends/Onnx/Importer.h"
#include "NodeImporter.h"
#include "ShapeFolding.h"
#include "TensorData.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"

#include <set>

using namespace mlir;

namespace castor::onnx_import {
namespace {

std::string dirName(const std::string &path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Every op type must have a converter; all unsupported ones are reported together.
bool checkSupportedOps(const OnnxModel &model, const DropPaths &dropPaths, ErrorList &errors) {
  bool ok = true;
  for (const auto *node : model.order) {
    if (dropPaths.absorbed.count(node))
      continue;
    bool defaultDomain = node->domain().empty() || node->domain() == "ai.onnx";
    if (!defaultDomain) {
      errors.node(*node, "op of domain '" + node->domain() + "' is not supported");
      ok = false;
    } else if (!findConverter(node->op_type()) && !hasFolder(node->op_type())) {
      errors.node(*node, "op type '" + node->op_type() + "' is not supported");
      ok = false;
    }
  }
  return ok;
}

// The graph input's tensor type; the batch (first) dimension may be symbolic, every other
// dimension must be static.
FailureOr<RankedTensorType> inputType(ImportState &state, const onnx::ValueInfoProto &input) {
  const auto &type = input.type();
  if (!type.has_tensor_type()) {
    state.errors.model("graph input '" + input.name() + "' is not a tensor");
    return failure();
  }
  Type element = elementTypeOf(state.context, type.tensor_type().elem_type());
  if (!element) {
    state.errors.model("graph input '" + input.name() + "' has unsupported " +
                       onnxTypeName(type.tensor_type().elem_type()));
    return failure();
  }
  if (!type.tensor_type().has_shape()) {
    state.errors.model("graph input '" + input.name() + "' has no shape");
    return failure();
  }
  SmallVector<int64_t> dims;
  const auto &shape = type.tensor_type().shape();
  for (int i = 0; i < shape.dim_size(); ++i) {
    const auto &d = shape.dim(i);
    bool isStatic = d.has_dim_value() && d.dim_value() > 0 && d.dim_value() < (int64_t(1) << 31);
    if (i == 0 && (state.options.batch || !isStatic)) {
      if (isStatic)
        state.declaredBatch = d.dim_value();
      dims.push_back(state.options.batch.value_or(1));
    } else if (isStatic) {
      dims.push_back(d.dim_value());
    } else {
      state.errors.model("graph input '" + input.name() + "' dimension " + std::to_string(i) +
                         " is not static; only the batch dimension may be");
      return failure();
    }
  }
  return RankedTensorType::get(dims, element);
}

class GraphImporter {
public:
  GraphImporter(ImportState &state) : state_(state) {}

  LogicalResult run(ModuleOp module) {
    auto &b = state_.builder;
    b.setInsertionPointToEnd(module.getBody());

    SmallVector<Type> argTypes;
    for (const auto *in : state_.model.inputs) {
      auto t = inputType(state_, *in);
      if (failed(t))
        return failure();
      argTypes.push_back(*t);
    }
    auto loc = FileLineColLoc::get(&state_.context, state_.fileName, 0, 0);
    auto func = b.create<func::FuncOp>(loc, "forward", b.getFunctionType(argTypes, {}));
    Block *entry = func.addEntryBlock();
    for (auto [i, in] : llvm::enumerate(state_.model.inputs)) {
      state_.values[in->name()] = entry->getArgument(i);
      func.setArgAttr(i, castor::attr::kName, b.getStringAttr(in->name()));
    }
    b.setInsertionPointToEnd(entry);

    for (const auto *node : state_.model.order) {
      if (state_.dropPaths.absorbed.count(node))
        continue;
      if (auto path = state_.dropPaths.replaced.find(node); path != state_.dropPaths.replaced.end()) {
        NodeImporter n(state_, *node);
        if (failed(convertDropPath(n, path->second)))
          return failure();
        continue;
      }
      FoldResult folded = foldNode(state_, *node);
      if (folded == FoldResult::Failed)
        return failure();
      if (folded == FoldResult::Folded)
        continue;
      ConvertFn convert = findConverter(node->op_type());
      if (!convert) {
        std::string input = firstUnknownInput(state_, *node);
        state_.errors.node(*node, isFoldOnly(node->op_type())
                                      ? "computes on values known at import only (Castor folds shape arithmetic "
                                        "on static shapes), but its input '" + input + "' depends on the data"
                                      : "op type '" + node->op_type() + "' is supported on values known at import "
                                        "only, and its input '" + input + "' depends on the data");
        return failure();
      }
      NodeImporter n(state_, *node);
      if (failed(convert(n)))
        return failure();
    }

    SmallVector<Value> results;
    SmallVector<Type> resultTypes;
    for (const auto &out : state_.model.graph().output()) {
      auto it = state_.values.find(out.name());
      if (it == state_.values.end()) {
        // An output read straight from an initializer or constant.
        state_.errors.model("graph output '" + out.name() + "' is not computed by the graph");
        return failure();
      }
      results.push_back(it->second);
      resultTypes.push_back(it->second.getType());
    }
    b.create<func::ReturnOp>(loc, results);
    func.setFunctionType(b.getFunctionType(argTypes, resultTypes));
    for (auto [i, out] : llvm::enumerate(state_.model.graph().output()))
      func.setResultAttr(i, castor::attr::kName, b.getStringAttr(out.name()));
    return success();
  }

private:
  ImportState &state_;
};

} // namespace

// Initializers that a BatchNormalization reads as its running mean or variance and that are read
// anywhere else too (another input of any node, or another statistic), directly or through
// Identity nodes: exporters merge equal initializers, and a fresh model's zero means and unit
// variances then become its biases and scales, which the optimizer would move.
static std::set<std::string> sharedStatistics(const OnnxModel &model) {
  std::map<std::string, std::string> identityOf; // Identity output -> the initializer it forwards
  for (const auto *node : model.order)
    if (node->op_type() == "Identity" && node->input_size() == 1 && model.initializers.count(node->input(0)))
      identityOf[node->output(0)] = node->input(0);
  auto resolve = [&](const std::string &name) {
    auto it = identityOf.find(name);
    return it == identityOf.end() ? name : it->second;
  };
  std::map<std::string, int> reads, statisticReads;
  for (const auto *node : model.order) {
    if (node->op_type() == "Identity" && identityOf.count(node->output(0)))
      continue;
    for (int i = 0; i < node->input_size(); ++i) {
      if (node->input(i).empty())
        continue;
      const std::string name = resolve(node->input(i));
      ++reads[name];
      if (node->op_type() == "BatchNormalization" && (i == 3 || i == 4))
        ++statisticReads[name];
    }
  }
  std::set<std::string> shared;
  for (const auto &[name, count] : statisticReads)
    if (reads[name] > 1 && model.initializers.count(name))
      shared.insert(name);
  return shared;
}

// The notes on shared statistics given their own copies: each one, or the count and the first.
static std::vector<std::string> statisticCopyNotes(const std::vector<std::pair<std::string, std::string>> &copies) {
  const std::string why = "read by other inputs too (an exporter merged equal initializers)";
  std::vector<std::string> notes;
  if (copies.size() > 3) {
    notes.push_back(std::to_string(copies.size()) + " BatchNorm running statistics were initializers " + why +
                    ": each got its own copy, named after its node (the first, " + copies[0].first + ", became '" +
                    copies[0].second + "')");
    return notes;
  }
  for (const auto &[what, name] : copies)
    notes.push_back(what + ", " + why + ": it gets its own copy, '" + name + "'");
  return notes;
}

ImportResult importOnnxBytes(MLIRContext &context, const std::string &bytes, const std::string &displayName,
                             const std::string &baseDir, const ImportOptions &options) {
  context.loadDialect<CastorDialect, func::FuncDialect>();
  ImportResult result;
  ErrorList errors(displayName);
  OnnxModel model;
  if (options.batch && (*options.batch < 1 || *options.batch > (int64_t(1) << 24))) {
    errors.model("batch must be between 1 and 2^24, got " + std::to_string(*options.batch));
    result.errors = errors.take();
    return result;
  }
  if (!parseAndValidate(bytes, model, errors)) {
    result.errors = errors.take();
    return result;
  }
  DropPaths dropPaths = findDropPaths(model, baseDir);
  if (!checkSupportedOps(model, dropPaths, errors)) {
    result.errors = errors.take();
    return result;
  }

  ImportState state(context, model, errors, options, baseDir);
  state.dropPaths = std::move(dropPaths);
  state.fileName = displayName;
  state.sharedStatistics = sharedStatistics(model);
  // Op verifiers report through diagnostics; keep their text for the node's error message.
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    state.diagnostics.push_back(diag.str());
    return success();
  });

  auto loc = FileLineColLoc::get(&context, displayName, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  Builder b(&context);
  if (options.init == WeightInit::Kaiming)
    (*module)->setAttr(castor::attr::kInitSeed, b.getI64IntegerAttr(int64_t(options.seed)));

  GraphImporter importer(state);
  LogicalResult imported = importer.run(*module);
  // The batch: as given, or the first input's leading dimension.
  int64_t batch = options.batch.value_or(1);
  if (!options.batch)
    module->walk([&](func::FuncOp f) {
      if (f.getNumArguments() > 0)
        if (auto t = llvm::dyn_cast<RankedTensorType>(f.getArgumentTypes()[0]); t && t.getRank() > 0)
          batch = t.getDimSize(0);
    });
  (*module)->setAttr(castor::attr::kBatch, b.getI64IntegerAttr(batch));
  if (failed(imported)) {
    if (errors.empty())
      errors.model("import failed");
    result.errors = errors.take();
    return result;
  }
  state.diagnostics.clear();
  if (failed(verify(*module))) {
    for (const auto &d : state.diagnostics)
      errors.model("the imported IR does not verify: " + d);
    if (errors.empty())
      errors.model("the imported IR does not verify");
    result.errors = errors.take();
    return result;
  }
  result.module = std::move(module);
  result.weights = std::move(state.weights);
  result.notes = statisticCopyNotes(state.statisticCopies);
  return result;
}

ImportResult importOnnxFile(MLIRContext &context, const std::string &path, const ImportOptions &options) {
  // LLVM's reader: a file mapped in one piece (no growing stream to copy its weights through), a
  // pipe read to its end, a directory refused.
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) {
    ImportResult result;
    result.errors.push_back(path + (buffer.getError() == std::errc::is_a_directory
                                        ? std::string(": a directory, not an ONNX file")
                                        : ": cannot open the file (" + buffer.getError().message() + ")"));
    return result;
  }
  return importOnnxBytes(context, (*buffer)->getBuffer().str(), path, dirName(path), options);
}

} // namespace castor::onnx_import
