// Small builders shared by the converters that compose an ONNX op from castor ops (views,
// transposes, products with constant matrices): each creates its op through the NodeImporter, so
// a verifier failure becomes the node's error.
#pragma once

#include "NodeImporter.h"

#include <string>

namespace castor::onnx_import {

inline mlir::RankedTensorType typeOf(mlir::Value v) { return llvm::cast<mlir::RankedTensorType>(v.getType()); }

// "[2, 3, 4]"
std::string shapeText(mlir::RankedTensorType t);

// The single result of a created op, or failure.
template <typename OpT> mlir::FailureOr<mlir::Value> resultOf(mlir::FailureOr<OpT> op) {
  if (mlir::failed(op))
    return mlir::failure();
  return op->getResult();
}

// x viewed as `dims` (x itself when it has that shape already).
mlir::FailureOr<mlir::Value> reshapeTo(NodeImporter &n, mlir::Value x, llvm::ArrayRef<int64_t> dims);

// x with its axes permuted (x itself for the identity permutation).
mlir::FailureOr<mlir::Value> transposeBy(NodeImporter &n, mlir::Value x, llvm::ArrayRef<int64_t> perm);

// x with each element repeated along each axis: x viewed with a 1 inserted before each axis
// (`repeatOuter`: Tile's copies of the whole axis) or after it (Resize's copies of each element),
// a sum with zeros of the shape with each such 1 made that axis' factor, viewed as x's shape with
// each axis times its factor. The sum's gradient (reduce_sum_to) adds the copies back.
mlir::FailureOr<mlir::Value> repeatAxes(NodeImporter &n, mlir::Value x, llvm::ArrayRef<int64_t> factors,
                                        bool repeatOuter);

} // namespace castor::onnx_import
