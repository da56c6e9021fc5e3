// Reductions and batch norm on the own kernels (reduce.cu).
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

// A sum over some dims of x into y: y element o (row-major over `kept` dims) sums the x
// elements at sum(kept index * keptStride) + sum(reduced index * redStride).
struct Reduction {
  int keptRank = 0, redRank = 0;
  int64_t kept[kMaxRank] = {}, keptStride[kMaxRank] = {};
  int64_t red[kMaxRank] = {}, redStride[kMaxRank] = {};
  int64_t outCount = 1, redCount = 1;
};

// The two-stage per-channel reduction over x = [A, C, B] (sum over a and b for each c): stage
// one writes partial sums per (chunk, channel), stage two finishes per channel. The scratch it
// needs, in bytes (a persistent buffer of the kernel; a pure function of A, C, B and the device).
size_t channelScratchBytes(int64_t A, int64_t C, int64_t B);

// y[c] = scale * sum over (a, b) of x, for x = [A, C, B]; scratch of channelScratchBytes.
cudaError_t channelSum(Ref x, Ref y, int64_t A, int64_t C, int64_t B, double scale, void *scratch, cudaStream_t s);
// The general form: any kept/reduced dims (one thread or one block per output).
cudaError_t reduceSum(Ref x, Ref y, const Reduction &r, double scale, cudaStream_t s);

// global_avg_pool: x [N, C, inner] -> y [N, C] (rows: channelsLast false) or x [N, inner, C] ->
// y [N, C] (channelsLast true); and its backward dx = dy / inner.
cudaError_t globalAvgPool(Ref x, Ref y, int64_t N, int64_t C, int64_t inner, bool channelsLast, cudaStream_t s);
cudaError_t globalAvgPoolBackward(Ref dy, Ref dx, int64_t N, int64_t C, int64_t inner, bool channelsLast,
                                  cudaStream_t s);

// Batch norm on the own kernels (batch_norm.cpp falls back to them for dtype combinations cuDNN
// does not take): x = [A, C, B] as above; per-channel tensors of any float dtype. Scratch bytes:
size_t batchNormScratchBytes(int64_t A, int64_t C, int64_t B);
// runMean.p == nullptr: no running statistics (else updated in place, PyTorch's convention).
cudaError_t batchNormTraining(Ref x, Ref gamma, Ref beta, Ref y, Ref mean, Ref invStd, Ref runMean, Ref runVar,
                              int64_t A, int64_t C, int64_t B, double eps, double momentum, void *scratch,
                              cudaStream_t s);
cudaError_t batchNormInference(Ref x, Ref gamma, Ref beta, Ref mean, Ref var, Ref y, int64_t A, int64_t C, int64_t B,
                               double eps, void *scratch, cudaStream_t s);
cudaError_t batchNormBackward(Ref dy, Ref x, Ref gamma, Ref mean, Ref invStd, Ref dx, Ref dScale, Ref dBias,
                              int64_t A, int64_t C, int64_t B, void *scratch, cudaStream_t s);
// `found.p` set: nothing is written when found[0] is nonzero (the step's update is skipped).
cudaError_t batchNormRunningUpdate(Ref runMean, Ref runVar, Ref mean, Ref invStd, Ref found, int64_t C,
                                   double momentum, double eps, int64_t count, cudaStream_t s);
// Many running-statistics updates in one launch (a device array of `n` entries, one block
// each), each computed as batchNormRunningUpdate computes it, all under the one flag `found`.
struct RunningUpdate {
  Ref runMean, runVar, mean, invStd;
  int64_t C = 0, count = 0;
  double momentum = 0.1, eps = 1e-5;
};
cudaError_t batchNormRunningUpdateAll(const RunningUpdate *deviceEntries, int n, Ref found, cudaStream_t s);
// invStd[c] = 1 / sqrt(var[c] + eps) in f32, from any float var: what the graph API's batch-norm
// inference node takes instead of the variance (cudnn/batch_norm_graph.cpp).
cudaError_t batchNormInvStd(Ref var, float *invStd, int64_t C, double eps, cudaStream_t s);

// scratch: ctx.scratch (64 doubles: 4 for the statistics, the rest for the blocks' partial sums
// when `deterministic`, summed in a fixed order instead of by atomicAdd).
cudaError_t gradientStats(Ref g, int64_t n, Ref out, double *scratch, bool deterministic, cudaStream_t s);

} // namespace castor::cuda
