// The CUDA backend's own kernels: simple grid-stride loops, one thread per output element (or
// per channel / row / plane where a kernel reduces), every value widened to double, every sum
// accumulated in double, every result rounded once into its output's dtype. Speed comes later
// (vectorised loads, fp32 arithmetic, fusion); these kernels are the correct baseline.

#include "cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace castor::cuda {
namespace {

constexpr int kThreads = 256;

int blocksFor(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 132 * 64)); }

#define GRID_LOOP(i, n)                                                                                            \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(blockDim.x) * gridDim.x)

__device__ __forceinline__ double ld(Ref r, int64_t i) {
  switch (r.dt) {
  case kF32:
    return static_cast<const float *>(r.p)[i];
  case kF16:
    return __half2float(static_cast<const __half *>(r.p)[i]);
  case kBF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(r.p)[i]);
  case kF64:
    return static_cast<const double *>(r.p)[i];
  case kI64:
    return double(static_cast<const int64_t *>(r.p)[i]);
  }
  return 0.0;
}

__device__ __forceinline__ void st(Ref r, int64_t i, double v) {
  switch (r.dt) {
  case kF32:
    static_cast<float *>(r.p)[i] = float(v);
    break;
  case kF16:
    static_cast<__half *>(r.p)[i] = __double2half(v);
    break;
  case kBF16:
    static_cast<__nv_bfloat16 *>(r.p)[i] = __double2bfloat16(v);
    break;
  case kF64:
    static_cast<double *>(r.p)[i] = v;
    break;
  case kI64:
    static_cast<int64_t *>(r.p)[i] = int64_t(v);
    break;
  }
}

// Sum of v over the block (blockDim.x a multiple of 32), returned to every thread.
__device__ double blockSum(double v) {
  __shared__ double partial[32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? partial[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1)
      v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  const double r = partial[0];
  __syncthreads();
  return r;
}

// --- Element-wise -----------------------------------------------------------------------------

__global__ void convertKernel(Ref x, Ref y, int64_t n) {
  GRID_LOOP(i, n) {
    if (x.dt == kI64 && y.dt == kI64)
      static_cast<int64_t *>(y.p)[i] = static_cast<const int64_t *>(x.p)[i];
    else
      st(y, i, ld(x, i));
  }
}

__global__ void unaryKernel(UnaryOp op, Ref x, Ref y, int64_t n, double lo, double hi) {
  GRID_LOOP(i, n) {
    const double v = ld(x, i);
    double r;
    switch (op) {
    case UnaryOp::Relu:
      r = v > 0 ? v : (isnan(v) ? v : 0.0);
      break;
    case UnaryOp::Sigmoid:
      r = 1.0 / (1.0 + exp(-v));
      break;
    default:
      r = isnan(v) ? v : fmin(fmax(v, lo), hi);
      break;
    }
    st(y, i, r);
  }
}

__device__ __forceinline__ void broadcastOffsets(const Broadcast &bc, int64_t i, int64_t &oa, int64_t &ob) {
  oa = 0, ob = 0;
  for (int d = bc.rank - 1; d >= 0; --d) {
    const int64_t idx = i % bc.out[d];
    i /= bc.out[d];
    oa += idx * bc.sa[d];
    ob += idx * bc.sb[d];
  }
}

__global__ void binaryKernel(BinaryOp op, Ref a, Ref b, Ref c, Broadcast bc, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t oa = i, ob = i;
    if (bc.rank > 0)
      broadcastOffsets(bc, i, oa, ob);
    const double u = ld(a, oa), v = ld(b, ob);
    st(c, i, op == BinaryOp::Add ? u + v : u * v);
  }
}

__global__ void broadcastScaledKernel(Ref x, Ref y, Broadcast bc, int64_t n, double scale) {
  GRID_LOOP(i, n) {
    int64_t ox = i, unused;
    if (bc.rank > 0)
      broadcastOffsets(bc, i, ox, unused);
    st(y, i, scale * ld(x, ox));
  }
}

__global__ void backwardKernel(BackwardOp op, Ref dy, Ref saved, Ref dx, int64_t n, double lo, double hi) {
  GRID_LOOP(i, n) {
    const double g = ld(dy, i), s = ld(saved, i);
    double r;
    switch (op) {
    case BackwardOp::Relu:
      r = s > 0 ? g : 0.0;
      break;
    case BackwardOp::Sigmoid:
      r = g * s * (1.0 - s);
      break;
    default:
      r = (s >= lo && s <= hi) ? g : 0.0;
      break;
    }
    st(dx, i, r);
  }
}

