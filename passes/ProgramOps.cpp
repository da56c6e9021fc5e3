// ProgramOps.h.
#include "ProgramOps.h"

#include "castor/Dialect/PlanForm.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

std::optional<castor::plan::ProgramInstruction> castor::programInstructionOf(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumRegions() != 0)
    return std::nullopt;
  const std::string name = op->getName().stripDialect().str();
  if (!plan::isProgramOp(name))
    return std::nullopt;
  auto isFloatTensor = [](Type t) {
    auto type = llvm::dyn_cast<RankedTensorType>(t);
    return type && llvm::isa<FloatType>(type.getElementType()) && succeeded(planDtypeOf(type.getElementType()));
  };
  if (!llvm::all_of(op->getOperandTypes(), isFloatTensor) || !isFloatTensor(op->getResult(0).getType()))
    return std::nullopt;
  plan::ProgramInstruction inst;
  inst.kernel.set_op(name);
  inst.dtype = *planDtypeOf(getElementTypeOrSelf(op->getResult(0).getType()));
  if (auto props = llvm::dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    for (NamedAttribute a : props) {
      auto converted = planAttrOf(a.getValue());
      if (failed(converted))
        return std::nullopt;
      (*inst.kernel.mutable_attrs())[a.getName().str()] = *converted;
    }
  return inst;
}
