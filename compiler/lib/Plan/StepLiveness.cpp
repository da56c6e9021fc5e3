// Lifetimes of a function's tensors (StepLiveness.h).
#include "castor/Plan/StepLiveness.h"

#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"

#include <algorithm>
#include <limits>

using namespace mlir;

namespace castor {

namespace {
constexpr int64_t kStepStart = -1;
constexpr int64_t kStepEnd = std::numeric_limits<int64_t>::max();
} // namespace

uint64_t tensorBytes(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  uint64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return uint64_t(t.getNumElements()) * ((bits + 7) / 8);
}

uint64_t bytesBesideArena(func::FuncOp func) {
  uint64_t inputs = 0, staging = 0;
  for (BlockArgument arg : func.getArguments()) {
    uint64_t bytes = tensorBytes(arg.getType());
    if (!func.getArgAttr(arg.getArgNumber(), castor::attr::kState))
      inputs += bytes;
    else if (llvm::cast<RankedTensorType>(arg.getType()).getRank() == 4)
      staging = std::max(staging, bytes);
  }
  return inputs + staging;
}

uint64_t fusedReserveBytes(func::FuncOp func) {
  uint64_t reserve = uint64_t(1) << 20;
  func.walk([&](BatchNormReluTrainingOp op) {
    const uint64_t bits = uint64_t(llvm::cast<RankedTensorType>(op->getResult(0).getType()).getNumElements());
    reserve += ((bits + 7) / 8 + 255) / 256 * 256;
  });
  return reserve;
}

uint64_t workspaceLimitBytes(func::FuncOp func, uint64_t arenaBytes, uint64_t requestedBytes) {
  constexpr uint64_t kMiB = uint64_t(1) << 20;
  const uint64_t workspace = requestedBytes ? requestedBytes : std::clamp<uint64_t>(arenaBytes / 32, 128 * kMiB, 1024 * kMiB);
  return workspace + fusedReserveBytes(func);
}

uint64_t plannedPeakBytes(func::FuncOp func, uint64_t arenaBytes, uint64_t requestedWorkspaceBytes) {
  return arenaBytes + bytesBesideArena(func) + workspaceLimitBytes(func, arenaBytes, requestedWorkspaceBytes);
}

Operation *lastLoss(func::FuncOp func) {
  Operation *last = nullptr;
  func.walk([&](SoftmaxCrossEntropyOp op) { last = op; });
  return last;
}

Value StepLiveness::root(Value v) const {
  for (auto it = tiedTo.find(v); it != tiedTo.end(); it = tiedTo.find(v))
    v = it->second;
  return v;
}

FailureOr<StepLiveness> analyzeStepLiveness(func::FuncOp func, bool requireKernels) {
  if (!func.getBody().hasOneBlock())
    return func.emitError("only single-block functions can be planned");
  Block &body = func.getBody().front();
  StepLiveness s;
  for (Operation &op : body) {
    if (llvm::isa<ParameterOp, ConstantOp, func::ReturnOp>(op))
      continue;
    if (requireKernels && !op.hasAttr(castor::attr::kKernel))
      return op.emitError("has no kernel: run castor-select-kernels first");
    s.kernelIndex[&op] = s.kernelCount++;
  }

  auto lastUse = [&](Value v) {
    int64_t last = kStepStart;
    for (Operation *user : v.getUsers()) {
      if (llvm::isa<func::ReturnOp>(user))
        return kStepEnd;
      last = std::max(last, s.kernelIndex.lookup(user));
    }
    return last;
  };
  llvm::DenseMap<Value, size_t> bufferOf;
  for (BlockArgument arg : body.getArguments()) {
    bool state = bool(func.getArgAttr(arg.getArgNumber(), castor::attr::kState));
    bufferOf[arg] = s.values.size();
    s.values.push_back(arg);
    s.lifetimes.push_back({tensorBytes(arg.getType()), kStepStart, state ? kStepEnd : lastUse(arg)});
  }
  // Results written in place (optimizer updates, unscaled gradients) share their operand's
  // buffer, which then lives until the result's last reader. The operand must have no reader
  // after the in-place kernel: it no longer holds its value then. A view (castor.view) shares
  // its operand's buffer too, and both keep reading it.
  for (Operation &op : body) {
    bool source = llvm::isa<ParameterOp, ConstantOp>(op);
    auto inPlace = llvm::dyn_cast<InPlaceOpInterface>(op);
    if (op.hasAttr(castor::attr::kView)) { // castor-plan-views: the result reads its operand's bytes
      Value r = op.getResult(0), operand = op.getOperand(0);
      s.tiedTo[r] = operand;
      BufferLifetime &life = s.lifetimes[bufferOf[s.root(operand)]];
      life.last = std::max(life.last, lastUse(r));
      continue;
    }
    for (Value r : op.getResults()) {
      std::optional<unsigned> tied =
          inPlace ? inPlace.getTiedOperandIndex(llvm::cast<OpResult>(r).getResultNumber()) : std::nullopt;
      if (tied) {
        Value operand = op.getOperand(*tied);
        for (Operation *user : operand.getUsers())
          if (user != &op && !llvm::isa<func::ReturnOp>(user) &&
              s.kernelIndex.lookup(user) > s.kernelIndex.lookup(&op))
            return op.emitError("overwrites operand ") << *tied << " in place, but a later op still reads it";
        s.tiedTo[r] = operand;
        BufferLifetime &life = s.lifetimes[bufferOf[s.root(operand)]];
        life.last = std::max(life.last, lastUse(r));
        continue;
      }
      bufferOf[r] = s.values.size();
      s.values.push_back(r);
      if (source)
        s.lifetimes.push_back({tensorBytes(r.getType()), kStepStart, kStepEnd});
      else
        s.lifetimes.push_back({tensorBytes(r.getType()), s.kernelIndex.lookup(&op),
                               std::max(s.kernelIndex.lookup(&op), lastUse(r))});
    }
  }
  return s;
}

} // namespace castor
