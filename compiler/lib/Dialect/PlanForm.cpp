#include "castor/Dialect/PlanForm.h"

#include "castor/Dialect/CastorOps.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace castor {

mlir::FailureOr<plan::DType> planDtypeOf(mlir::Type element) {
  if (element.isF32())
    return plan::F32;
  if (element.isF16())
    return plan::F16;
  if (element.isBF16())
    return plan::BF16;
  if (element.isF64())
    return plan::F64;
  if (element.isInteger(64))
    return plan::I64;
  return mlir::failure();
}

mlir::FailureOr<plan::Attr> planAttrOf(mlir::Attribute a) {
  if (auto arr = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(a))
    return plan::intsAttr(std::vector<int64_t>(arr.asArrayRef().begin(), arr.asArrayRef().end()));
  if (auto b = llvm::dyn_cast<mlir::BoolAttr>(a))
    return plan::boolAttr(b.getValue());
  if (llvm::isa<mlir::UnitAttr>(a)) // present: true (absent unit attributes are not listed)
    return plan::boolAttr(true);
  if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(a))
    return plan::intAttr(i.getInt());
  if (auto f = llvm::dyn_cast<mlir::FloatAttr>(a))
    return plan::floatAttr(f.getValueAsDouble());
  if (auto r = llvm::dyn_cast<ReductionAttr>(a))
    return plan::stringAttr(stringifyReduction(r.getValue()).str());
  if (auto s = llvm::dyn_cast<mlir::StringAttr>(a))
    return plan::stringAttr(s.str());
  return mlir::failure();
}

} // namespace castor
