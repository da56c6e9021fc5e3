// castor-plan-views: reshapes and transposes that copy nothing (PlanPasses.td).
#include "castor/Dialect/AttributeNames.h"
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/PlanForm.h"
#include "castor/Plan/PlanPasses.h"

#include "plan/plan.h"
#include "plan/storage_order.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

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

// The kernel skeleton of a function, with `views` recorded as views of their first operand.
struct Skeleton {
  KernelSkeleton kernels;
  llvm::DenseSet<Value> writtenInPlace;
  llvm::DenseMap<int, Operation *> opOfKernel;

  Skeleton(func::FuncOp func, const llvm::SetVector<Operation *> &views) {
    for (Operation &op : func.getBody().front()) {
      auto kernel = op.getAttrOfType<StringAttr>(castor::attr::kKernel);
      if (!kernel)
        continue;
      opOfKernel[kernels.plan.kernels_size()] = &op;
      castor::plan::Kernel *k = kernels.plan.add_kernels();
      k->set_op(kernel.str());
      if (auto perm = op.getAttrOfType<DenseI64ArrayAttr>("perm")) { // the storage rule reads a transpose's perm
        castor::plan::IntList *ints = (*k->mutable_attrs())["perm"].mutable_ints();
        for (int64_t d : perm.asArrayRef())
          ints->add_values(d);
      }
      for (Value operand : op.getOperands())
        k->add_inputs(kernels.tensorOf(operand));
      auto inPlace = llvm::dyn_cast<castor::InPlaceOpInterface>(op);
      for (OpResult r : op.getResults()) {
        if (auto tied = inPlace ? inPlace.getTiedOperandIndex(r.getResultNumber()) : std::nullopt) {
          Value operand = op.getOperand(*tied);
          writtenInPlace.insert(operand);
          kernels.ids[r] = kernels.tensorOf(operand);
        }
        uint32_t id = kernels.tensorOf(r);
        k->add_outputs(id);
        if (views.contains(&op))
          kernels.plan.mutable_tensors(int(id))->set_view_of(kernels.tensorOf(op.getOperand(0)));
      }
    }
  }

  const castor::plan::Tensor &tensor(Value v) { return kernels.plan.tensors(int(kernels.ids.lookup(v))); }
};

// What any view needs, whatever its op: activations on both sides, none returned or written in place.
bool mayAlias(Operation *op, const Skeleton &s) {
  Value x = op->getOperand(0), r = op->getResult(0);
  if (llvm::cast<RankedTensorType>(x.getType()).getElementType() !=
      llvm::cast<RankedTensorType>(r.getType()).getElementType())
    return false;
  return !isSource(x) && !isReturned(x) && !isReturned(r) && !s.writtenInPlace.contains(x) &&
         !s.writtenInPlace.contains(r);
}

bool isReshapeLike(Operation *op) { return llvm::isa<castor::ReshapeOp, castor::FlattenOp, castor::IdentityOp>(op); }

bool isChannelsLastTranspose(Operation *op) {
  auto t = llvm::dyn_cast<castor::TransposeOp>(op);
  return t && castor::plan::isChannelsLastPerm(std::vector<int64_t>(t.getPerm().begin(), t.getPerm().end()));
}

struct PlanViewsPass : castor::impl::CastorPlanViewsBase<PlanViewsPass> {
  using CastorPlanViewsBase::CastorPlanViewsBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    llvm::SetVector<Operation *> transposes, reshapes;
    if (this->transposes) {
      Skeleton none(func, {});
      for (Operation &op : func.getBody().front())
        if (op.hasAttr(castor::attr::kKernel) && isChannelsLastTranspose(&op) && mayAlias(&op, none))
          transposes.insert(&op);
    }
    // Transposed views first (they decide the orders of their sides' groups), dropping those
    // whose groups another kernel needs in the other order; then the reshapes whose sides are
    // stored as rows under those orders. Each round only drops views, so it ends.
    for (;;) {
      for (;;) {
        Skeleton withTransposes(func, transposes);
        if (!dropConflicts(withTransposes, transposes)) {
          reshapes = storedAsRowsReshapes(func, withTransposes);
          break;
        }
      }
      llvm::SetVector<Operation *> all = transposes;
      all.insert(reshapes.begin(), reshapes.end());
      Skeleton withAll(func, all);
      if (!dropConflicts(withAll, transposes))
        break;
    }
    Builder b(&getContext());
    for (Operation *op : llvm::concat<Operation *const>(transposes, reshapes))
      op->setAttr(castor::attr::kView, b.getUnitAttr());
  }

  // Drops the transposed views the skeleton's storage orders cannot honour; whether any were.
  static bool dropConflicts(Skeleton &s, llvm::SetVector<Operation *> &transposes) {
    bool dropped = false;
    for (int kernel : castor::plan::conflictingTransposedViews(s.kernels.plan))
      dropped |= transposes.remove(s.opOfKernel.lookup(kernel));
    return dropped;
  }

  // The reshapes, flattens and identities that read their operand's bytes in place: where a
  // rank-4 side's orders differ, the CUDA backend stores it row-major (the other shape reads
  // rows).
  static llvm::SetVector<Operation *> storedAsRowsReshapes(func::FuncOp func, Skeleton &s) {
    const auto rowMajor = castor::plan::rowMajorTensors(s.kernels.plan);
    auto storedAsRows = [&](Value v) {
      const castor::plan::Tensor &t = s.tensor(v);
      return !castor::plan::ordersDiffer(t) || rowMajor.count(t.id());
    };
    llvm::SetVector<Operation *> views;
    for (Operation &op : func.getBody().front())
      if (isReshapeLike(&op) && op.hasAttr(castor::attr::kKernel) && mayAlias(&op, s) &&
          storedAsRows(op.getOperand(0)) && storedAsRows(op.getResult(0)))
        views.insert(&op);
    return views;
  }
};

} // namespace
