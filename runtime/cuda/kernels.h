// The CUDA backend's own kernels (elementwise.cu, reduce.cu, pooling.cu, loss.cu, optimizer.cu),
// behind plain C++ launch functions so that the host code never includes device code and the
// .cu files never include the plan's protobuf headers.
//
// Every operand is a Ref: a device pointer and its dtype (the plan's DType values). The dtype is
// dispatched once on the host into a template instantiation: operands of one dtype f32/f16/bf16
// compute in fp32, f64 in fp64; operands of mixed dtypes run a slower instantiation that computes
// in fp64. Each result is rounded once into its output's dtype. Sums accumulate in fp32 within a
// thread and combine in fp64 (per block, per chunk). Contiguous element-wise kernels use 16-byte
// loads and stores when the pointers allow (arena offsets are 256-aligned).
//
// Layouts: the launch functions see physical (storage-order) indices. Rank-4 tensors that the
// backend stores channels-last are described by the builders (own_kernels.cpp) with physical
// strides, a channel geometry [A, C, B] (element (a, c, b) at (a*C + c)*B + b: [N*H*W, C, 1]
// channels-last, [N, C, H*W] row-major), or an explicit channels-last flag.
//
// Scalars that change during training (learning rate, step, loss scale, found_inf, iteration)
// stay in device memory: a step never waits for the host, and every launch function only
// enqueues work on `s` (no allocation, no host synchronisation), so a step can be captured as a
// CUDA graph. Functions return the launch error (cudaSuccess when none).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace castor::cuda {

enum DType : int { kF32 = 1, kF16 = 2, kBF16 = 3, kF64 = 4, kI64 = 5 };

struct Ref {
  void *p = nullptr;
  int dt = kF32;
};

constexpr int kMaxRank = 8;

// The number of multiprocessors the grids are sized for (the builders pass ctx.smCount).
void configureDevice(int smCount);

// --- Element-wise (elementwise.cu) --------------------------------------------------------------

// Element-wise with numpy broadcasting: output dims, and each input's element strides per output
// dim (0 where it broadcasts), in the output's storage order (rank 0: same shapes, flat indices).
struct Broadcast {
  int rank = 0;
  int64_t out[kMaxRank] = {};
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
};
// Merges adjacent dims that every operand walks contiguously and drops dims of size 1.
Broadcast simplifyBroadcast(const Broadcast &bc);

enum class UnaryOp : int { Relu, Sigmoid, Clip };
enum class BinaryOp : int { Add, Mul };
enum class BackwardOp : int { Relu, Sigmoid, Clip };

// x -> y of the same element count in the same storage order (any pair of f32/f16/bf16/f64/i64).
cudaError_t convert(Ref x, Ref y, int64_t n, cudaStream_t s);
cudaError_t unary(UnaryOp op, Ref x, Ref y, int64_t n, double lo, double hi, cudaStream_t s);
cudaError_t binary(BinaryOp op, Ref a, Ref b, Ref c, const Broadcast &bc, int64_t n, cudaStream_t s);
cudaError_t backward(BackwardOp op, Ref dy, Ref saved, Ref dx, int64_t n, double lo, double hi, cudaStream_t s);
cudaError_t fill(Ref y, int64_t n, double value, cudaStream_t s);
// y = scale * x broadcast into y (the gemm's addend C before the product is added).
cudaError_t broadcastScaled(Ref x, Ref y, const Broadcast &bc, int64_t n, double scale, cudaStream_t s);

// Dropout. iteration == nullptr: the identity (inference). The mask is keyed by the logical
// (row-major) element index: with channelsLast, y is [N,H,W,C] in storage and logical [N,C,H,W]
// (dims N, C, H, W given); otherwise the storage index is the logical one.
struct DropoutGeometry {
  bool channelsLast = false;
  int64_t N = 0, C = 0, H = 0, W = 0;
};
cudaError_t dropout(Ref x, Ref y, int64_t n, const int64_t *iteration, double ratio, int64_t seed, int64_t salt,
                    const DropoutGeometry &g, cudaStream_t s);

// --- Reductions and batch norm (reduce.cu) -------------------------------------------------------

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
cudaError_t batchNormRunningUpdate(Ref runMean, Ref runVar, Ref mean, Ref invStd, int64_t C, double momentum,
                                   double eps, int64_t count, cudaStream_t s);
// invStd[c] = 1 / sqrt(var[c] + eps) in f32, from any float var: what the graph API's batch-norm
// inference node takes instead of the variance (batch_norm_frontend.cpp).
cudaError_t batchNormInvStd(Ref var, float *invStd, int64_t C, double eps, cudaStream_t s);

// scratch: 4 doubles (ctx.scratch).
cudaError_t gradientStats(Ref g, int64_t n, Ref out, double *scratch, cudaStream_t s);

// --- Pooling (pooling.cu) ------------------------------------------------------------------------

