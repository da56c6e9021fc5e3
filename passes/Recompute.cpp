// castor-recompute: values of cheap ops (RecomputeOpInterface) that the backward reads are
// computed again just before their first backward reader instead of staying alive from the
// forward; `auto` picks the fewest such values whose planned peak fits a memory budget.
#include "RecomputeCopies.h"

#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Plan/StepLiveness.h"
#include "castor/Support/OptionChoices.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <numeric>

namespace castor {
#define GEN_PASS_DEF_CASTORRECOMPUTE
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// A value the backward reads that a cheap op computes: result `result` of the `op`-th op.
struct Candidate {
  size_t op;
  unsigned result;
  uint64_t bytes;
  double seconds; // what recomputing it costs: its estimated time (roofline)
};

} // namespace

uint64_t castor::parseByteSize(StringRef text) {
  text = text.trim();
  struct Unit {
    StringRef suffix;
    double factor;
  };
  const Unit units[] = {{"GiB", double(1ull << 30)}, {"MiB", double(1ull << 20)}, {"KiB", 1024.0},
                        {"GB", 1e9},                 {"MB", 1e6},                 {"KB", 1e3},
                        {"B", 1.0}};
  double factor = 1.0;
  for (const Unit &u : units)
    if (text.consume_back(u.suffix)) {
      factor = u.factor;
      break;
    }
  double value = 0;
  if (text.trim().getAsDouble(value) || !(value > 0))
    return 0;
  return uint64_t(value * factor);
}

std::string castor::checkRecomputeOptions(StringRef policy, StringRef memoryBudget) {
  if (std::string error = choices::checkChoice("recompute policy", policy, choices::kRecomputePolicies);
      !error.empty())
    return error + ", got '" + policy.str() + "'";
  if (policy == "auto" && !parseByteSize(memoryBudget))
    return "recompute policy auto needs a memory budget such as 6GiB, got '" + memoryBudget.str() + "'";
  if (policy != "auto" && !memoryBudget.empty())
    return "a memory budget needs the recompute policy auto, not " + policy.str();
  return {};
}

namespace {

std::string gib(uint64_t bytes) {
  if (bytes < (1ull << 20))
    return llvm::formatv("{0} bytes", bytes).str();
  if (bytes < (1ull << 30))
    return llvm::formatv("{0:F1} MiB", double(bytes) / double(1ull << 20)).str();
  return llvm::formatv("{0:F2} GiB", double(bytes) / double(1ull << 30)).str();
}

std::vector<castor::RecomputedValue> valuesOf(ArrayRef<Candidate> chosen) {
  std::vector<castor::RecomputedValue> values;
  for (const Candidate &c : chosen)
    values.push_back({c.op, c.result});
  return values;
}

struct RecomputePass : castor::impl::CastorRecomputeBase<RecomputePass> {
  using CastorRecomputeBase::CastorRecomputeBase;

  // The planned peak of `f` with `chosen` recomputed: the arena plus the bytes outside it.
  FailureOr<uint64_t> peakWith(func::FuncOp f, size_t boundary, ArrayRef<Candidate> chosen) {
    func::FuncOp trial = f.clone();
    castor::recomputeInBackward(trial, boundary, valuesOf(chosen));
    auto liveness = castor::analyzeStepLiveness(trial, /*requireKernels=*/false);
    uint64_t peak = 0;
    if (succeeded(liveness))
      peak = castor::plannedPeakBytes(trial, castor::planArena(liveness->lifetimes, uint64_t(alignment)).arenaBytes,
                                      uint64_t(workspaceBytes));
    trial.erase();
    if (failed(liveness))
      return failure();
    return peak;
  }

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (std::string error = castor::checkRecomputeOptions(policy, memoryBudget); !error.empty()) {
      f.emitError(error);
      return signalPassFailure();
    }
    const uint64_t budget = policy == "auto" ? castor::parseByteSize(memoryBudget) : 0;
    if (f.isExternal())
      return;
    f->setAttr(castor::attr::kRecomputePolicy, StringAttr::get(&getContext(), policy));
    if (policy == "none")
      return;
    if (!f.getBody().hasOneBlock()) {
      f.emitError("only single-block functions can be recomputed");
      return signalPassFailure();
    }

    // The backward starts after the last loss: every forward (each micro-batch's) precedes it.
    std::vector<Operation *> ops = castor::opsOf(f);
    std::optional<size_t> boundary;
    if (Operation *loss = castor::lastLoss(f))
      boundary = size_t(std::find(ops.begin(), ops.end(), loss) - ops.begin());
    if (!boundary) {
      f.emitError("recompute needs a training step (no loss in '") << f.getSymName() << "')";
      return signalPassFailure();
    }

