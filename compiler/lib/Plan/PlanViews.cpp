// castor-plan-views: reshapes that copy nothing (PlanPasses.td).
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/PlanForm.h"
#include "castor/Plan/PlanPasses.h"

#include "plan/plan.h"
#include "plan/storage_order.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace castor {
#define GEN_PASS_DEF_CASTORPLANVIEWS
#include "castor/Plan/PlanPasses.h.inc"
} // namespace castor

using namespace mlir;

namespace {

// The step's kernels as the runtime's storage-order rule reads them: op names and operand ids,
// a result written in place naming its operand's tensor (as in the emitted plan).
struct KernelSkeleton {
  castor::plan::Plan plan;
  llvm::DenseMap<Value, uint32_t> ids;

  uint32_t tensorOf(Value v) {
    auto [it, fresh] = ids.try_emplace(v, uint32_t(plan.tensors_size()));
    if (fresh) {
      auto type = llvm::cast<RankedTensorType>(v.getType());
      castor::plan::Tensor *t = plan.add_tensors();
      t->set_id(it->second);
      auto dtype = castor::planDtypeOf(type.getElementType());
      t->set_dtype(succeeded(dtype) ? *dtype : castor::plan::DTYPE_UNSPECIFIED); // the rule reads floats only
      for (int64_t d : type.getShape())
        t->add_shape(d);
    }
    return it->second;
  }
};

bool isSource(Value v) {
  Operation *def = v.getDefiningOp();
  return !def || llvm::isa<castor::ParameterOp, castor::ConstantOp>(def);
}

bool isReturned(Value v) {
  return llvm::any_of(v.getUsers(), [](Operation *u) { return llvm::isa<func::ReturnOp>(u); });
}

struct PlanViewsPass : castor::impl::CastorPlanViewsBase<PlanViewsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    KernelSkeleton skeleton;
    llvm::DenseSet<Value> writtenInPlace;
    for (Operation &op : func.getBody().front()) {
      auto kernel = op.getAttrOfType<StringAttr>(castor::attr::kKernel);
      if (!kernel)
        continue;
      castor::plan::Kernel *k = skeleton.plan.add_kernels();
      k->set_op(kernel.str());
      for (Value operand : op.getOperands())
        k->add_inputs(skeleton.tensorOf(operand));
      auto inPlace = llvm::dyn_cast<castor::InPlaceOpInterface>(op);
      for (OpResult r : op.getResults()) {
        if (auto tied = inPlace ? inPlace.getTiedOperandIndex(r.getResultNumber()) : std::nullopt) {
          Value operand = op.getOperand(*tied);
          writtenInPlace.insert(operand);
          skeleton.ids[r] = skeleton.tensorOf(operand);
        }
        k->add_outputs(skeleton.tensorOf(r));
      }
    }
    const auto rowMajor = castor::plan::rowMajorTensors(skeleton.plan);
    auto storedAsRows = [&](Value v) {
      const castor::plan::Tensor &t = skeleton.plan.tensors(int(skeleton.ids.lookup(v)));
      return !castor::plan::ordersDiffer(t) || rowMajor.count(t.id());
    };

    Builder b(&getContext());
    func.walk([&](Operation *op) {
      if (!llvm::isa<castor::ReshapeOp, castor::FlattenOp, castor::IdentityOp>(op) ||
          !op->hasAttr(castor::attr::kKernel))
        return;
      Value x = op->getOperand(0), r = op->getResult(0);
      if (x.getType() != r.getType() &&
          llvm::cast<RankedTensorType>(x.getType()).getElementType() !=
              llvm::cast<RankedTensorType>(r.getType()).getElementType())
        return;
      if (isSource(x) || isReturned(x) || isReturned(r) || writtenInPlace.contains(x) || writtenInPlace.contains(r))
        return;
      if (!storedAsRows(x) || !storedAsRows(r))
        return;
      op->setAttr(castor::attr::kView, b.getUnitAttr());
    });
  }
};

} // namespace
