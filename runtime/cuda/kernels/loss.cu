// Softmax, its backward, the softmax cross-entropy loss and its backward, count_correct. A warp
// per row where the reduced axis is contiguous (the logits [N, C]); row results combine in fp64.
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/loss.h"

namespace castor::cuda {
namespace {

using namespace detail;

__device__ __forceinline__ float accExp(float v) { return expf(v); }
__device__ __forceinline__ double accExp(double v) { return exp(v); }
__device__ __forceinline__ float accLog(float v) { return logf(v); }
__device__ __forceinline__ double accLog(double v) { return log(v); }

#define CASTOR_WARP_LOOP(r, rows)                                                                                  \
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; r < (rows);                               \
       r += (int64_t(gridDim.x) * blockDim.x) >> 5)

inline int warpGrid(int64_t rows) { return gridFor(rows * 32); }

// max and sum exp(x - max) of row r of x [rows, n], on every lane of the warp.
template <typename IoT>
__device__ __forceinline__ void rowMaxSum(const IoT &x, int64_t r, int64_t n, typename IoT::Acc &mx,
                                          typename IoT::Acc &sum) {
  using A = typename IoT::Acc;
  const int lane = threadIdx.x & 31;
  mx = A(-INFINITY);
  for (int64_t j = lane; j < n; j += 32)
    mx = fmax(mx, x.ld(r * n + j));
  mx = warpMax(mx);
  sum = 0;
  for (int64_t j = lane; j < n; j += 32)
    sum += accExp(x.ld(r * n + j) - mx);
  sum = warpSum(sum);
}
template <typename IoT> __device__ __forceinline__ typename IoT::Acc rowLogSumExp(const IoT &x, int64_t r, int64_t n) {
  typename IoT::Acc mx, sum;
  rowMaxSum(x, r, n, mx, sum);
  return mx + accLog(sum);
}

// --- Softmax -------------------------------------------------------------------------------------------

template <typename IoT> __global__ void softmaxRowsKernel(IoT x, IoT y, int64_t rows, int64_t n) {
  using A = typename IoT::Acc;
  const int lane = threadIdx.x & 31;
  CASTOR_WARP_LOOP(r, rows) {
    A mx, sum;
    rowMaxSum(x, r, n, mx, sum);
    for (int64_t j = lane; j < n; j += 32)
      y.st(r * n + j, accExp(x.ld(r * n + j) - mx) / sum);
  }
}

template <typename IoT> __global__ void softmaxStridedKernel(IoT x, IoT y, int64_t outer, int64_t n, int64_t inner) {
  using A = typename IoT::Acc;
  CASTOR_GRID_LOOP(t, outer * inner) {
    const int64_t o = t / inner, i = t % inner;
    A mx = A(-INFINITY);
    for (int64_t j = 0; j < n; ++j)
      mx = fmax(mx, x.ld((o * n + j) * inner + i));
    A sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += accExp(x.ld((o * n + j) * inner + i) - mx);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (o * n + j) * inner + i;
      y.st(at, accExp(x.ld(at) - mx) / sum);
    }
  }
}

template <typename IoT> __global__ void softmaxBackwardRowsKernel(IoT dy, IoT y, IoT dx, int64_t rows, int64_t n) {
  using A = typename IoT::Acc;
  const int lane = threadIdx.x & 31;
  CASTOR_WARP_LOOP(r, rows) {
    A dot = 0;
    for (int64_t j = lane; j < n; j += 32)
      dot += dy.ld(r * n + j) * y.ld(r * n + j);
    dot = warpSum(dot);
    for (int64_t j = lane; j < n; j += 32) {
      const int64_t at = r * n + j;
      dx.st(at, y.ld(at) * (dy.ld(at) - dot));
    }
  }
}

template <typename IoT>
__global__ void softmaxBackwardStridedKernel(IoT dy, IoT y, IoT dx, int64_t outer, int64_t n, int64_t inner) {
  using A = typename IoT::Acc;
  CASTOR_GRID_LOOP(t, outer * inner) {
    const int64_t o = t / inner, i = t % inner;
    A dot = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (o * n + j) * inner + i;
      dot += dy.ld(at) * y.ld(at);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (o * n + j) * inner + i;
      dx.st(at, y.ld(at) * (dy.ld(at) - dot));
    }
  }
}

// --- Cross-entropy --------------------------------------------------------------------------------------

// Per row: loss = (1-eps)(logZ - x[label]) + eps/C sum_j (logZ - x_j) into rowLoss (fp64) or,
// for reduction none, into loss[n]; probabilities when asked.
template <typename IoT>
__global__ void crossEntropyRowsKernel(IoT x, const int64_t *labels, Ref loss, Ref probs, double *rowLoss, int64_t N,
                                       int64_t C, double eps, bool none) {
  using A = typename IoT::Acc;
  const int lane = threadIdx.x & 31;
  CASTOR_WARP_LOOP(n, N) {
    const A logZ = rowLogSumExp(x, n, C);
    A nll = 0;
    for (int64_t j = lane; j < C; j += 32) {
      const A v = x.ld(n * C + j);
      nll += logZ - v;
      if (probs.p)
        stAny(probs, n * C + j, double(accExp(v - logZ)));
    }
    nll = warpSum(nll);
    if (lane == 0) {
      const int64_t label = labels[n];
      const double l = (label < 0 || label >= C)
                           ? NAN
                           : (1 - eps) * double(logZ - x.ld(n * C + label)) + eps / double(C) * double(nll);
      if (none)
        stAny(loss, n, l);
      else
        rowLoss[n] = l;
    }
  }
}