    llvm::DenseMap<Operation *, size_t> position;
    for (size_t i = 0; i < ops.size(); ++i)
      position[ops[i]] = i;
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < *boundary; ++i) {
      auto cheap = llvm::dyn_cast<castor::RecomputeOpInterface>(ops[i]);
      if (!cheap || (policy == "cheap" && !cheap.isCheapToRecompute()))
        continue;
      for (OpResult r : ops[i]->getResults()) {
        auto type = llvm::dyn_cast<RankedTensorType>(r.getType());
        if (!type || !llvm::isa<FloatType>(type.getElementType()))
          continue;
        bool late = false, returned = false;
        for (Operation *user : r.getUsers()) {
          returned |= llvm::isa<func::ReturnOp>(user);
          late |= position.lookup(user) > *boundary;
        }
        if (!late || returned)
          continue;
        // Statistics (a batch norm's mean) cannot be recomputed alone: ask the op.
        OpBuilder probe(ops[i]);
        SmallVector<Value> operands(ops[i]->getOperands());
        Value c = cheap.buildRecompute(probe, r.getResultNumber(), operands);
        if (!c)
          continue;
        c.getDefiningOp()->erase();
        // The copy's time on a roofline: it reads its operands and writes its result (memory),
        // or does its arithmetic (compute), whichever takes longer, plus a kernel launch.
        uint64_t traffic = castor::tensorBytes(type);
        for (Value w : ops[i]->getOperands())
          traffic += castor::tensorBytes(w.getType());
        const int64_t flops = type.getNumElements() * cheap.getRecomputeFlopsPerElement();
        const double seconds = std::max(double(traffic) / (bandwidthGBs * 1e9), double(flops) / (peakTflops * 1e12)) +
                               launchMicroseconds * 1e-6;
        candidates.push_back({i, r.getResultNumber(), castor::tensorBytes(type), seconds});
      }
    }

    Builder b(&getContext());
    std::vector<Candidate> chosen = candidates;
    if (policy == "auto") {
      // Greedy by bytes saved per flop added (then the largest first): the prefix of that order
      // with the smallest length whose planned peak fits the budget, by bisection.
      // Greedy by bytes saved per second of recomputation (the largest first among equals).
      std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate &a, const Candidate &b) {
        double ra = double(a.bytes) / a.seconds, rb = double(b.bytes) / b.seconds;
        return ra != rb ? ra > rb : a.bytes > b.bytes;
      });
      auto peakOfPrefix = [&](size_t k) { return peakWith(f, *boundary, ArrayRef(candidates).take_front(k)); };
      // The shortest prefix of that order that fits: prefixes of doubling length until one fits,
      // then bisection between it and the last that did not. (The peak mostly falls as the
      // prefix grows; where copies chain it can rise, which the search tolerates but does not
      // optimise.)
      // The shortest prefix of that order that fits: prefixes at a stride of about 1/32 of the
      // candidates until one fits, then bisection between it and the last that did not. The
      // peak falls as the prefix grows until copies start to chain (a copy's operand a copy
      // too, back through the residual adds), and then rises again: a search by doubling would
      // step over the dip.
      auto none = peakOfPrefix(0);
      if (failed(none))
        return signalPassFailure();
      uint64_t smallest = *none;
      std::optional<size_t> fits;
      size_t below = 0; // a prefix length that does not fit
      const size_t stride = std::max<size_t>(1, (candidates.size() + 31) / 32);
      if (*none <= budget)
        fits = 0;
      for (size_t k = std::min(stride, candidates.size()); !fits && k > below; k = std::min(k + stride, candidates.size())) {
        auto p = peakOfPrefix(k);
        if (failed(p))
          return signalPassFailure();
        smallest = std::min(smallest, *p);
        if (*p <= budget)
          fits = k;
        else
          below = k;
      }
      if (!fits) {
        f.emitError("no recompute schedule fits the memory budget of ")
            << gib(budget) << ": the smallest planned peak is " << gib(smallest) << " (" << gib(*none)
            << " without recompute; " << candidates.size() << " values can be recomputed)";
        return signalPassFailure();
      }
      while (*fits > below + 1) {
        size_t mid = (below + *fits) / 2;
        auto p = peakOfPrefix(mid);
        if (failed(p))
          return signalPassFailure();
        if (*p <= budget)
          fits = mid;
        else
          below = mid;
      }
      const size_t hi = *fits;
      chosen.assign(candidates.begin(), candidates.begin() + long(hi));
    }
    const int64_t flops = castor::recomputeInBackward(f, *boundary, valuesOf(chosen));
    f->setAttr(castor::attr::kRecomputedValues, b.getI64IntegerAttr(int64_t(chosen.size())));
    f->setAttr(castor::attr::kRecomputeFlops, b.getI64IntegerAttr(flops));
  }
};

} // namespace
