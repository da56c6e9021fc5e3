// What a node converter sees: its ONNX node, typed access to attributes and inputs, and a
// checked way to create castor ops.
#pragma once

#include "OnnxModel.h"
#include "StochasticDepth.h"
#include "castor/Frontends/Onnx/Importer.h"
#include "castor/Dialect/CastorOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace castor::onnx_import {

// How a node uses an initializer; decides its seeded initialiser and whether it trains.
// Offset: a tensor added to a computed value or concatenated with one (a linear layer's bias
// after MatMul, a positional embedding, a class token); Multiplier: a tensor a computed value
// is multiplied by (a layer scale).
enum class ParamRole {
  Data,
  ConvWeight,
  ConvBias,
  LinearWeight,
  LinearBias,
  NormScale,
  NormBias,
  RunningMean,
  RunningVar,
  Offset,
  Multiplier
};

// State shared by all nodes of one import.
struct ImportState {
  ImportState(mlir::MLIRContext &ctx, OnnxModel &model, ErrorList &errors, const ImportOptions &options,
              std::string baseDir)
      : context(ctx), builder(&ctx), model(model), errors(errors), options(options), baseDir(std::move(baseDir)) {}

  mlir::MLIRContext &context;
  mlir::OpBuilder builder;
  OnnxModel &model;
  ErrorList &errors;
  const ImportOptions &options;
  std::string baseDir;
  std::string fileName;
  std::map<std::string, mlir::Value> values;
  // Tensors of Constant nodes, usable as constant inputs.
  std::map<std::string, const onnx::TensorProto *> constants;
  std::vector<std::unique_ptr<onnx::TensorProto>> ownedConstants;
  // Identity outputs of initializers and constants, resolved to the name they forward, so
  // the consumer decides the parameter's role.
  std::map<std::string, std::string> aliases;
  // Constants computed at import from shapes (ShapeFolding): never trainable.
  std::set<std::string> folded;
  // Initializers a BatchNormalization reads as a running statistic that another input also
  // reads (an exporter merged equal initializers): each such statistic gets its own copy
  // (sharedStatistics in Importer.cpp).
  std::set<std::string> sharedStatistics;
  // The statistics given their own copy: "<who>: its <what> is initializer '<name>'", and the copy's name.
  std::vector<std::pair<std::string, std::string>> statisticCopies;
  // Stochastic-depth chains replaced by per-sample dropout (StochasticDepth.h).
  DropPaths dropPaths;
  // The batch dimension the model file declares, 0 when it is symbolic.
  int64_t declaredBatch = 0;
  std::vector<WeightData> weights;
  // Messages of the diagnostics emitted while creating the current op.
  std::vector<std::string> diagnostics;
};

// An op's properties struct, or mlir::EmptyProperties for ops without attributes.
template <typename OpT>
using PropsOf = typename OpT::template InferredProperties<OpT>;

class NodeImporter {
public:
  NodeImporter(ImportState &state, const onnx::NodeProto &node);

  const onnx::NodeProto &node() const { return node_; }
  int64_t opset() const { return state_.model.opset; }
  mlir::MLIRContext *context() { return &state_.context; }
  mlir::Location loc() const { return loc_; }

  // Records `reason` against this node and fails.
  mlir::LogicalResult fail(const std::string &reason);

  // Fails unless the node has between min and max inputs (trailing omitted ones ignored)
  // and at least `minOutputs` outputs.
  mlir::LogicalResult checkArity(int minInputs, int maxInputs, int minOutputs = 1);
  bool hasInput(int i) const;
  mlir::FailureOr<mlir::Value> input(int i, ParamRole role = ParamRole::Data);
  // The values of a constant input (an initializer or a Constant node's output).
  mlir::FailureOr<std::vector<int64_t>> constInts(int i);
  mlir::FailureOr<std::vector<double>> constDoubles(int i);
  // Whether input i is a Constant node's output or a value folded at import (not a weight).
  bool isImportConstant(int i) const;
  bool isIntegerInitializer(int i) const;
  // Whether input i is an initializer (a weight or buffer of the model), through Identity nodes.
  bool isInitializer(int i) const;
  // For a view (Reshape, Unsqueeze, Squeeze, Flatten) of a weight: the role its readers give it
  // (a layer scale reshaped to [1, C, 1, 1], then multiplied: Multiplier), so that --init kaiming
  // initialises it as a weight read directly; Data when its readers disagree.
  ParamRole viewedRole() const;
  // Dims of constant input i (an initializer or a Constant node); empty when it is not one.
  std::vector<int64_t> constDims(int i);
  // Dims of a value known at import by name (a constant, a folded value or an initializer).
  std::optional<std::vector<int64_t>> knownDims(const std::string &name) const;
  // A castor.constant of `type` holding `values`, converted to its element type.
  mlir::FailureOr<mlir::Value> constantOf(mlir::RankedTensorType type, llvm::ArrayRef<double> values);
  // A castor.constant of `type` with every element `value`.
  mlir::FailureOr<mlir::Value> splatOf(mlir::RankedTensorType type, double value);

