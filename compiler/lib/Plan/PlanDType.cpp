#include "castor/Plan/PlanDType.h"

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

} // namespace castor
