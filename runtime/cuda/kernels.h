// The CUDA backend's own kernels (kernels.cu), behind plain C++ launch functions so that the
// backend (cuda_backend.cpp, compiled by the host compiler) never includes device code and
// kernels.cu never includes the plan's protobuf headers.
//
// Every operand is a Ref: a device pointer and its dtype (the plan's DType values). Kernels
// read any float dtype, compute in double (sums accumulate in double) and round once into the
// output's dtype, like the CPU reference; results agree with it up to the order of summation.
// Scalars that change during training (learning rate, step, loss scale, found_inf, iteration)
// stay in device memory and are read by the kernels: a step never waits for the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace castor::cuda {

enum DType : int { kF32 = 1, kF16 = 2, kBF16 = 3, kF64 = 4, kI64 = 5 };

struct Ref {
  void *p = nullptr;
  int dt = kF32;
};

constexpr int kMaxRank = 8;

// Element-wise with numpy broadcasting: output dims, and each input's element strides per output
// dim (0 where it broadcasts).
struct Broadcast {
  int rank = 0;
  int64_t out[kMaxRank] = {};
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
};

// A sum over some dims of x into y: y element o (row-major over `kept` dims) sums the x
// elements at sum(kept index * keptStride) + sum(reduced index * redStride).
struct Reduction {
  int keptRank = 0, redRank = 0;
  int64_t kept[kMaxRank] = {}, keptStride[kMaxRank] = {};
  int64_t red[kMaxRank] = {}, redStride[kMaxRank] = {};
  int64_t outCount = 1, redCount = 1;
};

struct PoolGeometry {
  int64_t NC, H, W, P, Q;
  int64_t kh, kw, sh, sw, padTop, padLeft, padBottom, padRight, dh, dw;
  bool includePad;
};

enum class UnaryOp : int { Relu, Sigmoid, Clip };
enum class BinaryOp : int { Add, Mul };
enum class BackwardOp : int { Relu, Sigmoid, Clip };
enum class LossReduction : int { Mean, Sum, None };

// Every function enqueues on `s` and returns the launch error (cudaSuccess when none).
cudaError_t convert(Ref x, Ref y, int64_t n, cudaStream_t s);
cudaError_t unary(UnaryOp op, Ref x, Ref y, int64_t n, double lo, double hi, cudaStream_t s);
cudaError_t binary(BinaryOp op, Ref a, Ref b, Ref c, const Broadcast &bc, int64_t n, cudaStream_t s);
cudaError_t backward(BackwardOp op, Ref dy, Ref saved, Ref dx, int64_t n, double lo, double hi, cudaStream_t s);
cudaError_t fill(Ref y, int64_t n, double value, cudaStream_t s);
// C broadcast into y [M,N] times beta (the gemm's addend before the product is added).
cudaError_t broadcastScaled(Ref x, Ref y, const Broadcast &bc, int64_t n, double scale, cudaStream_t s);
// iteration == nullptr: the identity (inference).
cudaError_t dropout(Ref x, Ref y, int64_t n, const int64_t *iteration, double ratio, int64_t seed, int64_t salt,
                    cudaStream_t s);

cudaError_t batchNormTraining(Ref x, Ref gamma, Ref beta, Ref y, Ref mean, Ref invStd, Ref runMean, Ref runVar,
                              int64_t N, int64_t C, int64_t inner, double eps, double momentum, cudaStream_t s);
cudaError_t batchNormInference(Ref x, Ref gamma, Ref beta, Ref mean, Ref var, Ref y, int64_t N, int64_t C,
                               int64_t inner, double eps, cudaStream_t s);
cudaError_t batchNormBackward(Ref dy, Ref x, Ref gamma, Ref mean, Ref invStd, Ref dx, Ref dScale, Ref dBias,
                              int64_t N, int64_t C, int64_t inner, cudaStream_t s);
cudaError_t batchNormRunningUpdate(Ref runMean, Ref runVar, Ref mean, Ref invStd, int64_t C, double momentum,
                                   double eps, int64_t count, cudaStream_t s);

cudaError_t pool2d(bool isMax, Ref x, Ref y, const PoolGeometry &g, cudaStream_t s);
cudaError_t pool2dBackward(bool isMax, Ref dy, Ref x, Ref dx, const PoolGeometry &g, cudaStream_t s);
cudaError_t globalAvgPool(Ref x, Ref y, int64_t NC, int64_t inner, cudaStream_t s);
cudaError_t globalAvgPoolBackward(Ref dy, Ref dx, int64_t NC, int64_t inner, cudaStream_t s);
cudaError_t reduceSum(Ref x, Ref y, const Reduction &r, double scale, cudaStream_t s);

cudaError_t softmax(Ref x, Ref y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);
cudaError_t softmaxBackward(Ref dy, Ref y, Ref dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);
// Labels outside [0, C) give a NaN loss (the device cannot report an error without a sync).
cudaError_t softmaxCrossEntropy(Ref logits, const int64_t *labels, Ref loss, Ref probs, int64_t N, int64_t C,
                                double smoothing, LossReduction red, cudaStream_t s);
cudaError_t softmaxCrossEntropyBackward(Ref dloss, Ref logits, const int64_t *labels, Ref dx, int64_t N, int64_t C,
                                        double smoothing, LossReduction red, cudaStream_t s);
cudaError_t countCorrect(Ref logits, const int64_t *labels, int64_t *out, int64_t N, int64_t C, cudaStream_t s);

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

// Loss scaling: found = 0; then per gradient g *= float(1/scale), found = 1 on a non-finite
// stored value.
cudaError_t clearFlag(Ref found, cudaStream_t s);
cudaError_t unscale(Ref g, int64_t n, Ref scale, Ref found, cudaStream_t s);
// Gradient clipping with a device scratch of 2 doubles: zero, accumulate sum g^2 per gradient,
// finish (total norm out, coefficient in scratch[1]), apply per gradient.
cudaError_t clipZero(double *scratch, cudaStream_t s);
cudaError_t clipAccumulate(Ref g, int64_t n, double *scratch, cudaStream_t s);
cudaError_t clipFinish(double *scratch, Ref total, double maxNorm, cudaStream_t s);
cudaError_t clipApply(Ref g, int64_t n, const double *scratch, cudaStream_t s);
cudaError_t updateLossScale(Ref scale, int64_t *tracker, Ref found, double growth, double backoff, int64_t interval,
                            cudaStream_t s);
// scratch: 4 doubles.
cudaError_t gradientStats(Ref g, int64_t n, Ref out, double *scratch, cudaStream_t s);

} // namespace castor::cuda

namespace castor::cuda {
// Reorders a rank-4 tensor of elemBytes-sized elements between row-major [N,C,H,W] storage and
// channels-last [N,H,W,C] storage (HW = H*W).
cudaError_t toChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                           cudaStream_t s);
cudaError_t fromChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                             cudaStream_t s);
} // namespace castor::cuda