__global__ void fillKernel(Ref y, int64_t n, double value) {
  GRID_LOOP(i, n) st(y, i, value);
}

// Philox4x32-10 as weights/philox.cpp; the dropout mask as weights/dropout.h.
__device__ __forceinline__ void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0, c[1] = lo1, c[2] = n2, c[3] = lo0;
  }
}

__global__ void dropoutKernel(Ref x, Ref y, int64_t n, const int64_t *iteration, double ratio, int64_t seed,
                              int64_t salt) {
  const uint64_t sd = uint64_t(seed);
  const uint32_t k0 = uint32_t(sd), k1 = uint32_t(sd >> 32);
  const uint32_t it = iteration ? uint32_t(uint64_t(*iteration)) : 0;
  const double scale = ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0;
  GRID_LOOP(e, n) {
    double v = ld(x, e);
    if (iteration) {
      uint32_t c[4] = {uint32_t(uint64_t(e)), uint32_t(uint64_t(e) >> 32), it, uint32_t(uint64_t(salt))};
      philox(c, k0, k1);
      const double u = double((uint64_t(c[0]) << 32 | c[1]) >> 11) * 0x1.0p-53;
      v = (ratio < 1.0 && u >= ratio) ? v * scale : 0.0;
    }
    st(y, e, v);
  }
}

// --- Batch normalisation ----------------------------------------------------------------------

__device__ __forceinline__ int64_t channelIndex(int64_t j, int64_t c, int64_t C, int64_t inner) {
  const int64_t n = j / inner, i = j - n * inner;
  return (n * C + c) * inner + i;
}

// One block per channel: the mean, then the biased variance around it, then y.
__global__ void batchNormTrainingKernel(Ref x, Ref gamma, Ref beta, Ref y, Ref mean, Ref invStd, Ref runMean,
                                        Ref runVar, int64_t N, int64_t C, int64_t inner, double eps,
                                        double momentum) {
  const int64_t c = blockIdx.x, m = N * inner;
  double s = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x)
    s += ld(x, channelIndex(j, c, C, inner));
  const double mu = m ? blockSum(s) / double(m) : 0.0;
  double q = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const double d = ld(x, channelIndex(j, c, C, inner)) - mu;
    q += d * d;
  }
  const double var = m ? blockSum(q) / double(m) : 0.0;
  const double is = 1.0 / sqrt(var + eps);
  const double g = ld(gamma, c), b = ld(beta, c);
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t at = channelIndex(j, c, C, inner);
    st(y, at, (ld(x, at) - mu) * is * g + b);
  }
  if (threadIdx.x == 0) {
    st(mean, c, mu);
    st(invStd, c, is);
    if (runMean.p) {
      const double unbiased = m > 1 ? var * double(m) / double(m - 1) : var;
      st(runMean, c, (1 - momentum) * ld(runMean, c) + momentum * mu);
      st(runVar, c, (1 - momentum) * ld(runVar, c) + momentum * unbiased);
    }
  }
}

__global__ void batchNormInferenceKernel(Ref x, Ref gamma, Ref beta, Ref mean, Ref var, Ref y, int64_t n, int64_t C,
                                         int64_t inner, double eps) {
  GRID_LOOP(i, n) {
    const int64_t c = (i / inner) % C;
    const double is = 1.0 / sqrt(ld(var, c) + eps);
    st(y, i, (ld(x, i) - ld(mean, c)) * is * ld(gamma, c) + ld(beta, c));
  }
}

__global__ void batchNormBackwardKernel(Ref dy, Ref x, Ref gamma, Ref mean, Ref invStd, Ref dx, Ref dScale,
                                        Ref dBias, int64_t N, int64_t C, int64_t inner) {
  const int64_t c = blockIdx.x, count = N * inner;
  const double mu = ld(mean, c), is = ld(invStd, c);
  double sdy = 0, sdyx = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t at = channelIndex(j, c, C, inner);
    const double g = ld(dy, at);
    sdy += g;
    sdyx += g * (ld(x, at) - mu) * is;
  }
  sdy = blockSum(sdy);
  sdyx = blockSum(sdyx);
  const double m = double(count);
  const double k = m > 0 ? ld(gamma, c) * is / m : 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t at = channelIndex(j, c, C, inner);
    const double xhat = (ld(x, at) - mu) * is;
    st(dx, at, k * (m * ld(dy, at) - sdy - xhat * sdyx));
  }
  if (threadIdx.x == 0) {
    st(dScale, c, sdyx);
    st(dBias, c, sdy);
  }
}

