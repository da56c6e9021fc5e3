// castor-fuse-elementwise: chains of element-wise ops as fused_elementwise ops (Passes.td).
#include "ProgramOps.h"

#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/PlanForm.h"
#include "castor/Passes/Passes.h"
#include "castor/shape_rules.h"
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

// The reduction `op` is as a program output (reduce_sum_to: a sum times its scale;
// global_avg_pool: a mean), or nothing when it cannot be one: its operand and result are float
// tensors of one element type and it reduces at least one axis.
std::optional<castor::plan::ProgramReduction> reductionOf(Operation *op) {
  castor::plan::ProgramReduction r;
  if (auto sum = llvm::dyn_cast<castor::ReduceSumToOp>(op)) {
    r.kind = castor::plan::ReduceKind::Sum;
    r.scale = sum.getScale().convertToDouble();
  } else if (llvm::isa<castor::GlobalAvgPoolOp>(op)) {
    r.kind = castor::plan::ReduceKind::Mean;
  } else {
    return std::nullopt;
  }
  auto in = llvm::dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!in || !out || in.getElementType() != out.getElementType() || !in.hasStaticShape() || !out.hasStaticShape() ||
      failed(castor::planDtypeOf(in.getElementType())))
    return std::nullopt;
  r.axes = castor::shape::reducedAxes(out.getShape().vec(), in.getShape().vec());
  if (r.axes.empty())
    return std::nullopt;
  return r;
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
  // A reduction is an output only: no member reads its result (a squeeze-excitation scale
  // derived from the group's own output cannot be applied in the same pass). A group whose
  // element-wise values nothing outside reads has the domain its inputs span (the shape rule's
  // domain when every output is a reduction); one of other inputs keeps its reductions apart.
  bool placeable(ArrayRef<Operation *> members, const llvm::DenseMap<Operation *, int64_t> &position) const {
    Boundary b = boundaryOf(members, position);
    if (!(b.lastInput < b.firstUse && int64_t(b.inputs.size()) <= maxInputs &&
          int64_t(b.outputs.size()) <= maxOutputs))
      return false;
    llvm::SmallPtrSet<Operation *, 16> inside(members.begin(), members.end());
    std::optional<ArrayRef<int64_t>> domain;
    bool elementwiseOut = false;
    for (Operation *op : members) {
      const bool reduction = reductionOf(op).has_value();
      if (reduction && llvm::any_of(op->getResult(0).getUsers(), [&](Operation *u) { return inside.contains(u); }))
        return false;
      if (!reduction) {
        domain = llvm::cast<RankedTensorType>(op->getResult(0).getType()).getShape();
        elementwiseOut |= b.outputs.contains(op->getResult(0));
      }
    }
    if (elementwiseOut || !domain)
      return true;
    castor::shape::Shape spanned;
    for (Value v : b.inputs)
      spanned = castor::shape::broadcast(spanned, llvm::cast<RankedTensorType>(v.getType()).getShape().vec()).shape;
    return spanned == castor::shape::Shape(domain->begin(), domain->end());
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
      if (auto reduction = reductionOf(&op)) {
        join(&op, *reduction, groups, groupOf, position);
        continue;
      }
      if (!castor::programInstructionOf(&op))
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

  // A reduction joins the group that computes its operand (an element-wise value of the group's
  // domain) as one of its outputs, when the group stays placeable and its reductions keep one set
  // of axes (one walk of the domain computes them all).
  void join(Operation *op, const castor::plan::ProgramReduction &reduction,
            std::vector<SmallVector<Operation *>> &groups, llvm::DenseMap<Operation *, size_t> &groupOf,
            const llvm::DenseMap<Operation *, int64_t> &position) const {
    Operation *def = op->getOperand(0).getDefiningOp();
    auto it = def ? groupOf.find(def) : groupOf.end();
    if (it == groupOf.end() || reductionOf(def))
      return;
    SmallVector<Operation *> &group = groups[it->second];
    for (Operation *member : group)
      if (auto other = reductionOf(member); other && other->axes != reduction.axes)
        return;
    SmallVector<Operation *> merged(group);
    merged.push_back(op);
    if (!placeable(merged, position))
      return;
    group = std::move(merged);
    groupOf[op] = it->second;
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
      if (reductionOf(op))
        continue; // an output, below
      castor::plan::ProgramInstruction inst = *castor::programInstructionOf(op);
      for (Value v : op->getOperands())
        inst.operands.push_back(names.lookup(v));
      names[op->getResult(0)] = {false, int(program.instructions.size())};
      program.instructions.push_back(std::move(inst));
    }
    for (Value v : b.outputs) {
      auto reduction = reductionOf(v.getDefiningOp());
      program.outputs.push_back(names.lookup(reduction ? v.getDefiningOp()->getOperand(0) : v));
      program.reductions.push_back(reduction.value_or(castor::plan::ProgramReduction{}));
    }

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
