// Element-wise kernels (elementwise.cu): conversions, unary/binary/backward element-wise ops with
// broadcasting, fill, dropout.
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"
#include "plan/elementwise_ops.h"
#include "plan/op_registry.h"

namespace castor::cuda {

// Element-wise with numpy broadcasting: output dims, and each input's element strides per output
// dim (0 where it broadcasts), in the output's storage order (rank 0: same shapes, flat indices).
struct Broadcast {
  int rank = 0;
  int64_t out[kMaxRank] = {};
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
};
// Merges adjacent dims that every operand walks contiguously and drops dims of size 1.
Broadcast simplifyBroadcast(const Broadcast &bc);

using plan::OpId;

// x -> y of the same element count in the same storage order (any pair of f32/f16/bf16/f64/i64).
cudaError_t convert(Ref x, Ref y, int64_t n, cudaStream_t s);
// A unary element-wise op of elementwise_ops.h (its attributes in `op`), computed in the
// accumulation type: y = op.forward(x); its gradient dx = op.backward(dy, saved). Instantiated for
// every CASTOR_ELEMENTWISE_OP of ops.def.
template <class Op> cudaError_t unary(const Op &op, Ref x, Ref y, int64_t n, cudaStream_t s);
template <class Op> cudaError_t unaryBackward(const Op &op, Ref dy, Ref saved, Ref dx, int64_t n, cudaStream_t s);
// add or mul (any other op: cudaErrorInvalidValue).
cudaError_t binary(OpId op, Ref a, Ref b, Ref c, const Broadcast &bc, int64_t n, cudaStream_t s);
cudaError_t fill(Ref y, int64_t n, double value, cudaStream_t s);
// y = scale * x broadcast into y (the gemm's addend C before the product is added).
cudaError_t broadcastScaled(Ref x, Ref y, const Broadcast &bc, int64_t n, double scale, cudaStream_t s);

// Dropout. iteration == nullptr: the identity (inference). The mask is keyed by the logical
// (row-major) element index: with channelsLast, y is [N,H,W,C] in storage and logical [N,C,H,W]
// (dims N, C, H, W given); otherwise the storage index is the logical one.
struct DropoutGeometry {
  bool channelsLast = false;
  int64_t N = 0, C = 0, H = 0, W = 0;
  // Logical elements that share one draw (a sample's for drop path; 1 for plain dropout).
  int64_t group = 1;
};
cudaError_t dropout(Ref x, Ref y, int64_t n, const int64_t *iteration, double ratio, int64_t seed, int64_t salt,
                    const DropoutGeometry &g, cudaStream_t s);

} // namespace castor::cuda