  bool hasAttr(const std::string &name) const { return findAttr(name) != nullptr; }
  mlir::FailureOr<int64_t> attrInt(const std::string &name, int64_t dflt);
  mlir::FailureOr<double> attrFloat(const std::string &name, double dflt);
  mlir::FailureOr<std::vector<int64_t>> attrInts(const std::string &name, std::vector<int64_t> dflt);
  mlir::FailureOr<std::string> attrString(const std::string &name, std::string dflt);
  const onnx::AttributeProto *findAttr(const std::string &name) const;
  // Fails naming the first attribute not in `known`.
  mlir::LogicalResult checkAttrs(std::initializer_list<const char *> known);
  mlir::LogicalResult checkAttrs(llvm::ArrayRef<llvm::StringRef> known);

  mlir::LogicalResult setOutput(int i, mlir::Value value);
  // Makes output 0 a constant tensor (a Constant node's value).
  mlir::LogicalResult defineConstant(std::unique_ptr<onnx::TensorProto> tensor);
  // Forwards output 0 to input 0 without materialising it, when input 0 is an initializer
  // or constant; returns false when it is an ordinary value.
  bool forwardConstantInput();
  int64_t declaredBatch() const { return state_.declaredBatch; }
  int64_t batch() const { return state_.options.batch.value_or(0); }
  // Fails when output i exists and is read by a node or the graph.
  mlir::LogicalResult requireUnused(int i, const std::string &what);

  // Creates an op whose result types are inferred; verifier failures become this node's error.
  template <typename OpT>
  mlir::FailureOr<OpT> create(mlir::ValueRange operands, PropsOf<OpT> props = {}) {
    llvm::SmallVector<mlir::Type> types;
    state_.diagnostics.clear();
    if (mlir::failed(OpT::inferReturnTypes(context(), loc_, operands, {}, mlir::OpaqueProperties(&props), {}, types)))
      return failDiagnostics();
    return build<OpT>(types, operands, props);
  }

  // Creates an op with the given result types and verifies it.
  template <typename OpT>
  mlir::FailureOr<OpT> build(mlir::TypeRange types, mlir::ValueRange operands, PropsOf<OpT> props = {}) {
    mlir::OperationState os(loc_, OpT::getOperationName());
    os.addOperands(operands);
    os.addTypes(types);
    if constexpr (!std::is_same_v<PropsOf<OpT>, mlir::EmptyProperties>)
      os.getOrAddProperties<PropsOf<OpT>>() = props;
    state_.diagnostics.clear();
    mlir::Operation *op = state_.builder.create(os);
    if (mlir::failed(mlir::verify(op, /*verifyRecursively=*/false))) {
      op->erase();
      return failDiagnostics();
    }
    return llvm::cast<OpT>(op);
  }

private:
  mlir::LogicalResult failDiagnostics();
  mlir::FailureOr<mlir::Value> parameter(const onnx::TensorProto &tensor, ParamRole role);
  mlir::FailureOr<mlir::Value> constant(const onnx::TensorProto &tensor);
  const onnx::TensorProto *constTensor(int i);
  const std::string &inputName(int i) const;
  // A BatchNorm's own copy of a running statistic whose initializer is shared (sharedStatistics).
  mlir::FailureOr<mlir::Value> statisticCopy(const onnx::TensorProto &tensor, ParamRole role);

  ImportState &state_;
  const onnx::NodeProto &node_;
  mlir::Location loc_;
};

using ConvertFn = mlir::LogicalResult (*)(NodeImporter &);

// The final Mul of a stochastic-depth chain as one per-sample dropout of its data input.
mlir::LogicalResult convertDropPath(NodeImporter &n, const DropPath &path);

// The converter of an op type of the default domain, or null when it is unsupported.
ConvertFn findConverter(const std::string &opType);

} // namespace castor::onnx_import
