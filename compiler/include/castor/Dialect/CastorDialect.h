// The castor dialect: Castor's graph-level IR.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <string>

namespace castor {
// See PrecisionOpInterface. Mixed: operand 0 (the data) keeps its type, the other floating-point
// operands (parameters, statistics) are f32 when the data is f16 or bf16.
enum class PrecisionClass { LowPrecision, FullPrecision, Neutral, Mixed };
} // namespace castor

#include "castor/Dialect/CastorDialect.h.inc"
#include "castor/Dialect/CastorEnums.h.inc"
#include "castor/Dialect/CastorInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "castor/Dialect/CastorAttrs.h.inc"