__global__ void batchNormRunningUpdateKernel(Ref rm, Ref rv, Ref mean, Ref invStd, int64_t C, double momentum,
                                             double eps, int64_t count) {
  GRID_LOOP(c, C) {
    const double correction = count > 1 ? double(count) / double(count - 1) : 1.0;
    const double is = ld(invStd, c);
    const double varBiased = 1.0 / (is * is) - eps;
    st(rm, c, (1 - momentum) * ld(rm, c) + momentum * ld(mean, c));
    st(rv, c, (1 - momentum) * ld(rv, c) + momentum * varBiased * correction);
  }
}

// --- Pooling ------------------------------------------------------------------------------------

// The forward's divisor of an average window (as the CPU reference: the valid taps, or with
// count_include_pad the window clipped to the padded input).
__device__ __forceinline__ int64_t avgDivisor(const PoolGeometry &g, int64_t h0, int64_t w0, int64_t validRows,
                                              int64_t validCols) {
  if (!g.includePad)
    return validRows * validCols;
  const int64_t h1 = min(h0 + g.kh, g.H + g.padBottom), w1 = min(w0 + g.kw, g.W + g.padRight);
  return (h1 - h0) * (w1 - w0);
}

__global__ void poolKernel(bool isMax, Ref x, Ref y, PoolGeometry g) {
  const int64_t n = g.NC * g.P * g.Q;
  GRID_LOOP(o, n) {
    const int64_t oq = o % g.Q, op = (o / g.Q) % g.P, nc = o / (g.P * g.Q);
    const int64_t h0 = op * g.sh - g.padTop, w0 = oq * g.sw - g.padLeft;
    const int64_t base = nc * g.H * g.W;
    double acc = isMax ? -INFINITY : 0.0;
    int64_t rows = 0, cols = 0;
    for (int64_t s = 0; s < g.kw; ++s) {
      const int64_t w = w0 + s * g.dw;
      cols += (w >= 0 && w < g.W);
    }
    for (int64_t r = 0; r < g.kh; ++r) {
      const int64_t h = h0 + r * g.dh;
      if (h < 0 || h >= g.H)
        continue;
      ++rows;
      for (int64_t s = 0; s < g.kw; ++s) {
        const int64_t w = w0 + s * g.dw;
        if (w < 0 || w >= g.W)
          continue;
        const double v = ld(x, base + h * g.W + w);
        if (isMax)
          acc = (v > acc || v != v) ? v : acc;
        else
          acc += v;
      }
    }
    if (!isMax) {
      const int64_t d = avgDivisor(g, h0, w0, rows, cols);
      acc = d > 0 ? acc / double(d) : 0.0;
    }
    st(y, o, acc);
  }
}

// One thread per input element gathers the gradient of every window that holds it: for max
// pooling when it is the window's first maximum (the forward's choice; a NaN wins), for average
// pooling the window's share. Deterministic, no atomics.
__global__ void poolBackwardKernel(bool isMax, Ref dy, Ref x, Ref dx, PoolGeometry g) {
  const int64_t n = g.NC * g.H * g.W;
  const int64_t dh = isMax ? g.dh : 1, dw = isMax ? g.dw : 1;
  GRID_LOOP(e, n) {
    const int64_t w = e % g.W, h = (e / g.W) % g.H, nc = e / (g.H * g.W);
    const int64_t base = nc * g.H * g.W;
    double acc = 0;
    for (int64_t r = 0; r < g.kh; ++r) {
      const int64_t numH = h + g.padTop - r * dh;
      if (numH < 0 || numH % g.sh != 0 || numH / g.sh >= g.P)
        continue;
      const int64_t op = numH / g.sh, h0 = op * g.sh - g.padTop;
      for (int64_t s = 0; s < g.kw; ++s) {
        const int64_t numW = w + g.padLeft - s * dw;
        if (numW < 0 || numW % g.sw != 0 || numW / g.sw >= g.Q)
          continue;
        const int64_t oq = numW / g.sw, w0 = oq * g.sw - g.padLeft;
        const double grad = ld(dy, (nc * g.P + op) * g.Q + oq);
        if (isMax) {
          double best = -INFINITY;
          int64_t at = -1;
          for (int64_t rr = 0; rr < g.kh; ++rr) {
            const int64_t hh = h0 + rr * dh;
            if (hh < 0 || hh >= g.H)
              continue;
            for (int64_t ss = 0; ss < g.kw; ++ss) {
              const int64_t ww = w0 + ss * dw;
              if (ww < 0 || ww >= g.W)
                continue;
              const int64_t i = hh * g.W + ww;
              const double v = ld(x, base + i);
              if (at < 0 || v > best || v != v) {
                best = v;
                at = i;
              }
            }
          }
          if (at == h * g.W + w)
            acc += grad;
        } else {
          int64_t rows = 0, cols = 0;
          for (int64_t rr = 0; rr < g.kh; ++rr)
            rows += (h0 + rr >= 0 && h0 + rr < g.H);
          for (int64_t ss = 0; ss < g.kw; ++ss)
            cols += (w0 + ss >= 0 && w0 + ss < g.W);
          const int64_t d = avgDivisor(g, h0, w0, rows, cols);
          if (d > 0)
            acc += grad / double(d);
        }
      }
    }
    st(dx, e, acc);
  }
}

