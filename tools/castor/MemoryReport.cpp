// The memory report of `castor compile --report` (MemoryReport.h).
#include "MemoryReport.h"

#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Plan/StepLiveness.h"

#include "mlir/IR/Location.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <optional>

namespace castor::cli {

using namespace mlir;

namespace {

// The kinds the planned memory splits into (workspace: the plan's limit, beside the arena).
enum Kind { Parameters, OptimizerState, Inputs, Activations, Saved, Recomputed, Gradients, kKinds };
constexpr std::array<const char *, kKinds> kKindNames = {"parameters",        "optimizer state", "inputs",
                                                         "forward temporaries", "saved activations", "recomputed",
                                                         "gradients"};

std::string nameOf(Location loc) {
  if (auto named = llvm::dyn_cast<NameLoc>(loc))
    return named.getName().str();
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (std::string n = nameOf(l); !n.empty())
        return n;
  return {};
}

std::string typeText(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

} // namespace

std::string writeMemoryReport(func::FuncOp step, const std::string &dir, const char *argv0, bool picture) {
  auto liveness = analyzeStepLiveness(step, /*requireKernels=*/true);
  if (failed(liveness))
    return "the step has no memory plan to report";
  // The backward starts after the last loss (as castor-recompute sees it).
  std::optional<int64_t> boundary;
  if (Operation *loss = lastLoss(step))
    boundary = liveness->kernelIndex.lookup(loss);
  const int64_t kernels = liveness->kernelCount;
  const int64_t last = boundary ? *boundary : kernels;

  std::vector<Kind> kindOf(liveness->values.size());
  for (size_t i = 0; i < liveness->values.size(); ++i) {
    Value v = liveness->values[i];
    const BufferLifetime &life = liveness->lifetimes[i];
    if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
      if (!step.getArgAttr(arg.getArgNumber(), castor::attr::kState))
        kindOf[i] = Inputs;
      else
        kindOf[i] = step.getArgAttr(arg.getArgNumber(), castor::attr::kTrainable) ? Parameters : OptimizerState;
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (llvm::isa<ParameterOp, ConstantOp>(def))
      kindOf[i] = Parameters;
    else if (def->hasAttr(castor::attr::kRecomputed))
      kindOf[i] = Recomputed;
    else if (life.first <= last)
      kindOf[i] = life.last > last ? Saved : Activations;
    else
      kindOf[i] = Gradients;
  }

  // Live bytes of each kind at each kernel (lifetimes are inclusive ranges; -1 and INT64_MAX
  // stand for the start and end of the step).
  std::vector<std::array<uint64_t, kKinds>> live(size_t(kernels), std::array<uint64_t, kKinds>{});
  for (size_t i = 0; i < liveness->values.size(); ++i) {
    const BufferLifetime &life = liveness->lifetimes[i];
    int64_t a = std::max<int64_t>(life.first, 0), b = std::min<int64_t>(life.last, kernels - 1);
    for (int64_t k = a; k <= b; ++k)
      live[size_t(k)][kindOf[i]] += life.bytes;
  }
  auto arenaAttr = step->getAttrOfType<IntegerAttr>(castor::attr::kArenaBytes);
  auto workspaceAttr = step->getAttrOfType<IntegerAttr>(castor::attr::kWorkspaceLimit);
  const uint64_t arena = arenaAttr ? uint64_t(arenaAttr.getInt()) : 0;
  const uint64_t workspace =
      workspaceAttr ? workspaceLimitBytes(step, arena, uint64_t(workspaceAttr.getInt())) : 0;
  const uint64_t beside = bytesBesideArena(step);

  llvm::json::Array kernelRows;
  int64_t peakKernel = 0;
  uint64_t peakLive = 0;
  std::vector<Operation *> kernelOps(size_t(kernels), nullptr);
  for (auto &[op, index] : liveness->kernelIndex)
    kernelOps[size_t(index)] = op;
  for (int64_t k = 0; k < kernels; ++k) {
    llvm::json::Object bytes;
    uint64_t total = 0;
    for (int kind = 0; kind < kKinds; ++kind) {
      bytes[kKindNames[size_t(kind)]] = int64_t(live[size_t(k)][size_t(kind)]);
      total += live[size_t(k)][size_t(kind)];
    }
    if (total > peakLive)
      peakLive = total, peakKernel = k;
    Operation *op = kernelOps[size_t(k)];
    kernelRows.push_back(llvm::json::Object{{"index", k},
                                            {"op", op->getName().stripDialect().str()},
                                            {"name", nameOf(op->getLoc())},
                                            {"bytes", std::move(bytes)}});
  }

  // Every value the backward reads that the forward computed: kept (saved) or recomputed.
  auto policyAttr = step->getAttrOfType<StringAttr>(castor::attr::kRecomputePolicy);
  const std::string policy = policyAttr ? policyAttr.str() : "none";
  llvm::json::Array saved;
  uint64_t recomputeFlops = 0;
  for (size_t i = 0; i < liveness->values.size(); ++i) {
    if (kindOf[i] != Saved && kindOf[i] != Recomputed)
      continue;
    Value v = liveness->values[i];
    Operation *def = v.getDefiningOp();
    auto type = llvm::cast<RankedTensorType>(v.getType());
    const bool cheap = llvm::isa<RecomputeOpInterface>(def);
    std::string why;
    int64_t flops = 0;
    if (kindOf[i] == Recomputed) {
      flops = type.getNumElements() * llvm::cast<RecomputeOpInterface>(def).getRecomputeFlopsPerElement();
      recomputeFlops += uint64_t(flops);
      why = "recomputed before its first backward reader (policy " + policy + ")";
    } else if (!cheap) {
      why = "kept: " + def->getName().stripDialect().str() + " output (compute-bound, never recomputed)";
    } else {
      why = policy == "auto" ? "kept: the budget is met without recomputing it" : "kept: recompute policy " + policy;
    }
    if (llvm::isa<BatchNormReluTrainingOp, BatchNormReluTrainingBackwardOp>(def))
      why += "; fused kernel output";
    Type element = type.getElementType();
    if (element.isF16() || element.isBF16())
      why += "; low precision by the autocast policy";
    saved.push_back(llvm::json::Object{{"name", nameOf(def->getLoc())},
                                       {"op", def->getName().stripDialect().str()},
                                       {"type", typeText(type)},
                                       {"bytes", int64_t(liveness->lifetimes[i].bytes)},
                                       {"status", kindOf[i] == Recomputed ? "recomputed" : "saved"},
                                       {"why", why},
                                       {"recompute_flops", flops}});
  }

  llvm::json::Array kinds;
  for (const char *k : kKindNames)
    kinds.push_back(k);
  llvm::json::Object report{
      {"function", step.getSymName().str()},
      {"recompute_policy", policy},
      {"kinds", std::move(kinds)},
      {"arena_bytes", int64_t(arena)},
      {"workspace_bytes", int64_t(workspace)},
      {"beside_arena_bytes", int64_t(beside)},
      {"predicted_peak_bytes", int64_t(arena + beside + workspace)},
      {"backward_starts_after_kernel", boundary ? *boundary : -1},
      {"peak", llvm::json::Object{{"kernel", peakKernel}, {"live_bytes", int64_t(peakLive)}}},
      {"recompute_flops", int64_t(recomputeFlops)},
      {"kernels", std::move(kernelRows)},
      {"saved", std::move(saved)},
  };
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return "cannot create " + dir + ": " + ec.message();
  llvm::SmallString<256> json(dir);
  llvm::sys::path::append(json, "memory.json");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(json, ec);
    if (ec)
      return "cannot write " + std::string(json) + ": " + ec.message();
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
  }

  if (!picture)
    return {};
  // The picture: castor-plot-memory.py beside this executable, run by python3.
  std::string self = llvm::sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&writeMemoryReport));
  llvm::SmallString<256> script(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(script, "castor-plot-memory.py");
  auto python = llvm::sys::findProgramByName("python3");
  if (!python)
    return "python3 not found: memory.json written, no picture";
  std::string error;
  llvm::StringRef args[] = {*python, script, dir};
  if (llvm::sys::ExecuteAndWait(*python, args, std::nullopt, {}, 0, 0, &error) != 0)
    return "castor-plot-memory.py failed" + (error.empty() ? std::string() : ": " + error) +
           " (memory.json is written; the picture needs matplotlib)";
  return {};
}

} // namespace castor::cli
