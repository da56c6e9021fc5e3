// RecomputeCopies.h.
#include "RecomputeCopies.h"

#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

using namespace mlir;

std::vector<Operation *> castor::opsOf(func::FuncOp f) {
  std::vector<Operation *> ops;
  for (Operation &op : f.getBody().front())
    ops.push_back(&op);
  return ops;
}

int64_t castor::recomputeInBackward(func::FuncOp f, size_t boundary, const std::vector<RecomputedValue> &values) {
  std::vector<Operation *> ops = opsOf(f);
  llvm::DenseMap<Operation *, size_t> position;
  for (size_t i = 0; i < ops.size(); ++i)
    position[ops[i]] = i;
  auto forwardOnly = [&](Value w) {
    Operation *def = w.getDefiningOp();
    auto op = llvm::dyn_cast_or_null<RecomputeOpInterface>(def);
    if (!op || !op.isCheapToRecompute() || position.lookup(def) >= boundary)
      return false;
    for (Operation *user : w.getUsers())
      if (llvm::isa<func::ReturnOp>(user) || position.lookup(user) > boundary)
        return false;
    return true;
  };
  llvm::DenseSet<Value> recomputed;
  for (const RecomputedValue &v : values)
    recomputed.insert(ops[v.op]->getResult(v.result));
  llvm::DenseMap<Value, Value> copyOf;
  int64_t flops = 0;
  std::function<Value(Value, Operation *)> copy = [&](Value v, Operation *before) -> Value {
    if (auto it = copyOf.find(v); it != copyOf.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    SmallVector<Value> operands;
    for (Value w : def->getOperands()) {
      Value c = recomputed.contains(w) || forwardOnly(w) ? copy(w, before) : Value();
      operands.push_back(c ? c : w);
    }
    OpBuilder b(before);
    auto cheap = llvm::cast<RecomputeOpInterface>(def);
    Value c = cheap.buildRecompute(b, llvm::cast<OpResult>(v).getResultNumber(), operands);
    if (!c) // a result that cannot be recomputed alone: keep the original
      return Value();
    c.getDefiningOp()->setAttr(attr::kRecomputed, b.getUnitAttr());
    flops += llvm::cast<RankedTensorType>(c.getType()).getNumElements() * cheap.getRecomputeFlopsPerElement();
    copyOf[v] = c;
    return c;
  };
  for (size_t i = boundary + 1; i < ops.size(); ++i)
    for (OpOperand &use : ops[i]->getOpOperands())
      if (recomputed.contains(use.get()) && !llvm::isa<func::ReturnOp>(ops[i]))
        if (Value c = copy(use.get(), ops[i]))
          use.set(c);
  return flops;
}
