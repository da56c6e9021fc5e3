#include "StepFunctions.h"
// castor-data-parallel: gradients averaged across replicas, one all_reduce per bucket.
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Passes/Passes.h"
#include "castor/Plan/StepLiveness.h"
#include "castor/state_names.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace castor {
#define GEN_PASS_DEF_CASTORDATAPARALLEL
#include "castor/Passes/Passes.h.inc"
} // namespace castor

using namespace mlir;
using namespace castor;

namespace {

// Every use of `from` after `op` reads `to` instead.
void replaceLaterUses(ValueRange from, ValueRange to, Operation *op) {
  for (auto [f, t] : llvm::zip(from, to))
    f.replaceUsesWithIf(t, [&](OpOperand &use) { return op->isBeforeInBlock(use.getOwner()); });
}

struct DataParallelPass : castor::impl::CastorDataParallelBase<DataParallelPass> {
  using CastorDataParallelBase::CastorDataParallelBase;

  void runOnOperation() override {
    auto step = castor::trainStepFunction(getOperation());
    if (!step)
      return signalPassFailure();
    if (bucketBytes <= 0) {
      step.emitError("the bucket size must be positive");
      return signalPassFailure();
    }
    Block &body = step.getBody().front();
    if (!body.getOps<AllReduceOp>().empty()) {
      step.emitError("train_step already reduces across replicas");
      return signalPassFailure();
    }

    // The gradients the optimizer applies, in the order the backward computes them.
    SmallVector<Value> grads;
    for (Operation &op : body)
      if (llvm::isa<SgdUpdateOp, AdamwUpdateOp>(op) && !llvm::is_contained(grads, op.getOperand(1)))
        grads.push_back(op.getOperand(1));
    if (grads.empty()) {
      step.emitError("data-parallel training needs an optimizer (its gradients are what replicas share)");
      return signalPassFailure();
    }
    for (Value g : grads)
      if (!g.getDefiningOp()) {
        step.emitError("a gradient is a function argument: nothing computes it in the step");
        return signalPassFailure();
      }
    // A constant gradient (--zero-gradients) is the same on every replica: nothing to reduce.
    llvm::erase_if(grads, [](Value g) { return llvm::isa<ConstantOp, ParameterOp>(g.getDefiningOp()); });
    llvm::stable_sort(grads, [](Value a, Value b) { return a.getDefiningOp()->isBeforeInBlock(b.getDefiningOp()); });

    // Buckets of consecutive gradients up to bucketBytes.
    SmallVector<SmallVector<Value>> buckets;
    uint64_t bytes = 0;
    for (Value g : grads) {
      const uint64_t size = tensorBytes(g.getType());
      if (buckets.empty() || (bytes > 0 && bytes + size > uint64_t(bucketBytes))) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(g);
      bytes += size;
    }
    for (const SmallVector<Value> &bucket : buckets) {
      // Right after the bucket's last gradient (the latest op among them, already sorted).
      OpBuilder b(step.getContext());
      b.setInsertionPointAfter(bucket.back().getDefiningOp());
      auto reduce = b.create<AllReduceOp>(bucket.back().getLoc(), ValueRange(bucket).getTypes(), bucket,
                                          b.getStringAttr("mean"));
      replaceLaterUses(bucket, reduce.getReduced(), reduce);
    }

    if (syncBatchNorm) {
      Builder attrs(step.getContext());
      unsigned synced = 0;
      for (Operation &op : body)
        if (llvm::isa<BatchNormTrainingOp, BatchNormTrainingBackwardOp, BatchNormRunningUpdateOp>(op)) {
          op.setAttr("sync", attrs.getUnitAttr());
          ++synced;
        }
      if (!synced) {
        step.emitError("--sync-batch-norm: the step has no batch norm in training form");
        return signalPassFailure();
      }
    }

    // The logged outputs: the mean loss and the total of correct predictions over the replicas.
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      auto name = step.getResultAttrOfType<StringAttr>(operand.getOperandNumber(), attr::kName);
      if (!name || (name.getValue() != names::kLoss && name.getValue() != names::kCorrect))
        continue;
      Value v = operand.get();
      auto reduce = b.create<AllReduceOp>(ret.getLoc(), TypeRange{v.getType()}, ValueRange{v},
                                          b.getStringAttr(name.getValue() == names::kLoss ? "mean" : "sum"));
      operand.set(reduce.getReduced()[0]);
    }
  }
};

} // namespace