struct PoolGeometry {
  int64_t N, C, H, W, P, Q;
  int64_t kh, kw, sh, sw, padTop, padLeft, padBottom, padRight, dh, dw;
  bool includePad;
  bool channelsLast; // x, y, dy, dx stored [N,H,W,C] (else [N,C,H,W])
};
cudaError_t pool2d(bool isMax, Ref x, Ref y, const PoolGeometry &g, cudaStream_t s);
cudaError_t pool2dBackward(bool isMax, Ref dy, Ref x, Ref dx, const PoolGeometry &g, cudaStream_t s);
// Max pooling's backward through a record of each window's winning tap: `taps` holds one byte per
// output (N*C*P*Q). Only for windows of fewer than 255 taps (maxPoolTapsFit).
bool maxPoolTapsFit(const PoolGeometry &g);
cudaError_t maxPool2dBackward(Ref dy, Ref x, Ref dx, uint8_t *taps, const PoolGeometry &g, cudaStream_t s);

// --- Softmax and the loss (loss.cu) -------------------------------------------------------------

enum class LossReduction : int { Mean, Sum, None };

cudaError_t softmax(Ref x, Ref y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);
cudaError_t softmaxBackward(Ref dy, Ref y, Ref dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);
// Labels outside [0, C) give a NaN loss (the device cannot report an error without a sync).
// scratch: N doubles (per-row losses, summed in a fixed order).
size_t lossScratchBytes(int64_t N);
cudaError_t softmaxCrossEntropy(Ref logits, const int64_t *labels, Ref loss, Ref probs, int64_t N, int64_t C,
                                double smoothing, LossReduction red, void *scratch, cudaStream_t s);
cudaError_t softmaxCrossEntropyBackward(Ref dloss, Ref logits, const int64_t *labels, Ref dx, int64_t N, int64_t C,
                                        double smoothing, LossReduction red, cudaStream_t s);
cudaError_t countCorrect(Ref logits, const int64_t *labels, int64_t *out, int64_t N, int64_t C, cudaStream_t s);

// --- Optimizers, schedule, counters, loss scaling (optimizer.cu) --------------------------------

// found.p == nullptr: no overflow flag. step == nullptr: no step counter (sgd without momentum).
cudaError_t sgdUpdate(Ref param, Ref grad, Ref buf, Ref lr, const int64_t *step, Ref found, int64_t n,
                      double momentum, bool nesterov, double weightDecay, double dampening, cudaStream_t s);
cudaError_t adamwUpdate(Ref param, Ref grad, Ref m, Ref v, Ref lr, const int64_t *step, Ref found, int64_t n,
                        double beta1, double beta2, double eps, double weightDecay, cudaStream_t s);
// flag.p == nullptr: always counts.
cudaError_t increment(const int64_t *in, int64_t *out, Ref flag, bool whenSet, cudaStream_t s);

struct LrSchedule {
  int kind = 0; // 0 constant, 1 step, 2 cosine
  double baseLr = 0, gamma = 0.1, minLr = 0;
  int64_t warmupSteps = 0, stepSize = 0, totalSteps = 0;
};
cudaError_t lrSchedule(const int64_t *iteration, Ref lr, const LrSchedule &p, cudaStream_t s);

// Many tensors in one launch: a device table of (pointer, element count, dtype) and a list of
// chunks (tensor, start, count), built once on the host when the kernel is built.
struct TensorEntry {
  void *p = nullptr;
  int64_t n = 0;
  int32_t dt = kF32;
  int32_t pad = 0;
};
struct MultiTensorTable {
  const TensorEntry *tensors = nullptr; // device
  const void *chunks = nullptr;         // device
  double *partials = nullptr;           // device: one double per chunk, then one coefficient
  int tensorCount = 0, chunkCount = 0;
};
// The bytes of the device table for these tensors.
size_t multiTensorBytes(const std::vector<TensorEntry> &tensors);
// Fills `device` (multiTensorBytes long) with a synchronous copy: at build time only.
cudaError_t uploadMultiTensor(const std::vector<TensorEntry> &tensors, void *device, MultiTensorTable *table);

// Loss scaling: found = 0; every gradient g *= float(1/scale) (rounded once into g's dtype);
// found = 1 when any stored value is not finite.
cudaError_t unscaleAll(const MultiTensorTable &t, Ref scale, Ref found, cudaStream_t s);
// Gradient clipping: total = sqrt(sum g^2) in fp64 (total out); coef = maxNorm / (total + 1e-6);
// when coef < 1 every g *= coef.
cudaError_t clipAll(const MultiTensorTable &t, Ref total, double maxNorm, cudaStream_t s);
cudaError_t updateLossScale(Ref scale, int64_t *tracker, Ref found, double growth, double backoff, int64_t interval,
                            cudaStream_t s);

} // namespace castor::cuda

namespace castor::cuda {
// Reorders a rank-4 tensor of elemBytes-sized elements between row-major [N,C,H,W] storage and
// channels-last [N,H,W,C] storage (HW = H*W). layout_kernels.cu.
cudaError_t toChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                           cudaStream_t s);
cudaError_t fromChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                             cudaStream_t s);
} // namespace castor::cuda
