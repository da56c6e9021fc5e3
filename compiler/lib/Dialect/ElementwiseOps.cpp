// The unary element-wise ops of ElementwiseOps.td: their verifiers (the VJPs are the .td's own,
// through buildElementwiseVjp) and their registration.
#include "castor/Dialect/Autodiff.h"
#include "castor/Dialect/CastorOps.h"

using namespace mlir;
using namespace castor;

LogicalResult ClipOp::verify() {
  if (getMin() && getMax() && getMin()->convertToDouble() > getMax()->convertToDouble())
    return emitOpError("min ") << getMin()->convertToDouble() << " is greater than max "
                               << getMax()->convertToDouble();
  return success();
}

// Refused here, at import, rather than by the plan validator (elementwise_ops.h's Celu::check).
LogicalResult CeluOp::verify() {
  if (getAlpha().convertToDouble() == 0.0)
    return emitOpError("alpha must be non-zero: the formula divides by it");
  return success();
}

#define GET_OP_CLASSES
#include "castor/Dialect/ElementwiseOps.cpp.inc"

void CastorDialect::registerElementwiseOps() {
  addOperations<
#define GET_OP_LIST
#include "castor/Dialect/ElementwiseOps.cpp.inc"
      >();
}
