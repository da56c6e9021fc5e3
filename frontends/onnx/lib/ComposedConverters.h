// Converters of ONNX ops that Castor composes from its own ops (ComposedConverters.cpp): the
// composition's gradient is the op's, so no new kernel or VJP is needed.
#pragma once

#include "NodeImporter.h"

namespace castor::onnx_import {

// PRelu: relu(x) + slope * (x - relu(x)), the slope a trained tensor broadcast over x.
mlir::LogicalResult convertPRelu(NodeImporter &n);

// ReduceMean, ReduceSum, ReduceMax and ReduceL2 over axes known at import, keepdims 0 or 1: the
// input transposed so that the reduced axes come last and viewed as [1, M, K, 1], then a global
// average pool (times K for the sum; of x * x, then sqrt, for L2) or a max pool of window [K, 1].
// Their gradients are those ops': ReduceMax's goes whole to the first maximum of each reduced
// slice in row-major order (max_pool2d_backward's choice, as torch.max(dim) picks one index),
// where PyTorch's amax splits it evenly among tied maxima; ReduceL2's is NaN where a slice is all
// zeros (sqrt's infinite derivative times 0), where PyTorch's norm gives 0.
mlir::LogicalResult convertReduceMean(NodeImporter &n);
mlir::LogicalResult convertReduceSum(NodeImporter &n);
mlir::LogicalResult convertReduceMax(NodeImporter &n);
mlir::LogicalResult convertReduceL2(NodeImporter &n);

// Conv with a 1-D filter [K, C/group, k] on x [N, C, L] (its operands already imported): the 2-D
// convolution of x viewed as [N, C, 1, L].
mlir::LogicalResult convertConv1d(NodeImporter &n, mlir::Value x, mlir::Value w);

// InstanceNormalization of x [N, C, D1, ...] with scale and bias [C]: layer_norm of x viewed as
// [N, C, D1 * ...] with a constant unit scale and zero bias, then the trained scale and bias
// broadcast as [C, 1] (mul and add).
mlir::LogicalResult convertInstanceNorm(NodeImporter &n);

// GroupNormalization of x [N, C, ...] in num_groups groups: layer_norm of x viewed as
// [N, G, C / G * ...] with a constant unit scale and zero bias, then the trained scale and bias,
// per group in opset 18 ([G], broadcast as [G, 1] over that view) and per channel from opset 21
// ([C], broadcast as [C, 1, ...] over x's shape).
mlir::LogicalResult convertGroupNorm(NodeImporter &n);

// Resize (ResizeConverter.cpp) with scales or sizes known at import. Nearest mode by integer
// factors whose coordinate transformation and rounding read input index o / factor for output
// index o: x viewed as [..., D, 1, ...] plus zeros of [..., D, factor, ...], viewed as
// [..., D * factor, ...]; its gradient sums each element's copies. Linear mode (bilinear on H and
// W, or any axes): along each resized axis a product with a constant [in, out] interpolation
// matrix (that axis moved last and back), so its gradient is the products' transposed.
mlir::LogicalResult convertResize(NodeImporter &n);

// Tile with repeats known at import: x viewed as [1, D0, 1, D1, ...] (a 1 before each repeated
// axis) plus zeros of [r0, D0, r1, D1, ...], viewed as [r0 * D0, r1 * D1, ...]; its gradient sums
// the copies.
mlir::LogicalResult convertTile(NodeImporter &n);

// Einsum (EinsumConverter.cpp) of one or two operands without repeated labels within an operand:
// labels summed in one operand alone go first (a product with ones), then the two operands are
// transposed and viewed as [batch..., M, K] and [batch..., K, N] for one (batched) matmul, whose
// result is viewed and transposed to the output's labels; one operand alone is a transpose.
mlir::LogicalResult convertEinsum(NodeImporter &n);

} // namespace castor::onnx_import
