#include "StepFunctions.h"
// castor-autocast: mixed precision by explicit casts, chosen per op from its precision class.
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Support/OptionChoices.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <deque>
#include <optional>

namespace castor {
#define GEN_PASS_DEF_CASTORAUTOCAST
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;
using namespace castor;

namespace {

std::optional<PrecisionClass> parseClass(StringRef s) {
  if (s == "fp32")
    return PrecisionClass::FullPrecision;
  if (s == "low")
    return PrecisionClass::LowPrecision;
  if (s == "neutral")
    return PrecisionClass::Neutral;
  if (s == "mixed")
    return PrecisionClass::Mixed;
  return std::nullopt;
}

// Per-op-type and per-layer overrides of the precision classes.
struct Policy {
  llvm::StringMap<PrecisionClass> ops;
  // A GlobPattern refers to its pattern's characters: keep them alive beside it.
  std::deque<std::string> patternText;
  std::vector<std::pair<llvm::GlobPattern, PrecisionClass>> layers;

  static LogicalResult load(StringRef path, Location loc, Policy &policy) {
    if (path.empty())
      return success();
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return emitError(loc, "cannot read precision policy '") << path << "'", failure();
    auto json = llvm::json::parse((*buffer)->getBuffer());
    if (!json) {
      std::string message = llvm::toString(json.takeError());
      return emitError(loc, "precision policy '") << path << "' is not valid JSON: " << message, failure();
    }
    auto *root = json->getAsObject();
    if (!root)
      return emitError(loc, "precision policy '") << path << "' must be a JSON object", failure();
    for (auto &[key, value] : *root) {
      if (key != "ops" && key != "layers")
        return emitError(loc, "precision policy: unknown key '") << key.str() << "' (expected ops, layers)", failure();
      auto *entries = value.getAsObject();
      if (!entries)
        return emitError(loc, "precision policy: '") << key.str() << "' must be an object", failure();
      for (auto &[name, cls] : *entries) {
        auto s = cls.getAsString();
        auto parsed = s ? parseClass(*s) : std::nullopt;
        if (!parsed)
          return emitError(loc, "precision policy: '")
                     << name.str() << "' must be \"fp32\", \"low\", \"mixed\" or \"neutral\"",
                 failure();
        if (key == "ops") {
          policy.ops[name.str()] = *parsed;
        } else {
          policy.patternText.push_back(name.str());
          auto glob = llvm::GlobPattern::create(policy.patternText.back());
          if (!glob)
            return emitError(loc, "precision policy: invalid layer pattern '") << name.str() << "'", failure();
          policy.layers.push_back({std::move(*glob), *parsed});
        }
      }
    }
    return success();
  }

  PrecisionClass classOf(Operation *op, PrecisionClass fallback) const {
    if (auto name = llvm::dyn_cast<NameLoc>(op->getLoc()))
      for (auto &[glob, cls] : layers)
        if (glob.match(name.getName().strref()))
          return cls;
    auto it = ops.find(op->getName().stripDialect());
    return it == ops.end() ? fallback : it->second;
  }
};

class Autocaster {
public:
  Autocaster(func::FuncOp func, Type low, const Policy &policy) : func_(func), low_(low), policy_(policy) {}

  LogicalResult run() {
    for (Operation &op : llvm::make_early_inc_range(func_.getBody().front())) {
      if (llvm::isa<ParameterOp, ConstantOp, CastOp, func::ReturnOp>(op))
        continue;
      auto iface = llvm::dyn_cast<PrecisionOpInterface>(op);
      if (!iface)
        return op.emitError("has no precision class (PrecisionOpInterface)");
      auto isFloat = [](Type t) { return llvm::isa<FloatType>(getElementTypeOrSelf(t)); };
      if (llvm::none_of(op.getOperandTypes(), isFloat))
        continue;
      PrecisionClass cls = policy_.classOf(&op, iface.getPrecisionClass());
      Type uniform = cls == PrecisionClass::Mixed ? Type() : targetType(&op, cls);
      for (OpOperand &operand : op.getOpOperands()) {
        Type element = getElementTypeOrSelf(operand.get().getType());
        Type target = uniform ? uniform : mixedOperandType(&op, operand.getOperandNumber());
        if (target && llvm::isa<FloatType>(element) && element != target)
          operand.set(castTo(operand.get(), target));
      }
      if (failed(retype(&op)))
        return failure();
    }
    auto ret = llvm::cast<func::ReturnOp>(func_.getBody().front().getTerminator());
    func_.setFunctionType(FunctionType::get(func_.getContext(), func_.getArgumentTypes(), ret.getOperandTypes()));
    return success();
  }

private:
  // The element type operand `index` of a Mixed op takes; null to leave it as it is. The data
  // keeps its precision; parameters and statistics are f32 beside f16 or bf16 data and otherwise
  // follow the data (the rule of shape::batchNormTypes).
  Type mixedOperandType(Operation *op, unsigned index) {
    auto data = llvm::dyn_cast<FloatType>(getElementTypeOrSelf(op->getOperand(0).getType()));
    if (index == 0 || !data)
      return Type();
    return data.getWidth() == 16 ? Float32Type::get(op->getContext()) : data;
  }