// One block: the rows' losses summed in a fixed order.
__global__ void lossFinishKernel(const double *rowLoss, Ref loss, int64_t N, bool mean) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
    s += rowLoss[i];
  s = blockSum(s);
  if (threadIdx.x == 0)
    stAny(loss, 0, mean ? s / double(N) : s);
}

template <typename IoT>
__global__ void crossEntropyBackwardRowsKernel(Ref dloss, IoT x, const int64_t *labels, IoT dx, int64_t N, int64_t C,
                                               double eps, LossReduction red) {
  using A = typename IoT::Acc;
  const int lane = threadIdx.x & 31;
  CASTOR_WARP_LOOP(n, N) {
    const int64_t label = labels[n];
    const double w = red == LossReduction::None   ? ldAny(dloss, n)
                     : red == LossReduction::Mean ? ldAny(dloss, 0) / double(N)
                                                  : ldAny(dloss, 0);
    const bool bad = label < 0 || label >= C;
    const A logZ = rowLogSumExp(x, n, C);
    const A wa = A(w), off = A(eps / double(C)), on = A(1.0 - eps + eps / double(C));
    for (int64_t j = lane; j < C; j += 32) {
      const A target = j == label ? on : off;
      dx.st(n * C + j, bad ? A(NAN) : wa * (accExp(x.ld(n * C + j) - logZ) - target));
    }
  }
}

// Rows whose first maximum is the label (a NaN never wins; a NaN in column 0 makes it the answer,
// as the reference's sequential scan).
template <typename IoT> __global__ void countCorrectKernel(IoT x, const int64_t *labels, int64_t *out, int64_t N, int64_t C) {
  using A = typename IoT::Acc;
  const int lane = threadIdx.x & 31;
  CASTOR_WARP_LOOP(n, N) {
    A bv = 0;
    int64_t bi = -1;
    for (int64_t j = lane; j < C; j += 32) {
      const A v = x.ld(n * C + j);
      if (v == v && (bi < 0 || v > bv))
        bv = v, bi = j;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const A ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi)))
        bv = ov, bi = oi;
    }
    if (lane == 0) {
      const A first = C > 0 ? x.ld(n * C) : A(0);
      const int64_t best = (C <= 0 || first != first || bi < 0) ? 0 : bi;
      if (C > 0 && best == labels[n])
        atomicAdd(reinterpret_cast<unsigned long long *>(out), 1ull);
    }
  }
}

} // namespace

cudaError_t softmax(Ref x, Ref y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  if (outer * n * inner <= 0)
    return cudaSuccess;
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (inner == 1)
      softmaxRowsKernel<<<warpGrid(outer), kThreads, 0, s>>>(io<T>(x), io<T>(y), outer, n);
    else
      softmaxStridedKernel<<<gridFor(outer * inner), kThreads, 0, s>>>(io<T>(x), io<T>(y), outer, n, inner);
    return cudaGetLastError();
  });
}

cudaError_t softmaxBackward(Ref dy, Ref y, Ref dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  if (outer * n * inner <= 0)
    return cudaSuccess;
  return withSharedType({dy, y, dx}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (inner == 1)
      softmaxBackwardRowsKernel<<<warpGrid(outer), kThreads, 0, s>>>(io<T>(dy), io<T>(y), io<T>(dx), outer, n);
    else
      softmaxBackwardStridedKernel<<<gridFor(outer * inner), kThreads, 0, s>>>(io<T>(dy), io<T>(y), io<T>(dx), outer,
                                                                               n, inner);
    return cudaGetLastError();
  });
}

size_t lossScratchBytes(int64_t N) { return size_t(std::max<int64_t>(N, 1)) * sizeof(double); }

cudaError_t softmaxCrossEntropy(Ref logits, const int64_t *labels, Ref loss, Ref probs, int64_t N, int64_t C,
                                double smoothing, LossReduction red, void *scratch, cudaStream_t s) {
  const bool none = red == LossReduction::None;
  auto *rowLoss = static_cast<double *>(scratch);
  if (N > 0) {
    cudaError_t e = withFloatType(logits.dt, [&](auto tag) -> cudaError_t {
      using T = typename decltype(tag)::type;
      crossEntropyRowsKernel<<<warpGrid(N), kThreads, 0, s>>>(io<T>(logits), labels, loss, probs, rowLoss, N, C,
                                                              smoothing, none);
      return cudaGetLastError();
    });
    if (e != cudaSuccess)
      return e;
  }
  if (!none) {
    lossFinishKernel<<<1, 1024, 0, s>>>(rowLoss, loss, N, red == LossReduction::Mean);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

cudaError_t softmaxCrossEntropyBackward(Ref dloss, Ref logits, const int64_t *labels, Ref dx, int64_t N, int64_t C,
                                        double smoothing, LossReduction red, cudaStream_t s) {
  if (N <= 0)
    return cudaSuccess;
  return withSharedType({logits, dx}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    crossEntropyBackwardRowsKernel<<<warpGrid(N), kThreads, 0, s>>>(dloss, io<T>(logits), labels, io<T>(dx), N, C,
                                                                    smoothing, red);
    return cudaGetLastError();
  });
}

cudaError_t countCorrect(Ref logits, const int64_t *labels, int64_t *out, int64_t N, int64_t C, cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(out, 0, sizeof(int64_t), s);
  if (e != cudaSuccess || N <= 0)
    return e;
  return withFloatType(logits.dt, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    countCorrectKernel<<<warpGrid(N), kThreads, 0, s>>>(io<T>(logits), labels, out, N, C);
    return cudaGetLastError();
  });
}

} // namespace castor::cuda
