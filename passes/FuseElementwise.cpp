// castor-fuse-elementwise: chains of element-wise ops as fused_elementwise ops (Passes.td).
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/PlanForm.h"
#include "castor/Passes/Passes.h"
#include "plan/elementwise_program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <limits>
#include <optional>

namespace castor {
#define GEN_PASS_DEF_CASTORFUSEELEMENTWISE
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// The instruction `op` is in a program, or nothing when it cannot be one: the plan library
// decides which ops a program takes (plan::isProgramOp); every value is a float tensor.
std::optional<castor::plan::ProgramInstruction> instructionOf(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumRegions() != 0)
    return std::nullopt;
  const std::string name = op->getName().stripDialect().str();
  if (!castor::plan::isProgramOp(name))
    return std::nullopt;
  auto isFloatTensor = [](Type t) {
    auto type = llvm::dyn_cast<RankedTensorType>(t);
    return type && llvm::isa<FloatType>(type.getElementType()) && succeeded(castor::planDtypeOf(type.getElementType()));
  };
  if (!llvm::all_of(op->getOperandTypes(), isFloatTensor) || !isFloatTensor(op->getResult(0).getType()))
    return std::nullopt;
  castor::plan::ProgramInstruction inst;
  inst.kernel.set_op(name);
  inst.dtype = *castor::planDtypeOf(getElementTypeOrSelf(op->getResult(0).getType()));
  if (auto props = llvm::dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    for (NamedAttribute a : props) {
      auto converted = castor::planAttrOf(a.getValue());
      if (failed(converted))
        return std::nullopt;
      (*inst.kernel.mutable_attrs())[a.getName().str()] = *converted;
    }
  return inst;
}

// What a set of ops reads from outside and what outside reads of it, by block position.
struct Boundary {
  llvm::SetVector<Value> inputs, outputs;
  int64_t lastInput = -1;                                  // position of the last external definition
  int64_t firstUse = std::numeric_limits<int64_t>::max(); // position of the first external reader
};

Boundary boundaryOf(ArrayRef<Operation *> members, const llvm::DenseMap<Operation *, int64_t> &position) {
  llvm::SmallPtrSet<Operation *, 16> inside(members.begin(), members.end());
  Boundary b;
  for (Operation *op : members) {
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def && inside.contains(def))
        continue;
      b.inputs.insert(v);
      if (def)
        b.lastInput = std::max(b.lastInput, position.lookup(def));
    }
    for (Operation *user : op->getResult(0).getUsers())
      if (!inside.contains(user)) {
        b.outputs.insert(op->getResult(0));
        b.firstUse = std::min(b.firstUse, position.lookup(user));
      }
  }
  return b;
}

struct FuseElementwisePass : castor::impl::CastorFuseElementwiseBase<FuseElementwisePass> {
  using CastorFuseElementwiseBase::CastorFuseElementwiseBase;

  // A group can run as one kernel when a place exists after every value it reads and before
  // anything outside reads its values (which also rules out a path that leaves the group and
  // comes back), and it fits the kernel's operand limits.
  bool placeable(ArrayRef<Operation *> members, const llvm::DenseMap<Operation *, int64_t> &position) const {
    Boundary b = boundaryOf(members, position);
    return b.lastInput < b.firstUse && int64_t(b.inputs.size()) <= maxInputs &&
           int64_t(b.outputs.size()) <= maxOutputs;
  }

  void runOnOperation() override {
    Block &body = getOperation().getBody().front();
    llvm::DenseMap<Operation *, int64_t> position;
    auto number = [&] {
      position.clear();
      int64_t i = 0;
      for (Operation &op : body)
        position[&op] = i++;
    };
    number();

    // Groups grow in block order: an op joins the groups of the values it reads that share its
    // shape, each merge kept only when the union stays placeable.
    std::vector<SmallVector<Operation *>> groups;
    llvm::DenseMap<Operation *, size_t> groupOf;
    for (Operation &op : body) {
      if (!instructionOf(&op))
        continue;
      auto domain = llvm::cast<RankedTensorType>(op.getResult(0).getType()).getShape();
      size_t mine = groups.size();
      groups.push_back({&op});
      groupOf[&op] = mine;
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        auto it = def ? groupOf.find(def) : groupOf.end();
        if (it == groupOf.end() || it->second == mine ||
            llvm::cast<RankedTensorType>(v.getType()).getShape() != domain)
          continue;
        SmallVector<Operation *> merged(groups[it->second]);
        merged.append(groups[mine]);
        if (!placeable(merged, position))
          continue;
        const size_t theirs = it->second;
        for (Operation *member : groups[mine])
          groupOf[member] = theirs;
        groups[theirs] = std::move(merged);
        groups[mine].clear();
        mine = theirs;
      }
    }

    for (SmallVector<Operation *> &members : groups) {
      if (members.size() < 2)
        continue;
      number(); // earlier groups moved ops
      llvm::sort(members, [&](Operation *a, Operation *b) { return position[a] < position[b]; });
      if (!placeable(members, position))
        continue;
      fuse(members, position);
    }
  }

  void fuse(ArrayRef<Operation *> members, const llvm::DenseMap<Operation *, int64_t> &position) {
    Boundary b = boundaryOf(members, position);
    if (b.outputs.empty()) // nothing reads the group: the ops are dead and left to folding
      return;
    castor::plan::ElementwiseProgram program;
    llvm::DenseMap<Value, castor::plan::ProgramValue> names;
    for (auto [i, v] : llvm::enumerate(b.inputs))
      names[v] = {true, int(i)};
    for (Operation *op : members) {
      castor::plan::ProgramInstruction inst = *instructionOf(op);
      for (Value v : op->getOperands())
        inst.operands.push_back(names.lookup(v));
      names[op->getResult(0)] = {false, int(program.instructions.size())};
      program.instructions.push_back(std::move(inst));
    }
    for (Value v : b.outputs)
      program.outputs.push_back(names.lookup(v));

    // After the last member when nothing outside reads a value before it, else just before
    // the first op outside that reads one (the inputs are all ready there).
    Operation *last = members.back();
    OpBuilder builder(last->getContext());
    if (position.lookup(last) < b.firstUse)
      builder.setInsertionPointAfter(last);
    else
      builder.setInsertionPoint(firstReader(b, members, position));
    SmallVector<Type> types;
    for (Value v : b.outputs)
      types.push_back(v.getType());
    auto fused = builder.create<castor::FusedElementwiseOp>(
        members.front()->getLoc(), types, b.inputs.getArrayRef(),
        builder.getStringAttr(castor::plan::printElementwiseProgram(program)));
    llvm::SmallPtrSet<Operation *, 16> inside(members.begin(), members.end());
    for (size_t j = 0; j < b.outputs.size(); ++j) {
      Value v = b.outputs[j];
      v.replaceUsesWithIf(fused.getResult(j), [&](OpOperand &use) { return !inside.contains(use.getOwner()); });
    }
    for (Operation *op : llvm::reverse(members))
      op->erase();
  }

  static Operation *firstReader(const Boundary &b, ArrayRef<Operation *> members,
                                const llvm::DenseMap<Operation *, int64_t> &position) {
    llvm::SmallPtrSet<Operation *, 16> inside(members.begin(), members.end());
    for (Value v : b.outputs)
      for (Operation *user : v.getUsers())
        if (!inside.contains(user) && position.lookup(user) == b.firstUse)
          return user;
    llvm_unreachable("the first external reader is a reader of an output");
  }
};

} // namespace
