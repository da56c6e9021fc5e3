#include "castor/Plan/PlanEmitter.h"
#include "castor/Dialect/AttributeNames.h"
#include "castor/Plan/StepLiveness.h"
#include "castor/Dialect/CastorOps.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace castor {
namespace {

plan::Parameter::Init initOf(Init init) {
  switch (init) {
  case Init::file: return plan::Parameter::FILE;
  case Init::kaiming_normal: return plan::Parameter::KAIMING_NORMAL;
  case Init::linear_uniform: return plan::Parameter::LINEAR_UNIFORM;
  case Init::zeros: return plan::Parameter::ZEROS;
  case Init::ones: return plan::Parameter::ONES;
  case Init::fill: return plan::Parameter::FILL;
  }
  return plan::Parameter::INIT_UNSPECIFIED;
}

// Fans as PyTorch computes them for initialisation: a weight [out, in, k...] has
// fan_in = in * k..., fan_out = out * k...; a bias takes the fans of the weight it is used with.
void setFans(plan::Parameter &p, Value param) {
  auto fansOf = [](ArrayRef<int64_t> w) {
    int64_t receptive = 1;
    for (size_t i = 2; i < w.size(); ++i)
      receptive *= w[i];
    return std::make_pair(w[1] * receptive, w[0] * receptive);
  };
  auto shape = llvm::cast<RankedTensorType>(param.getType()).getShape();
  if (shape.size() >= 2) {
    auto [in, out] = fansOf(shape);
    p.set_fan_in(in);
    p.set_fan_out(out);
    return;
  }
  // The bias of a convolution or gemm, read directly or through autocast's casts.
  SmallVector<Value> reads{param};
  for (size_t i = 0; i < reads.size(); ++i)
    for (Operation *user : reads[i].getUsers())
      if (llvm::isa<CastOp>(user))
        reads.push_back(user->getResult(0));
  for (Value read : reads)
    for (Operation *user : read.getUsers())
      if (llvm::isa<Conv2dOp, GemmOp>(user) && user->getNumOperands() > 2 && user->getOperand(2) == read) {
        auto w = llvm::cast<RankedTensorType>(user->getOperand(1).getType()).getShape();
        auto [in, out] = fansOf(w);
        // A gemm with trans_b = false holds its weight as [in, out].
        if (auto gemm = llvm::dyn_cast<GemmOp>(user); gemm && !gemm.getTransB())
          std::swap(in, out);
        p.set_fan_in(in);
        p.set_fan_out(out);
        return;
      }
  p.set_fan_in(shape.empty() ? 1 : shape[0]);
  p.set_fan_out(shape.empty() ? 1 : shape[0]);
}

// Kernel attributes are the op's inherent attributes, converted by kind.
LogicalResult convertAttr(Operation *op, StringRef name, Attribute a, plan::Kernel &k) {
  auto converted = planAttrOf(a);
  if (failed(converted))
    return op->emitError("attribute '") << name << "' has no plan form: " << a;
  (*k.mutable_attrs())[name.str()] = *converted;
  return success();
}

std::string locationName(Location loc) {
  if (auto named = llvm::dyn_cast<NameLoc>(loc))
    return named.getName().str();
  return {};
}

class Emitter {
public:
  explicit Emitter(func::FuncOp func) : func_(func) {}