__global__ void globalAvgPoolKernel(Ref x, Ref y, int64_t NC, int64_t inner) {
  GRID_LOOP(p, NC) {
    double s = 0;
    for (int64_t j = 0; j < inner; ++j)
      s += ld(x, p * inner + j);
    st(y, p, s / double(inner));
  }
}

__global__ void globalAvgPoolBackwardKernel(Ref dy, Ref dx, int64_t n, int64_t inner) {
  GRID_LOOP(i, n) st(dx, i, ld(dy, i / inner) / double(inner));
}

// --- Reductions ---------------------------------------------------------------------------------

__device__ __forceinline__ int64_t unravel(int64_t i, int rank, const int64_t *dims, const int64_t *strides) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t idx = i % dims[d];
    i /= dims[d];
    off += idx * strides[d];
  }
  return off;
}

// One thread per output (short reductions).
__global__ void reduceThreadKernel(Ref x, Ref y, Reduction r, double scale) {
  GRID_LOOP(o, r.outCount) {
    const int64_t base = unravel(o, r.keptRank, r.kept, r.keptStride);
    double s = 0;
    for (int64_t j = 0; j < r.redCount; ++j)
      s += ld(x, base + unravel(j, r.redRank, r.red, r.redStride));
    st(y, o, scale * s);
  }
}

// One block per output (long reductions).
__global__ void reduceBlockKernel(Ref x, Ref y, Reduction r, double scale) {
  for (int64_t o = blockIdx.x; o < r.outCount; o += gridDim.x) {
    const int64_t base = unravel(o, r.keptRank, r.kept, r.keptStride);
    double s = 0;
    for (int64_t j = threadIdx.x; j < r.redCount; j += blockDim.x)
      s += ld(x, base + unravel(j, r.redRank, r.red, r.redStride));
    s = blockSum(s);
    if (threadIdx.x == 0)
      st(y, o, scale * s);
  }
}

// --- Softmax and the loss -----------------------------------------------------------------------

__global__ void softmaxKernel(Ref x, Ref y, int64_t outer, int64_t n, int64_t inner) {
  GRID_LOOP(t, outer * inner) {
    const int64_t o = t / inner, i = t % inner;
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j)
      mx = fmax(mx, ld(x, (o * n + j) * inner + i));
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += exp(ld(x, (o * n + j) * inner + i) - mx);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (o * n + j) * inner + i;
      st(y, at, exp(ld(x, at) - mx) / sum);
    }
  }
}

__global__ void softmaxBackwardKernel(Ref dy, Ref y, Ref dx, int64_t outer, int64_t n, int64_t inner) {
  GRID_LOOP(t, outer * inner) {
    const int64_t o = t / inner, i = t % inner;
    double dot = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (o * n + j) * inner + i;
      dot += ld(dy, at) * ld(y, at);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (o * n + j) * inner + i;
      st(dx, at, ld(y, at) * (ld(dy, at) - dot));
    }
  }
}

__device__ double logSumExp(Ref x, int64_t row, int64_t C) {
  double mx = -INFINITY;
  for (int64_t j = 0; j < C; ++j)
    mx = fmax(mx, ld(x, row * C + j));
  double sum = 0;
  for (int64_t j = 0; j < C; ++j)
    sum += exp(ld(x, row * C + j) - mx);
  return mx + log(sum);
}

