#include "castor/Dialect/ShapeInference.h"

#include "mlir/IR/Operation.h"

#include <cmath>

using namespace mlir;

namespace castor {

shape::Shape shapeOf(Type type) {
  auto ranked = llvm::cast<RankedTensorType>(type);
  return shape::Shape(ranked.getShape().begin(), ranked.getShape().end());
}

shape::Shape shapeOf(Value value) { return shapeOf(value.getType()); }

shape::ElementType elementTypeOf(Value value) {
  Type t = getElementTypeOrSelf(value.getType());
  if (t.isF64())
    return shape::ElementType::F64;
  if (t.isF32())
    return shape::ElementType::F32;
  if (t.isF16())
    return shape::ElementType::F16;
  if (t.isBF16())
    return shape::ElementType::BF16;
  return shape::ElementType::Other;
}

std::vector<shape::ElementType> elementTypesOf(ValueRange values) {
  std::vector<shape::ElementType> types;
  for (Value v : values)
    types.push_back(elementTypeOf(v));
  return types;
}

LogicalResult checkRule(std::optional<Location> loc, const std::string &error) {
  return error.empty() ? success() : emitOptionalError(loc, error);
}

LogicalResult appendInferred(std::optional<Location> loc, const shape::ShapeResult &rule, Type elementType,
                             SmallVectorImpl<Type> &inferred) {
  if (!rule)
    return emitOptionalError(loc, rule.error);
  inferred.push_back(RankedTensorType::get(rule.shape, elementType));
  return success();
}

LogicalResult requireSameElementType(std::optional<Location> loc, ValueRange values, StringRef what) {
  if (values.empty())
    return success();
  Type first = getElementTypeOrSelf(values.front().getType());
  for (Value v : values.drop_front())
    if (getElementTypeOrSelf(v.getType()) != first)
      return emitOptionalError(loc, what, " must share one element type, got ", first, " and ",
                               getElementTypeOrSelf(v.getType()));
  return success();
}

FailureOr<SmallVector<Value>> batchNormData(std::optional<Location> loc, Value input, Value residual) {
  SmallVector<Value> data{input};
  if (residual) {
    if (residual.getType() != input.getType())
      return emitOptionalError(loc, "residual must have the input's type, got ", residual.getType(), " and ",
                               input.getType());
    data.push_back(residual);
  }
  return data;
}

LogicalResult verifyClipMax(Operation *op, FloatAttr clipMaxAttr, bool residual) {
  if (!clipMaxAttr)
    return success();
  const double clipMax = clipMaxAttr.getValueAsDouble();
  if (!(clipMax > 0) || !std::isfinite(clipMax))
    return op->emitOpError("clip_max must be positive and finite");
  if (residual)
    return op->emitOpError("clip_max takes no residual");
  return success();
}

} // namespace castor