  FailureOr<EmittedPlan> run(int64_t batch, const std::string &target) {
    auto arena = func_->getAttrOfType<IntegerAttr>(castor::attr::kArenaBytes);
    auto inputOffsets = func_->getAttrOfType<DenseI64ArrayAttr>(castor::attr::kInputOffsets);
    if (!arena || !inputOffsets)
      return func_.emitError("not in plan-level form: run castor-select-kernels and castor-plan-memory first");
    out_.plan.set_format_version(plan::kPlanFormatVersion);
    out_.plan.set_producer("castor 0.1.0");
    out_.plan.set_target(target);
    out_.plan.set_batch(batch);
    out_.plan.set_arena_bytes(uint64_t(arena.getInt()));
    // `castor.workspace_limit` is the requested library workspace (0: the default); without it
    // the plan has no limit and no prediction.
    if (auto limit = func_->getAttrOfType<IntegerAttr>(castor::attr::kWorkspaceLimit)) {
      const uint64_t arenaBytes = uint64_t(arena.getInt()), requested = uint64_t(limit.getInt());
      out_.plan.set_workspace_limit_bytes(workspaceLimitBytes(func_, arenaBytes, requested));
      out_.plan.set_reserve_bytes(fusedReserveBytes(func_));
      out_.plan.set_predicted_peak_bytes(plannedPeakBytes(func_, arenaBytes, requested));
    }

    Block &body = func_.getBody().front();
    for (BlockArgument arg : body.getArguments()) {
      if (auto state = func_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), castor::attr::kState)) {
        if (failed(addState(arg, state.str(), inputOffsets[arg.getArgNumber()])))
          return failure();
        continue;
      }
      auto name = func_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), castor::attr::kName);
      std::string n = name ? name.str() : "input" + std::to_string(arg.getArgNumber());
      auto id = addTensor(arg, n, plan::Tensor::INPUT, inputOffsets[arg.getArgNumber()]);
      if (failed(id))
        return failure();
      auto *binding = out_.plan.add_inputs();
      binding->set_name(n);
      binding->set_tensor(*id);
    }
    for (Operation &op : body) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        if (failed(bindOutputs(ret)))
          return failure();
        continue;
      }
      if (failed(emitOp(op)))
        return failure();
    }
    return std::move(out_);
  }