// One block; a thread per row.
__global__ void softmaxCrossEntropyKernel(Ref x, const int64_t *labels, Ref loss, Ref probs, int64_t N, int64_t C,
                                          double eps, LossReduction red) {
  double total = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const int64_t label = labels[n];
    const double logZ = logSumExp(x, n, C);
    double nllAll = 0;
    for (int64_t j = 0; j < C; ++j) {
      const double v = ld(x, n * C + j);
      nllAll += logZ - v;
      if (probs.p)
        st(probs, n * C + j, exp(v - logZ));
    }
    const double l = (label < 0 || label >= C) ? NAN
                                               : (1 - eps) * (logZ - ld(x, n * C + label)) + eps / double(C) * nllAll;
    if (red == LossReduction::None)
      st(loss, n, l);
    total += l;
  }
  total = blockSum(total);
  if (threadIdx.x == 0 && red != LossReduction::None)
    st(loss, 0, red == LossReduction::Mean ? total / double(N) : total);
}

__global__ void softmaxCrossEntropyBackwardKernel(Ref dloss, Ref x, const int64_t *labels, Ref dx, int64_t N,
                                                  int64_t C, double eps, LossReduction red) {
  GRID_LOOP(n, N) {
    const int64_t label = labels[n];
    const double w = red == LossReduction::None ? ld(dloss, n)
                     : red == LossReduction::Mean ? ld(dloss, 0) / double(N)
                                                  : ld(dloss, 0);
    const bool bad = label < 0 || label >= C;
    const double logZ = logSumExp(x, n, C);
    for (int64_t j = 0; j < C; ++j) {
      const double target = (j == label ? 1.0 - eps : 0.0) + eps / double(C);
      st(dx, n * C + j, bad ? NAN : w * (exp(ld(x, n * C + j) - logZ) - target));
    }
  }
}

__global__ void countCorrectKernel(Ref x, const int64_t *labels, int64_t *out, int64_t N, int64_t C) {
  double count = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    int64_t best = 0;
    double bv = ld(x, n * C);
    for (int64_t j = 1; j < C; ++j) {
      const double v = ld(x, n * C + j);
      if (v > bv)
        best = j, bv = v;
    }
    count += (C > 0 && best == labels[n]) ? 1.0 : 0.0;
  }
  count = blockSum(count);
  if (threadIdx.x == 0)
    *out = int64_t(count);
}

// --- Optimizers, schedule, counters ---------------------------------------------------------

__global__ void sgdKernel(Ref param, Ref grad, Ref buf, Ref lrRef, const int64_t *step, Ref found, int64_t n,
                          double momentum, bool nesterov, double wd, double dampening) {
  if (found.p && ld(found, 0) != 0.0)
    return;
  const double lr = ld(lrRef, 0);
  const bool first = momentum != 0 && step && *step <= 1;
  GRID_LOOP(i, n) {
    const double w = ld(param, i);
    double g = ld(grad, i) + wd * w;
    if (momentum != 0) {
      const double b = first ? g : momentum * ld(buf, i) + (1 - dampening) * g;
      st(buf, i, b);
      g = nesterov ? g + momentum * b : b;
    }
    st(param, i, w - lr * g);
  }
}

__global__ void adamwKernel(Ref param, Ref grad, Ref mRef, Ref vRef, Ref lrRef, const int64_t *stepPtr, Ref found,
                            int64_t n, double b1, double b2, double eps, double wd) {
  if (found.p && ld(found, 0) != 0.0)
    return;
  const double lr = ld(lrRef, 0), step = double(*stepPtr);
  const double bc1 = 1 - pow(b1, step), bc2Sqrt = sqrt(1 - pow(b2, step));
  const double stepSize = lr / bc1;
  GRID_LOOP(i, n) {
    const double g = ld(grad, i);
    double w = ld(param, i) * (1 - lr * wd);
    const double m = b1 * ld(mRef, i) + (1 - b1) * g;
    const double v = b2 * ld(vRef, i) + (1 - b2) * g * g;
    w -= stepSize * m / (sqrt(v) / bc2Sqrt + eps);
    st(param, i, w);
    st(mRef, i, m);
    st(vRef, i, v);
  }
}

__global__ void incrementKernel(const int64_t *in, int64_t *out, Ref flag, bool whenSet) {
  if (flag.p && (ld(flag, 0) != 0.0) != whenSet)
    return;
  *out = *in + 1;
}

