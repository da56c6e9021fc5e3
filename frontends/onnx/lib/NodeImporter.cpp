#include "NodeImporter.h"
#include "TensorData.h"

#include "mlir/IR/BuiltinAttributes.h"



using namespace mlir;

namespace castor::onnx_import {

// Constants with more elements than this become non-trainable parameters, so that no weight
// values end up in the IR.
constexpr int64_t kMaxInlineConstantElements = 256;

static Location nodeLocation(ImportState &state, const onnx::NodeProto &node) {
  // Layer names are ONNX node names: precision policies and reports refer to them.
  auto file = FileLineColLoc::get(&state.context, state.fileName, 0, 0);
  return NameLoc::get(StringAttr::get(&state.context, nodeLabel(node)), file);
}

NodeImporter::NodeImporter(ImportState &state, const onnx::NodeProto &node)
    : state_(state), node_(node), loc_(nodeLocation(state, node)) {
  state_.builder.setInsertionPointToEnd(state_.builder.getInsertionBlock());
}

LogicalResult NodeImporter::fail(const std::string &reason) {
  state_.errors.node(node_, reason);
  return failure();
}

LogicalResult NodeImporter::failDiagnostics() {
  std::string joined;
  for (const auto &d : state_.diagnostics)
    joined += (joined.empty() ? "" : "; ") + d;
  return fail(joined.empty() ? "invalid operands or attributes" : joined);
}

LogicalResult NodeImporter::checkArity(int minInputs, int maxInputs, int minOutputs) {
  int n = node_.input_size();
  while (n > 0 && node_.input(n - 1).empty())
    --n;
  if (n < minInputs || n > maxInputs)
    return fail("expects " + (minInputs == maxInputs ? std::to_string(minInputs)
                                                       : std::to_string(minInputs) + " to " + std::to_string(maxInputs)) +
                " inputs, has " + std::to_string(n));
  if (node_.output_size() < minOutputs || node_.output(0).empty())
    return fail("expects at least " + std::to_string(minOutputs) + " output(s)");
  return success();
}

bool NodeImporter::hasInput(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }

const onnx::AttributeProto *NodeImporter::findAttr(const std::string &name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

LogicalResult NodeImporter::checkAttrs(std::initializer_list<const char *> known) {
  llvm::SmallVector<llvm::StringRef> names(known.begin(), known.end());
  return checkAttrs(llvm::ArrayRef<llvm::StringRef>(names));
}

LogicalResult NodeImporter::checkAttrs(llvm::ArrayRef<llvm::StringRef> known) {
  for (const auto &a : node_.attribute())
    if (!llvm::is_contained(known, a.name()))
      return fail("attribute '" + a.name() + "' is not supported");
  return success();
}

FailureOr<int64_t> NodeImporter::attrInt(const std::string &name, int64_t dflt) {
  const auto *a = findAttr(name);
  if (!a)
    return dflt;
  if (a->type() != onnx::AttributeProto::INT)
    return fail("attribute '" + name + "' must be an int");
  return a->i();
}

FailureOr<double> NodeImporter::attrFloat(const std::string &name, double dflt) {
  const auto *a = findAttr(name);
  if (!a)
    return dflt;
  if (a->type() != onnx::AttributeProto::FLOAT)
    return fail("attribute '" + name + "' must be a float");
  return decimalOfFloat(a->f());
}

FailureOr<std::vector<int64_t>> NodeImporter::attrInts(const std::string &name, std::vector<int64_t> dflt) {
  const auto *a = findAttr(name);
  if (!a)
    return dflt;
  if (a->type() != onnx::AttributeProto::INTS)
    return fail("attribute '" + name + "' must be a list of ints");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

FailureOr<std::string> NodeImporter::attrString(const std::string &name, std::string dflt) {
  const auto *a = findAttr(name);
  if (!a)
    return dflt;
  if (a->type() != onnx::AttributeProto::STRING)
    return fail("attribute '" + name + "' must be a string");
  return a->s();
}

const std::string &NodeImporter::inputName(int i) const {
  const std::string &name = node_.input(i);
  auto alias = state_.aliases.find(name);
  return alias == state_.aliases.end() ? name : alias->second;
}

const onnx::TensorProto *NodeImporter::constTensor(int i) {
  if (!hasInput(i))
    return nullptr;
  const std::string &name = inputName(i);
  auto init = state_.model.initializers.find(name);
  if (init != state_.model.initializers.end())
    return init->second;
  auto c = state_.constants.find(name);
  return c == state_.constants.end() ? nullptr : c->second;
}

FailureOr<std::vector<int64_t>> NodeImporter::constInts(int i) {
  const auto *t = constTensor(i);
  if (!t)
    return fail("input " + std::to_string(i) + " ('" + (hasInput(i) ? node_.input(i) : "") +
                "') must be a constant (an initializer or a Constant node)");
  std::vector<int64_t> values;
  std::string why;
  if (!readInts(*t, state_.baseDir, values, why))
    return fail(why);
  return values;
}

FailureOr<std::vector<double>> NodeImporter::constDoubles(int i) {
  const auto *t = constTensor(i);
  if (!t)
    return fail("input " + std::to_string(i) + " ('" + (hasInput(i) ? node_.input(i) : "") +
                "') must be a constant (an initializer or a Constant node)");
  std::vector<double> values;
  std::string why;
  if (!readDoubles(*t, state_.baseDir, values, why))
    return fail(why);
  return values;
}

bool NodeImporter::isImportConstant(int i) const {
  return hasInput(i) && state_.constants.count(inputName(i)) != 0;
}

// The role the readers of `value` give it, through further views.
static ParamRole roleOfReaders(const OnnxModel &model, const std::string &value, int depth) {
  std::optional<ParamRole> role;
  for (const auto *node : model.order) {
    for (const auto &input : node->input()) {
      if (input != value)
        continue;
      const std::string &op = node->op_type();
      ParamRole r = ParamRole::Data;
      if (op == "Mul")
        r = ParamRole::Multiplier;
      else if (op == "Add" || op == "Sub" || op == "Concat")
        r = ParamRole::Offset;
      else if (depth < 4 && (op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" || op == "Flatten") &&
               node->input_size() > 0 && node->input(0) == value && node->output_size() > 0)
        r = roleOfReaders(model, node->output(0), depth + 1);
      if (role && *role != r)
        return ParamRole::Data;
      role = r;
    }
  }
  return role.value_or(ParamRole::Data);
}

ParamRole NodeImporter::viewedRole() const {
  if (node_.output_size() == 0 || !isInitializer(0))
    return ParamRole::Data;
  return roleOfReaders(state_.model, node_.output(0), 0);
}

bool NodeImporter::isInitializer(int i) const {
  return hasInput(i) && state_.model.initializers.count(inputName(i)) != 0;
}

bool NodeImporter::isIntegerInitializer(int i) const {
  if (!hasInput(i))
    return false;
  auto init = state_.model.initializers.find(inputName(i));
  if (init == state_.model.initializers.end())
    return false;
  int32_t t = init->second->data_type();
  return t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32;
}

std::optional<std::vector<int64_t>> NodeImporter::knownDims(const std::string &name) const {
  const onnx::TensorProto *t = nullptr;
  if (auto c = state_.constants.find(name); c != state_.constants.end())
    t = c->second;
  else if (auto init = state_.model.initializers.find(name); init != state_.model.initializers.end())
    t = init->second;
  if (!t)
    return std::nullopt;
  return std::vector<int64_t>(t->dims().begin(), t->dims().end());
}

std::vector<int64_t> NodeImporter::constDims(int i) {
  const auto *t = constTensor(i);
  return t ? std::vector<int64_t>(t->dims().begin(), t->dims().end()) : std::vector<int64_t>{};
}

FailureOr<Value> NodeImporter::splatOf(RankedTensorType type, double value) {
  auto element = llvm::dyn_cast<FloatType>(type.getElementType());
  if (!element)
    return fail("a constant of a non-floating-point type is not supported here");
  ConstantOp::Properties props;
  props.value = DenseElementsAttr::get(type, FloatAttr::get(element, value));
  auto op = create<ConstantOp>({}, props);
  if (failed(op))
    return failure();
  return op->getResult();
}

FailureOr<Value> NodeImporter::constantOf(RankedTensorType type, llvm::ArrayRef<double> values) {
  if (int64_t(values.size()) != type.getNumElements())
    return fail("internal: constant of " + std::to_string(type.getNumElements()) + " elements given " +
                std::to_string(values.size()) + " values");
  auto element = llvm::dyn_cast<FloatType>(type.getElementType());
  if (!element)
    return fail("a constant of a non-floating-point type is not supported here");
  SmallVector<APFloat> floats;
  for (double v : values) {
    APFloat f(v);
    bool lost = false;
    f.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    floats.push_back(f);
  }
  ConstantOp::Properties props;
  props.value = DenseElementsAttr::get(type, floats);
  auto op = create<ConstantOp>({}, props);
  if (failed(op))
    return failure();
  return op->getResult();
}

static std::optional<Init> seededInit(ParamRole role) {
  switch (role) {
  case ParamRole::ConvWeight: return Init::kaiming_normal;
  case ParamRole::ConvBias:
  case ParamRole::LinearWeight:
  case ParamRole::LinearBias: return Init::linear_uniform;
  case ParamRole::NormScale:
  case ParamRole::Multiplier:
  case ParamRole::RunningVar: return Init::ones;
  case ParamRole::NormBias:
  case ParamRole::Offset:
  case ParamRole::RunningMean: return Init::zeros;
  case ParamRole::Data: return std::nullopt;
  }
  return std::nullopt;
}

FailureOr<Value> NodeImporter::parameter(const onnx::TensorProto &tensor, ParamRole role) {
  std::string why;
  auto dims = tensorShape(tensor, why);
  if (!dims)
    return fail(why);
  Type element = elementTypeOf(state_.context, tensor.data_type());
  if (!element)
    return fail("initializer '" + tensor.name() + "' has unsupported " + onnxTypeName(tensor.data_type()));
  auto type = RankedTensorType::get(*dims, element);

  Init init = Init::file;
  if (state_.options.init == WeightInit::Kaiming)
    init = seededInit(role).value_or(Init::file);
  if (init == Init::file) {
    WeightData w{tensor.name(), element, *dims, {}};
    DataStatus status = readTensorBytes(tensor, state_.baseDir, w.bytes, why);
    if (status == DataStatus::Missing)
      return fail("weight data is missing: " + why +
                  (role == ParamRole::Data ? "" : " (use --init kaiming to initialise from a seed instead)"));
    if (status == DataStatus::Invalid)
      return fail(why);
    state_.weights.push_back(std::move(w));
  }

  // Every floating-point initializer the graph computes with is learnable, except the
  // BatchNorm running statistics, which the training step updates itself.
  bool trainable = role != ParamRole::RunningMean && role != ParamRole::RunningVar && llvm::isa<FloatType>(element) &&
                   !state_.folded.count(tensor.name());
  ParameterOp::Properties props;
  props.name = StringAttr::get(context(), tensor.name());
  props.init = InitAttr::get(context(), init);
  if (trainable)
    props.trainable = UnitAttr::get(context());
  auto op = build<ParameterOp>(type, {}, props);
  if (failed(op))
    return failure();
  state_.values[tensor.name()] = op->getResult();
  return op->getResult();
}

FailureOr<Value> NodeImporter::statisticCopy(const onnx::TensorProto &tensor, ParamRole role) {
  const char *what = role == ParamRole::RunningMean ? "running_mean" : "running_var";
  std::string base = (node_.name().empty() ? tensor.name() : node_.name()) + "." + what, name = base;
  for (int k = 2; state_.values.count(name) || state_.model.initializers.count(name); ++k)
    name = base + "." + std::to_string(k);
  onnx::TensorProto copy = tensor; // the same data (inline or external), under its own name
  copy.set_name(name);
  const std::string who = node_.name().empty() ? "a " + node_.op_type() + " node without a name"
                                               : "node '" + node_.name() + "' (" + node_.op_type() + ")";
  state_.statisticCopies.emplace_back(who + ": its " + what + " is initializer '" + tensor.name() + "'", name);
  return parameter(copy, role);
}

FailureOr<Value> NodeImporter::constant(const onnx::TensorProto &tensor) {
  std::string why;
  auto dims = tensorShape(tensor, why);
  if (!dims)
    return fail(why);
  int64_t count = 1;
  for (int64_t d : *dims)
    count *= d;
  if (count > kMaxInlineConstantElements)
    return parameter(tensor, ParamRole::Data);
  Type element = elementTypeOf(state_.context, tensor.data_type());
  if (!element)
    return fail("constant '" + tensor.name() + "' has unsupported " + onnxTypeName(tensor.data_type()));
  std::vector<char> bytes;
  if (readTensorBytes(tensor, state_.baseDir, bytes, why) != DataStatus::Ok)
    return fail(why);
  auto type = RankedTensorType::get(*dims, element);
  bool splat = false;
  if (!DenseElementsAttr::isValidRawBuffer(type, bytes, splat))
    return fail("constant '" + tensor.name() + "' has malformed data");
  auto value = DenseElementsAttr::getFromRawBuffer(type, bytes);
  ConstantOp::Properties props;
  props.value = value;
  auto op = create<ConstantOp>({}, props);
  if (failed(op))
    return failure();
  return op->getResult();
}

FailureOr<Value> NodeImporter::input(int i, ParamRole role) {
  if (!hasInput(i))
    return fail("input " + std::to_string(i) + " is missing");
  const std::string &name = inputName(i);
  auto init = state_.model.initializers.find(name);
  if ((role == ParamRole::RunningMean || role == ParamRole::RunningVar) && state_.sharedStatistics.count(name) &&
      init != state_.model.initializers.end())
    return statisticCopy(*init->second, role);
  auto it = state_.values.find(name);
  if (it != state_.values.end())
    return it->second;
  if (init != state_.model.initializers.end())
    return parameter(*init->second, role);
  auto c = state_.constants.find(name);
  if (c != state_.constants.end()) {
    auto v = constant(*c->second);
    if (succeeded(v))
      state_.values[name] = *v;
    return v;
  }
  return fail("input '" + name + "' has no value (its producer failed to import)");
}

LogicalResult NodeImporter::setOutput(int i, Value value) {
  if (i >= node_.output_size() || node_.output(i).empty())
    return success(); // the output is omitted
  state_.values[node_.output(i)] = value;
  return success();
}

LogicalResult NodeImporter::defineConstant(std::unique_ptr<onnx::TensorProto> tensor) {
  tensor->set_name(node_.output(0));
  state_.constants[node_.output(0)] = tensor.get();
  state_.ownedConstants.push_back(std::move(tensor));
  return success();
}

bool NodeImporter::forwardConstantInput() {
  if (!hasInput(0) || node_.output_size() < 1 || node_.output(0).empty())
    return false;
  const std::string &name = inputName(0);
  // An imported initializer is an ordinary value, except a shared statistic: its readers decide.
  if ((state_.values.count(name) && !state_.sharedStatistics.count(name)) ||
      (!state_.model.initializers.count(name) && !state_.constants.count(name)))
    return false;
  state_.aliases[node_.output(0)] = name;
  return true;
}

LogicalResult NodeImporter::requireUnused(int i, const std::string &what) {
  if (i >= node_.output_size() || node_.output(i).empty())
    return success();
  auto it = state_.model.useCount.find(node_.output(i));
  if (it != state_.model.useCount.end() && it->second > 0)
    return fail("output " + std::to_string(i) + " (" + what + ") is used, which is not supported");
  return success();
}

} // namespace castor::onnx_import