private:
  FailureOr<uint32_t> addTensor(Value v, const std::string &name, plan::Tensor::Kind kind, int64_t offset) {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    auto dtype = planDtypeOf(type.getElementType());
    if (failed(dtype))
      return emitError(v.getLoc(), "element type ") << type.getElementType() << " has no plan form";
    plan::Tensor *t = out_.plan.add_tensors();
    uint32_t id = uint32_t(out_.plan.tensors_size() - 1);
    t->set_id(id);
    t->set_name(name);
    t->set_dtype(*dtype);
    for (int64_t d : type.getShape())
      t->add_shape(d);
    t->set_kind(kind);
    t->set_offset(uint64_t(offset));
    t->set_bytes(uint64_t(type.getNumElements()) * plan::dtypeSize(*dtype));
    ids_[v] = id;
    return id;
  }

  // A state argument: a tensor that persists across steps, with its initializer.
  LogicalResult addState(BlockArgument arg, const std::string &name, int64_t offset) {
    auto id = addTensor(arg, name, plan::Tensor::STATE, offset);
    if (failed(id))
      return failure();
    unsigned i = arg.getArgNumber();
    auto init = func_.getArgAttrOfType<InitAttr>(i, castor::attr::kInit);
    plan::Parameter *p = out_.plan.add_parameters();
    p->set_name(name);
    p->set_tensor(*id);
    p->set_init(initOf(init ? init.getValue() : Init::file));
    if (auto value = func_.getArgAttrOfType<FloatAttr>(i, castor::attr::kInitValue))
      p->set_init_value(value.getValueAsDouble());
    p->set_trainable(bool(func_.getArgAttr(i, castor::attr::kTrainable)));
    setFans(*p, arg);
    return success();
  }

  LogicalResult emitOp(Operation &op) {
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(castor::attr::kOffsets);
    if (!offsets || offsets.size() != int64_t(op.getNumResults()))
      return op.emitError("has no arena offsets: run castor-plan-memory first");
    auto isReturned = [](Value v) {
      return llvm::any_of(v.getUsers(), [](Operation *u) { return llvm::isa<func::ReturnOp>(u); });
    };
    bool returned = llvm::any_of(op.getResults(), isReturned);

    if (auto param = llvm::dyn_cast<ParameterOp>(op)) {
      if (returned)
        return op.emitError("a parameter returned as an output is not supported");
      auto id = addTensor(param, param.getName().str(), plan::Tensor::PARAMETER, offsets[0]);
      if (failed(id))
        return failure();
      plan::Parameter *p = out_.plan.add_parameters();
      p->set_name(param.getName().str());
      p->set_tensor(*id);
      p->set_init(initOf(param.getInit()));
      p->set_trainable(param.getTrainable());
      setFans(*p, param.getResult());
      return success();
    }
    if (auto constant = llvm::dyn_cast<ConstantOp>(op)) {
      // A constant is a parameter whose value the compiler writes with the weights.
      // Numbered over every constant (splats included, which are not stored).
      std::string name = "castor.constant." + std::to_string(constantCount_++);
      auto id = addTensor(constant, name, plan::Tensor::PARAMETER, offsets[0]);
      if (failed(id))
        return failure();
      auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense)
        return op.emitError("only dense constants can be serialized");
      const plan::Tensor &t = out_.plan.tensors(int(*id));
      weights::NamedTensor value{name, t.dtype(), {t.shape().begin(), t.shape().end()}, {}};
      value.data.resize(t.bytes());
      ArrayRef<char> raw = dense.getRawData();
      for (size_t i = 0; i < value.data.size(); ++i)
        value.data[i] = uint8_t(raw[dense.isSplat() ? i % raw.size() : i]);
      plan::Parameter *p = out_.plan.add_parameters();
      p->set_name(name);
      p->set_tensor(*id);
      // Floating-point splats (the loss gradient's seed, a static loss scale) need no file.
      p->set_init(plan::Parameter::FILE);
      if (dense.isSplat() && llvm::isa<FloatType>(dense.getElementType())) {
        p->set_init(plan::Parameter::FILL);
        p->set_init_value(dense.getSplatValue<APFloat>().convertToDouble());
        return success();
      }
      out_.constants.push_back(std::move(value));
      return success();
    }

    auto kernelName = op.getAttrOfType<StringAttr>(castor::attr::kKernel);
    if (!kernelName)
      return op.emitError("has no kernel: run castor-select-kernels first");
    plan::Kernel *k = out_.plan.add_kernels();
    k->set_op(kernelName.str());
    k->set_name(locationName(op.getLoc()));
    for (Value operand : op.getOperands()) {
      auto it = ids_.find(operand);
      if (it == ids_.end())
        return op.emitError("reads a value defined outside the function body");
      k->add_inputs(it->second);
    }
    std::string base = locationName(op.getLoc());
    auto inPlace = llvm::dyn_cast<InPlaceOpInterface>(op);
    for (auto [i, r] : llvm::enumerate(op.getResults())) {
      if (std::optional<unsigned> operand = inPlace ? inPlace.getTiedOperandIndex(unsigned(i)) : std::nullopt) {
        uint32_t tied = ids_.lookup(op.getOperand(*operand));
        ids_[r] = tied;
        k->add_outputs(tied);
        continue;
      }
      std::string name = (base.empty() ? op.getName().stripDialect().str() : base) + ":" + std::to_string(i);
      auto id = addTensor(r, name, isReturned(r) ? plan::Tensor::OUTPUT : plan::Tensor::ACTIVATION, offsets[i]);
      if (failed(id))
        return failure();
      if (op.hasAttr(castor::attr::kView)) // castor-plan-views
        out_.plan.mutable_tensors(int(*id))->set_view_of(ids_.lookup(op.getOperand(0)));
      k->add_outputs(*id);
    }
    if (auto props = llvm::dyn_cast_or_null<DictionaryAttr>(op.getPropertiesAsAttribute()))
      for (NamedAttribute a : props)
        if (failed(convertAttr(&op, a.getName().strref(), a.getValue(), *k)))
          return failure();
    return success();
  }

  LogicalResult bindOutputs(func::ReturnOp ret) {
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (auto state = func_.getResultAttrOfType<StringAttr>(unsigned(i), castor::attr::kState)) {
        // The new value of a state tensor must be that tensor, updated in place.
        auto id = ids_.find(v);
        bool inPlace = id != ids_.end() && out_.plan.tensors(int(id->second)).kind() == plan::Tensor::STATE &&
                       out_.plan.tensors(int(id->second)).name() == state.str();
        if (!inPlace)
          return ret.emitError("state '") << state.str() << "' is not updated in place";
        continue;
      }
      auto id = ids_.find(v);
      if (id == ids_.end() || out_.plan.tensors(int(id->second)).kind() != plan::Tensor::OUTPUT)
        return ret.emitError("output ") << i << " must be computed by a kernel";
      auto name = func_.getResultAttrOfType<StringAttr>(unsigned(i), castor::attr::kName);
      auto *binding = out_.plan.add_outputs();
      binding->set_name(name ? name.str() : "output" + std::to_string(i));
      binding->set_tensor(id->second);
    }
    return success();
  }

  func::FuncOp func_;
  EmittedPlan out_;
  int constantCount_ = 0;
  llvm::DenseMap<Value, uint32_t> ids_;
};

} // namespace

FailureOr<EmittedPlan> emitPlan(func::FuncOp func, int64_t batch, const std::string &target) {
  return Emitter(func).run(batch, target);
}

} // namespace castor