__global__ void lrScheduleKernel(const int64_t *iteration, Ref lr, LrSchedule p) {
  const int64_t it = *iteration;
  double v = p.baseLr;
  if (it < p.warmupSteps) {
    v = p.baseLr * double(it + 1) / double(p.warmupSteps);
  } else if (p.kind == 1) {
    v = p.baseLr * pow(p.gamma, double(it / p.stepSize));
  } else if (p.kind == 2) {
    const double T = double(p.totalSteps - p.warmupSteps);
    if (T <= 0) {
      v = p.minLr;
    } else {
      const double t = fmin(fmax(double(it - p.warmupSteps), 0.0), T);
      v = p.minLr + (p.baseLr - p.minLr) * (1 + cos(3.14159265358979323846 * t / T)) / 2;
    }
  }
  st(lr, 0, v);
}

// --- Loss scaling, clipping, statistics ---------------------------------------------------------

__global__ void clearFlagKernel(Ref found) { st(found, 0, 0.0); }

__global__ void unscaleKernel(Ref g, int64_t n, Ref scale, Ref found) {
  const double inv = double(float(1.0 / ld(scale, 0)));
  bool bad = false;
  GRID_LOOP(i, n) {
    st(g, i, ld(g, i) * inv);
    bad = bad || !isfinite(ld(g, i));
  }
  if (bad)
    st(found, 0, 1.0);
}

__global__ void zeroKernel(double *p, int n) {
  if (threadIdx.x < n)
    p[threadIdx.x] = 0;
}

__global__ void sumSquaresKernel(Ref g, int64_t n, double *acc) {
  double s = 0;
  GRID_LOOP(i, n) {
    const double v = ld(g, i);
    s += v * v;
  }
  s = blockSum(s);
  if (threadIdx.x == 0)
    atomicAdd(acc, s);
}

__global__ void clipFinishKernel(double *scratch, Ref total, double maxNorm) {
  const double t = sqrt(scratch[0]);
  scratch[1] = maxNorm / (t + 1e-6);
  st(total, 0, t);
}

__global__ void clipApplyKernel(Ref g, int64_t n, const double *scratch) {
  const double coef = scratch[1];
  if (!(coef < 1.0))
    return;
  GRID_LOOP(i, n) st(g, i, ld(g, i) * coef);
}

__global__ void updateLossScaleKernel(Ref scaleRef, int64_t *tracker, Ref found, double growth, double backoff,
                                      int64_t interval) {
  double scale = ld(scaleRef, 0);
  int64_t t = *tracker;
  if (ld(found, 0) != 0.0) {
    scale *= backoff;
    t = 0;
  } else if (++t == interval) {
    scale *= growth;
    t = 0;
  }
  st(scaleRef, 0, scale);
  *tracker = t;
}

// scratch: [0] sum |g| over finite, [1] max |g| (bits of a non-negative double), [2] finite
// count, [3] non-finite count (both as unsigned long long).
__global__ void gradientStatsKernel(Ref g, int64_t n, double *scratch) {
  double sum = 0, mx = 0, finite = 0, nonFinite = 0;
  GRID_LOOP(i, n) {
    const double v = ld(g, i);
    if (!isfinite(v)) {
      nonFinite += 1;
      continue;
    }
    sum += fabs(v);
    mx = fmax(mx, fabs(v));
    finite += 1;
  }
  sum = blockSum(sum);
  finite = blockSum(finite);
  nonFinite = blockSum(nonFinite);
  auto *bits = reinterpret_cast<unsigned long long *>(scratch);
  atomicMax(bits + 1, static_cast<unsigned long long>(__double_as_longlong(mx)));
  if (threadIdx.x == 0) {
    atomicAdd(scratch, sum);
    atomicAdd(bits + 2, static_cast<unsigned long long>(finite));
    atomicAdd(bits + 3, static_cast<unsigned long long>(nonFinite));
  }
}

__global__ void gradientStatsFinishKernel(const double *scratch, Ref out) {
  const auto *bits = reinterpret_cast<const unsigned long long *>(scratch);
  const double finite = double(bits[2]);
  st(out, 0, finite > 0 ? scratch[0] / finite : 0.0);
  st(out, 1, __longlong_as_double(static_cast<long long>(bits[1])));
  st(out, 2, double(bits[3]));
}

} // namespace

#define LAUNCH(n, kernel, ...)                                                                                     \
  do {                                                                                                             \
    if ((n) <= 0)                                                                                                  \
      return cudaSuccess;                                                                                          \
    kernel<<<blocksFor(n), kThreads, 0, s>>>(__VA_ARGS__);                                                         \
    return cudaGetLastError();                                                                                     \
  } while (0)

