// Castor's own fused batch-norm-ReLU kernels (batch_norm_relu.cu) for channels-last data: the
// training forward y = relu(batch_norm(x) [+ z]) with its batch statistics, and its backward
// (the ReLU's gradient, the batch-norm gradients, the residual's gradient), each as a per-channel
// reduction over the rows (N*H*W) and one element-wise pass. Data f32, f16 or bf16 (one dtype),
// per-channel tensors f32. The way the fused op takes where cuDNN's fused kernel does not run
// (bf16 data, C not a multiple of 4) or is slower (cudnn/batch_norm_relu.cpp times them).
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

// Workspace both passes need for `rows` x `C` data (per-block partial statistics and per-channel
// coefficients).
size_t bnReluWorkspaceBytes(int64_t rows, int64_t C);

// x, z (z.p null: no residual), scale, bias -> y, mean, inv_std (1/sqrt(biased var + eps)).
// t = (x - mean) inv_std scale + bias is rounded to the data dtype before z is added, as the
// unfused kernels round it; mean and variance by Welford's method in fp32, merged per channel.
// y = relu(t [+ z]) with an infinite clipMax; with a finite one, ReLU6's clip(t, 0, clipMax)
// (then no residual).
// With `mask` (bnReluMaskBytes of device memory; relu only), the ReLU's mask is recorded there
// for a backward that reads it instead of y.
cudaError_t bnReluForward(Ref x, Ref z, const float *scale, const float *bias, Ref y, float *mean, float *invStd,
                          uint8_t *mask, int64_t rows, int64_t C, double eps, float clipMax, void *workspace,
                          cudaStream_t s);

// Bytes of the ReLU's mask a forward records for `rows` x `C` data of dtype dt: a byte per pack of
// a row (an eighth of the data's bytes for f16/bf16 with C a multiple of 8).
size_t bnReluMaskBytes(int dt, int64_t rows, int64_t C);

// The same forward with x's per-channel sum and sum of squares given (sums [2][C] over the rows,
// from a convolution's epilogue: cudnn/convolution_stats.cpp) instead of a pass over x: one
// element-wise pass. mean and inv_std from E[x] and E[x^2] - E[x]^2 (in fp64 from the fp32 sums).
// workspace: C floats.
cudaError_t bnReluForwardFromSums(Ref x, Ref z, const float *scale, const float *bias, const float *sums, Ref y,
                                  float *mean, float *invStd, uint8_t *mask, int64_t rows, int64_t C, double eps,
                                  float clipMax, void *workspace, cudaStream_t s);

// The plain batch norm's training forward (no residual, no activation) from the sums, as
// bnReluForwardFromSums computes it: y = (x - mean) scale inv_std + bias rounded to the data dtype.
// workspace: C floats.
cudaError_t bnForwardFromSums(Ref x, const float *scale, const float *bias, const float *sums, Ref y, float *mean,
                              float *invStd, int64_t rows, int64_t C, double eps, void *workspace, cudaStream_t s);

// batch_norm_apply: x, z (z.p null: no residual), scale, bias, mean, inv_std -> y for x = [A, C, B]
// (channels last: B = 1), t = (x - mean) scale inv_std + bias rounded to the data dtype, then
// + z (rounded), then when `relu` relu (an infinite clipMax) or ReLU6's clip(t, 0, clipMax) (no
// z). `coef` is C floats of device scratch.
cudaError_t bnApply(Ref x, Ref z, const float *scale, const float *bias, const float *mean, const float *invStd,
                    Ref y, int64_t A, int64_t C, int64_t B, bool relu, float clipMax, float *coef, cudaStream_t s);

// dy, x, y, scale, bias, mean, inv_std -> dx, dscale, dbias, dz (dz.p null: none). g = dy where
// y > 0. With y.p null (a forward without residual, run by bnReluForward), where the normalised
// value t > 0 instead, t recomputed from x, mean, inv_std, scale and bias bit for bit as the
// forward computed it: the backward then reads two tensors a pass instead of three. With a finite
// clipMax (ReLU6's forward; y.p must be null), where 0 <= t <= clipMax (clip_backward's rule).
// With `mask` instead of y (what the forward recorded; y.p null), where its bit is set.
cudaError_t bnReluBackward(Ref dy, Ref x, Ref y, const uint8_t *mask, const float *scale, const float *bias,
                           const float *mean, const float *invStd, Ref dx, Ref dz, float *dscale, float *dbias,
                           int64_t rows, int64_t C, float clipMax, void *workspace, cudaStream_t s);

} // namespace castor::cuda
