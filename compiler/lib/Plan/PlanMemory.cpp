// castor-plan-memory: places every tensor of a function in one arena by liveness.
#include "castor/Dialect/CastorOps.h"
#include "castor/Plan/MemoryPlanner.h"
#include "castor/Plan/PlanPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

namespace castor {
#define GEN_PASS_DEF_CASTORPLANMEMORY
#include "castor/Plan/PlanPasses.h.inc"
} // namespace castor

using namespace mlir;

namespace {

constexpr int64_t kStepStart = -1;
constexpr int64_t kStepEnd = std::numeric_limits<int64_t>::max();

uint64_t byteSize(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  uint64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return uint64_t(t.getNumElements()) * ((bits + 7) / 8);
}

struct PlanMemoryPass : castor::impl::CastorPlanMemoryBase<PlanMemoryPass> {
  using CastorPlanMemoryBase::CastorPlanMemoryBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      func.emitError("alignment must be a power of two, got ") << alignment;
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitError("only single-block functions can be planned");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();

    // Kernel indices in execution order.
    llvm::DenseMap<Operation *, int64_t> kernelIndex;
    int64_t next = 0;
    for (Operation &op : body)
      if (op.hasAttr("castor.kernel"))
        kernelIndex[&op] = next++;
      else if (!llvm::isa<castor::ParameterOp, castor::ConstantOp, func::ReturnOp>(op)) {
        op.emitError("has no kernel: run castor-select-kernels first");
        return signalPassFailure();
      }

    std::vector<Value> values;
    std::vector<castor::BufferLifetime> lifetimes;
    auto lastUse = [&](Value v) {
      int64_t last = kStepStart;
      for (Operation *user : v.getUsers()) {
        if (llvm::isa<func::ReturnOp>(user))
          return kStepEnd;
        last = std::max(last, kernelIndex.lookup(user));
      }
      return last;
    };
    // State arguments (parameters, optimizer state, counters) persist across steps.
    for (BlockArgument arg : body.getArguments()) {
      values.push_back(arg);
      bool state = bool(func.getArgAttr(arg.getArgNumber(), "castor.state"));
      lifetimes.push_back({byteSize(arg.getType()), kStepStart, state ? kStepEnd : lastUse(arg)});
    }
    // Results written in place (optimizer updates, unscaled gradients) share their operand's
    // buffer, which then lives until the result's last reader. The operand must have no
    // reader after the in-place kernel: it no longer holds its value then.
    llvm::DenseMap<Value, Value> tiedTo;
    llvm::DenseMap<Value, size_t> bufferOf;
    auto root = [&](Value v) {
      while (tiedTo.count(v))
        v = tiedTo[v];
      return v;
    };
    for (size_t i = 0; i < values.size(); ++i)
      bufferOf[values[i]] = i;
    for (Operation &op : body) {
      bool source = llvm::isa<castor::ParameterOp, castor::ConstantOp>(op);
      auto inPlace = llvm::dyn_cast<castor::InPlaceOpInterface>(op);
      for (Value r : op.getResults()) {
        std::optional<unsigned> tied =
            inPlace ? inPlace.getTiedOperandIndex(llvm::cast<OpResult>(r).getResultNumber()) : std::nullopt;
        if (tied) {
          Value operand = op.getOperand(*tied);
          for (Operation *user : operand.getUsers())
            if (user != &op && !llvm::isa<func::ReturnOp>(user) && kernelIndex.lookup(user) > kernelIndex.lookup(&op)) {
              op.emitError("overwrites operand ") << *tied << " in place, but a later op still reads it";
              return signalPassFailure();
            }
          tiedTo[r] = operand;
          castor::BufferLifetime &life = lifetimes[bufferOf[root(operand)]];
          life.last = std::max(life.last, lastUse(r));
          continue;
        }
        bufferOf[r] = values.size();
        values.push_back(r);
        if (source)
          lifetimes.push_back({byteSize(r.getType()), kStepStart, kStepEnd});
        else
          lifetimes.push_back({byteSize(r.getType()), kernelIndex.lookup(&op), std::max(kernelIndex.lookup(&op), lastUse(r))});
      }
    }

    castor::ArenaLayout layout = castor::planArena(lifetimes, uint64_t(alignment));
    llvm::DenseMap<Value, int64_t> offsetOf;
    for (size_t i = 0; i < values.size(); ++i)
      offsetOf[values[i]] = int64_t(layout.offsets[i]);
    for (auto [result, operand] : tiedTo)
      offsetOf[result] = offsetOf[root(operand)];

    Builder b(&getContext());
    SmallVector<int64_t> inputOffsets;
    for (BlockArgument arg : body.getArguments())
      inputOffsets.push_back(offsetOf[arg]);
    func->setAttr("castor.input_offsets", b.getDenseI64ArrayAttr(inputOffsets));
    for (Operation &op : body) {
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults())
        offsets.push_back(offsetOf[r]);
      op.setAttr("castor.offsets", b.getDenseI64ArrayAttr(offsets));
    }
    func->setAttr("castor.arena_bytes", b.getI64IntegerAttr(int64_t(layout.arenaBytes)));
    func->setAttr("castor.tensor_bytes", b.getI64IntegerAttr(int64_t(layout.totalBytes)));
  }
};

} // namespace