cudaError_t convert(Ref x, Ref y, int64_t n, cudaStream_t s) { LAUNCH(n, convertKernel, x, y, n); }
cudaError_t unary(UnaryOp op, Ref x, Ref y, int64_t n, double lo, double hi, cudaStream_t s) {
  LAUNCH(n, unaryKernel, op, x, y, n, lo, hi);
}
cudaError_t binary(BinaryOp op, Ref a, Ref b, Ref c, const Broadcast &bc, int64_t n, cudaStream_t s) {
  LAUNCH(n, binaryKernel, op, a, b, c, bc, n);
}
cudaError_t broadcastScaled(Ref x, Ref y, const Broadcast &bc, int64_t n, double scale, cudaStream_t s) {
  LAUNCH(n, broadcastScaledKernel, x, y, bc, n, scale);
}
cudaError_t backward(BackwardOp op, Ref dy, Ref saved, Ref dx, int64_t n, double lo, double hi, cudaStream_t s) {
  LAUNCH(n, backwardKernel, op, dy, saved, dx, n, lo, hi);
}
cudaError_t fill(Ref y, int64_t n, double value, cudaStream_t s) { LAUNCH(n, fillKernel, y, n, value); }
cudaError_t dropout(Ref x, Ref y, int64_t n, const int64_t *iteration, double ratio, int64_t seed, int64_t salt,
                    cudaStream_t s) {
  LAUNCH(n, dropoutKernel, x, y, n, iteration, ratio, seed, salt);
}

cudaError_t batchNormTraining(Ref x, Ref gamma, Ref beta, Ref y, Ref mean, Ref invStd, Ref runMean, Ref runVar,
                              int64_t N, int64_t C, int64_t inner, double eps, double momentum, cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  batchNormTrainingKernel<<<unsigned(C), 1024, 0, s>>>(x, gamma, beta, y, mean, invStd, runMean, runVar, N, C, inner,
                                                       eps, momentum);
  return cudaGetLastError();
}
cudaError_t batchNormInference(Ref x, Ref gamma, Ref beta, Ref mean, Ref var, Ref y, int64_t N, int64_t C,
                               int64_t inner, double eps, cudaStream_t s) {
  const int64_t n = N * C * inner;
  LAUNCH(n, batchNormInferenceKernel, x, gamma, beta, mean, var, y, n, C, inner, eps);
}
cudaError_t batchNormBackward(Ref dy, Ref x, Ref gamma, Ref mean, Ref invStd, Ref dx, Ref dScale, Ref dBias,
                              int64_t N, int64_t C, int64_t inner, cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  batchNormBackwardKernel<<<unsigned(C), 1024, 0, s>>>(dy, x, gamma, mean, invStd, dx, dScale, dBias, N, C, inner);
  return cudaGetLastError();
}
cudaError_t batchNormRunningUpdate(Ref runMean, Ref runVar, Ref mean, Ref invStd, int64_t C, double momentum,
                                   double eps, int64_t count, cudaStream_t s) {
  LAUNCH(C, batchNormRunningUpdateKernel, runMean, runVar, mean, invStd, C, momentum, eps, count);
}

cudaError_t pool2d(bool isMax, Ref x, Ref y, const PoolGeometry &g, cudaStream_t s) {
  LAUNCH(g.NC * g.P * g.Q, poolKernel, isMax, x, y, g);
}
cudaError_t pool2dBackward(bool isMax, Ref dy, Ref x, Ref dx, const PoolGeometry &g, cudaStream_t s) {
  LAUNCH(g.NC * g.H * g.W, poolBackwardKernel, isMax, dy, x, dx, g);
}
cudaError_t globalAvgPool(Ref x, Ref y, int64_t NC, int64_t inner, cudaStream_t s) {
  LAUNCH(NC, globalAvgPoolKernel, x, y, NC, inner);
}
cudaError_t globalAvgPoolBackward(Ref dy, Ref dx, int64_t NC, int64_t inner, cudaStream_t s) {
  LAUNCH(NC * inner, globalAvgPoolBackwardKernel, dy, dx, NC * inner, inner);
}
cudaError_t reduceSum(Ref x, Ref y, const Reduction &r, double scale, cudaStream_t s) {
  if (r.outCount <= 0)
    return cudaSuccess;
  if (r.redCount < 64) {
    LAUNCH(r.outCount, reduceThreadKernel, x, y, r, scale);
  }
  reduceBlockKernel<<<unsigned(std::min<int64_t>(r.outCount, 1 << 20)), kThreads, 0, s>>>(x, y, r, scale);
  return cudaGetLastError();
}

