// What castor compile tells its user beside the plan: notes on the model's BatchNorms before
// a training compile, and the summary of the compiled plan.
#include "Commands.h"
#include "Compile.h"
#include "FusionReport.h"

#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace castor::cli {

void printCompileReport(const plan::Plan &p, mlir::ModuleOp module, const std::string &planPath, double seconds,
                        const std::string &weightsFile) {
  std::map<std::string, int> kernels;
  for (const auto &k : p.kernels())
    ++kernels[k.op()];
  uint64_t paramBytes = 0, trainable = 0;
  for (const auto &param : p.parameters()) {
    paramBytes += p.tensors(int(param.tensor())).bytes();
    trainable += param.trainable();
  }
  uint64_t tensorBytes = 0;
  module.walk([&](mlir::func::FuncOp f) {
    if (auto a = f->getAttrOfType<mlir::IntegerAttr>(castor::attr::kTensorBytes))
      tensorBytes = uint64_t(a.getInt());
  });
  auto mib = [](uint64_t b) { return double(b) / (1024.0 * 1024.0); };
  llvm::errs() << llvm::formatv("compiled {0} -> {1} (target {2}, batch {3}) in {4:F2} s\n", modelFile(), planPath,
                                p.target(), p.batch(), seconds);
  llvm::errs() << llvm::formatv("  kernels: {0}\n", p.kernels_size());
  for (const auto &[op, n] : kernels)
    llvm::errs() << llvm::formatv("    {0,-24} {1}\n", op, n);
  llvm::errs() << llvm::formatv("  parameters: {0} ({1} trainable), {2:F1} MiB\n", p.parameters_size(), trainable,
                                mib(paramBytes));
  llvm::errs() << llvm::formatv("  tensors: {0}, {1:F1} MiB in all; arena {2:F1} MiB ({3:F1}% of all tensors)\n",
                                p.tensors_size(), mib(tensorBytes), mib(p.arena_bytes()),
                                tensorBytes ? 100.0 * double(p.arena_bytes()) / double(tensorBytes) : 0.0);
  if (p.predicted_peak_bytes() > 0)
    llvm::errs() << llvm::formatv("  planned device peak: {0:F1} MiB (arena, inputs and staging, workspace limit "
                                  "{1:F1} MiB with the fused kernels' reserve)\n",
                                  mib(p.predicted_peak_bytes()), mib(p.workspace_limit_bytes()));
  const std::vector<FusedGroup> groups = fusedGroups(p);
  if (!groups.empty()) {
    uint64_t ops = 0, moved = 0, unfused = 0;
    for (const FusedGroup &g : groups) {
      ops += g.ops.size();
      moved += g.bytesMoved;
      unfused += g.unfusedBytesMoved;
    }
    llvm::errs() << llvm::formatv("  fused element-wise groups: {0} of {1} ops, {2:F1} MiB read and written a step "
                                  "(the same ops unfused: {3:F1} MiB)\n",
                                  groups.size(), ops, mib(moved), mib(unfused));
  }
  module.walk([&](mlir::func::FuncOp f) {
    auto values = f->getAttrOfType<mlir::IntegerAttr>(castor::attr::kRecomputedValues);
    auto flops = f->getAttrOfType<mlir::IntegerAttr>(castor::attr::kRecomputeFlops);
    auto policy = f->getAttrOfType<mlir::StringAttr>(castor::attr::kRecomputePolicy);
    if (values && flops && policy)
      llvm::errs() << llvm::formatv("  recompute ({0}): {1} values, {2:F2} GFLOP a step\n", policy.getValue(),
                                    values.getInt(), double(flops.getInt()) / 1e9);
    auto inGroups = f->getAttrOfType<mlir::IntegerAttr>(castor::attr::kRecomputedInGroups);
    auto inGroupsBytes = f->getAttrOfType<mlir::IntegerAttr>(castor::attr::kRecomputedInGroupsBytes);
    if (inGroups && inGroupsBytes)
      llvm::errs() << llvm::formatv(
          "  recomputed in the backward's element-wise groups, not stored: {0} values ({1:F1} MiB)\n",
          inGroups.getInt(), mib(uint64_t(inGroupsBytes.getInt())));
  });
  if (!weightsFile.empty())
    llvm::errs() << "  weights: " << weightsFile << "\n";
}

// What a training compile does with the model's BatchNorms, said once: an eval-mode export's
// inference-form BatchNorm trains differently from the training-mode one, and one whose
// BatchNorms were folded into its convolutions cannot be trained as the original at all.
void noteBatchNormForms(mlir::ModuleOp module, llvm::StringRef mode) {
  int64_t inference = 0, training = 0, folded = 0;
  module.walk([&](mlir::Operation *op) {
    inference += llvm::isa<castor::BatchNormInferenceOp>(op);
    training += llvm::isa<castor::BatchNormTrainingOp>(op);
    // torch.onnx.export names the constants it folds "onnx::<Op>_<n>": a convolution filter so
    // named is a convolution with a BatchNorm folded into it.
    if (auto conv = llvm::dyn_cast<castor::Conv2dOp>(op))
      if (auto filter = conv.getFilter().getDefiningOp<castor::ParameterOp>())
        folded += filter.getName().starts_with("onnx::");
  });
  if (inference > 0 && mode == "as-exported")
    llvm::errs() << llvm::formatv(
        "note: {0} BatchNormalization layer(s) are in inference form (an eval-mode export): they train with "
        "their running statistics frozen, as PyTorch's BatchNorm in eval mode; --batch-norm train trains them "
        "on batch statistics as in training mode\n",
        inference);
  if (inference == 0 && training == 0 && folded > 0)
    llvm::errs() << llvm::formatv(
        "note: the model has no BatchNormalization and {0} convolution(s) whose filters are constants the "
        "exporter folded ('onnx::...'): an eval-mode export folds BatchNorm into the convolutions, and the "
        "result cannot be trained as the original; export with torch.onnx.export(..., "
        "training=torch.onnx.TrainingMode.TRAINING)\n",
        folded);
}

} // namespace castor::cli