  // The element type every floating-point operand of an op of class `cls` takes (not Mixed).
  Type targetType(Operation *op, PrecisionClass cls) {
    Type f32 = Float32Type::get(op->getContext());
    switch (cls) {
    case PrecisionClass::LowPrecision: return low_;
    case PrecisionClass::FullPrecision: return f32;
    case PrecisionClass::Mixed:
    case PrecisionClass::Neutral: break;
    }
    Type widest;
    for (Value v : op->getOperands()) {
      auto t = llvm::dyn_cast<FloatType>(getElementTypeOrSelf(v.getType()));
      if (!t || followsOtherOperands(op, v))
        continue;
      if (!widest || t == widest)
        widest = t;
      else
        widest = (t.getWidth() > llvm::cast<FloatType>(widest).getWidth()) ? t : (t.getWidth() == 16 ? f32 : widest);
    }
    if (!widest) // every floating-point operand follows: none decides, keep the widest of all
      for (Value v : op->getOperands())
        if (auto t = llvm::dyn_cast<FloatType>(getElementTypeOrSelf(v.getType())))
          widest = !widest || t.getWidth() > llvm::cast<FloatType>(widest).getWidth() ? t : widest;
    return widest;
  }

  // Operands of a neutral op that take the type of the others instead of widening them, as in
  // PyTorch AMP: a constant (the exporter's Python scalars: x * 0.5 stays in f16), and the bias
  // added to a matrix product (ONNX splits a linear layer into MatMul and Add; PyTorch's
  // autocast runs the whole layer, bias included, in low precision).
  static bool followsOtherOperands(Operation *op, Value v) {
    if (v.getDefiningOp<ConstantOp>())
      return true;
    if (!llvm::isa<AddOp>(op) || !v.getDefiningOp<ParameterOp>())
      return false;
    return llvm::any_of(op->getOperands(), [](Value other) {
      Operation *def = other.getDefiningOp();
      return def && llvm::isa<MatmulOp, GemmOp>(def);
    });
  }

  // One cast per value and type, placed right after the value's definition so that every use
  // (forward and, after make-train-step, backward) shares it.
  Value castTo(Value v, Type element) {
    auto key = std::make_pair(v, element);
    if (auto it = casts_.find(key); it != casts_.end())
      return it->second;
    OpBuilder b(func_.getContext());
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&func_.getBody().front());
    auto type = llvm::cast<RankedTensorType>(v.getType()).clone(element);
    Value c = b.create<CastOp>(v.getLoc(), type, v);
    casts_[key] = c;
    return c;
  }

  // Result types follow the new operand types.
  LogicalResult retype(Operation *op) {
    SmallVector<Type> types;
    if (auto infer = llvm::dyn_cast<InferTypeOpInterface>(op)) {
      if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(), op->getRawDictionaryAttrs(),
                                        op->getPropertiesStorage(), op->getRegions(), types)))
        return op->emitError("cannot infer its types after autocast");
    } else {
      // Shape-preserving or reshaping ops without inference keep their shape, take the type.
      Type element = getElementTypeOrSelf(op->getOperand(0).getType());
      for (Value r : op->getResults())
        types.push_back(llvm::cast<RankedTensorType>(r.getType()).clone(element));
    }
    for (auto [r, t] : llvm::zip(op->getResults(), types))
      r.setType(t);
    return success();
  }

  func::FuncOp func_;
  Type low_;
  const Policy &policy_;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts_;
};

struct AutocastPass : castor::impl::CastorAutocastBase<AutocastPass> {
  using CastorAutocastBase::CastorAutocastBase;

  void runOnOperation() override {
    auto forward = castor::forwardFunction(getOperation(), " to autocast");
    if (!forward)
      return signalPassFailure();
    if (std::string error = castor::choices::checkChoice("precision", precision, castor::choices::kLowPrecisions);
        !error.empty()) {
      forward.emitError(error) << ", got '" << precision << "'";
      return signalPassFailure();
    }
    Type low = precision == "fp16" ? Type(Float16Type::get(&getContext())) : Type(BFloat16Type::get(&getContext()));
    Policy rules;
    if (failed(Policy::load(policy, forward.getLoc(), rules)) || failed(Autocaster(forward, low, rules).run()))
      signalPassFailure();
  }
};

} // namespace
