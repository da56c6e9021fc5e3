#include "castor/Dialect/CastorDialect.h"
#include "castor/Dialect/CastorOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace castor;

#include "castor/Dialect/CastorDialect.cpp.inc"
#include "castor/Dialect/CastorEnums.cpp.inc"
#include "castor/Dialect/CastorInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "castor/Dialect/CastorAttrs.cpp.inc"

void CastorDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "castor/Dialect/CastorAttrs.cpp.inc"
      >();
  registerNNOps();
  registerTensorOps();
  registerElementwiseOps();
  registerBackwardOps();
  registerOptimizerOps();
  registerFusedOps();
}

Operation *CastorDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type, Location loc) {
  auto typed = llvm::dyn_cast<TypedAttr>(value);
  if (!typed || typed.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, typed);
}