cudaError_t softmax(Ref x, Ref y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  LAUNCH(outer * inner, softmaxKernel, x, y, outer, n, inner);
}
cudaError_t softmaxBackward(Ref dy, Ref y, Ref dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  LAUNCH(outer * inner, softmaxBackwardKernel, dy, y, dx, outer, n, inner);
}
cudaError_t softmaxCrossEntropy(Ref logits, const int64_t *labels, Ref loss, Ref probs, int64_t N, int64_t C,
                                double smoothing, LossReduction red, cudaStream_t s) {
  softmaxCrossEntropyKernel<<<1, 1024, 0, s>>>(logits, labels, loss, probs, N, C, smoothing, red);
  return cudaGetLastError();
}
cudaError_t softmaxCrossEntropyBackward(Ref dloss, Ref logits, const int64_t *labels, Ref dx, int64_t N, int64_t C,
                                        double smoothing, LossReduction red, cudaStream_t s) {
  LAUNCH(N, softmaxCrossEntropyBackwardKernel, dloss, logits, labels, dx, N, C, smoothing, red);
}
cudaError_t countCorrect(Ref logits, const int64_t *labels, int64_t *out, int64_t N, int64_t C, cudaStream_t s) {
  countCorrectKernel<<<1, 1024, 0, s>>>(logits, labels, out, N, C);
  return cudaGetLastError();
}

cudaError_t sgdUpdate(Ref param, Ref grad, Ref buf, Ref lr, const int64_t *step, Ref found, int64_t n,
                      double momentum, bool nesterov, double weightDecay, double dampening, cudaStream_t s) {
  LAUNCH(n, sgdKernel, param, grad, buf, lr, step, found, n, momentum, nesterov, weightDecay, dampening);
}
cudaError_t adamwUpdate(Ref param, Ref grad, Ref m, Ref v, Ref lr, const int64_t *step, Ref found, int64_t n,
                        double beta1, double beta2, double eps, double weightDecay, cudaStream_t s) {
  LAUNCH(n, adamwKernel, param, grad, m, v, lr, step, found, n, beta1, beta2, eps, weightDecay);
}
cudaError_t increment(const int64_t *in, int64_t *out, Ref flag, bool whenSet, cudaStream_t s) {
  incrementKernel<<<1, 1, 0, s>>>(in, out, flag, whenSet);
  return cudaGetLastError();
}
cudaError_t lrSchedule(const int64_t *iteration, Ref lr, const LrSchedule &p, cudaStream_t s) {
  lrScheduleKernel<<<1, 1, 0, s>>>(iteration, lr, p);
  return cudaGetLastError();
}

cudaError_t clearFlag(Ref found, cudaStream_t s) {
  clearFlagKernel<<<1, 1, 0, s>>>(found);
  return cudaGetLastError();
}
cudaError_t unscale(Ref g, int64_t n, Ref scale, Ref found, cudaStream_t s) {
  LAUNCH(n, unscaleKernel, g, n, scale, found);
}
cudaError_t clipZero(double *scratch, cudaStream_t s) {
  zeroKernel<<<1, 32, 0, s>>>(scratch, 2);
  return cudaGetLastError();
}
cudaError_t clipAccumulate(Ref g, int64_t n, double *scratch, cudaStream_t s) {
  LAUNCH(n, sumSquaresKernel, g, n, scratch);
}
cudaError_t clipFinish(double *scratch, Ref total, double maxNorm, cudaStream_t s) {
  clipFinishKernel<<<1, 1, 0, s>>>(scratch, total, maxNorm);
  return cudaGetLastError();
}
cudaError_t clipApply(Ref g, int64_t n, const double *scratch, cudaStream_t s) {
  LAUNCH(n, clipApplyKernel, g, n, scratch);
}
cudaError_t updateLossScale(Ref scale, int64_t *tracker, Ref found, double growth, double backoff, int64_t interval,
                            cudaStream_t s) {
  updateLossScaleKernel<<<1, 1, 0, s>>>(scale, tracker, found, growth, backoff, interval);
  return cudaGetLastError();
}
cudaError_t gradientStats(Ref g, int64_t n, Ref out, double *scratch, cudaStream_t s) {
  zeroKernel<<<1, 32, 0, s>>>(scratch, 4);
  if (n > 0)
    gradientStatsKernel<<<blocksFor(n), kThreads, 0, s>>>(g, n, scratch);
  gradientStatsFinishKernel<<<1, 1, 0, s>>>(scratch, out);
  return cudaGetLastError();
}

} // namespace castor::cuda
