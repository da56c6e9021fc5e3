// Bridges castor ops' result-type inference to the shared shape rules.
#pragma once

#include "castor/shape_rules.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"

#include <optional>

namespace castor {

// The static shape of a ranked tensor value.
shape::Shape shapeOf(mlir::Value value);
shape::Shape shapeOf(mlir::Type type);

// The element type of a value, as the shared rules name it.
shape::ElementType elementTypeOf(mlir::Value value);
std::vector<shape::ElementType> elementTypesOf(mlir::ValueRange values);

// Fails with `error` at `loc` unless it is empty (a shared rule's verdict).
mlir::LogicalResult checkRule(std::optional<mlir::Location> loc, const std::string &error);

// Appends tensor<rule.shape x elementType> to `inferred`, or reports the rule's error at
// `loc` (which carries the op, so the verifier's message names it) and fails.
mlir::LogicalResult appendInferred(std::optional<mlir::Location> loc, const shape::ShapeResult &rule,
                                   mlir::Type elementType, llvm::SmallVectorImpl<mlir::Type> &inferred);

// Fails with a message at `loc` unless all `values` share one element type.
mlir::LogicalResult requireSameElementType(std::optional<mlir::Location> loc, mlir::ValueRange values,
                                           llvm::StringRef what);

// The data operands of a batch norm with an optional residual (null: none): the input, then the
// residual, which must have the input's type (a message at `loc` otherwise).
mlir::FailureOr<llvm::SmallVector<mlir::Value>> batchNormData(std::optional<mlir::Location> loc, mlir::Value input,
                                                              mlir::Value residual);

// A batch norm's ReLU6-type activation, clip(t, 0, clip_max) (no attribute: none): clip_max
// positive and finite, and no residual add before it.
mlir::LogicalResult verifyClipMax(mlir::Operation *op, mlir::FloatAttr clipMaxAttr, bool residual);

} // namespace castor
