// Reductions: per-channel sums over x = [A, C, B] in two stages (reduce_sum_to and
// conv2d_backward_bias in their common layouts, the batch-norm statistics), the general
// reduction, global average pooling, the own batch-norm kernels and gradient statistics.
//
// Stage one: blocks over (chunk of rows, channels) accumulate in fp32 (fp64 for f64 data) per
// thread, combine per block in fp64 and write one double2 per (chunk, channel) into the
// kernel's scratch; stage two sums the chunks per channel in fp64 in a fixed order (every result
// is deterministic). Channels-last tensors are [N*H*W, C, 1]: the rows are read coalesced along
// C (32 channels per warp); row-major ones are [N, C, H*W]: a block per (channel, chunk).
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/reduce.h"

namespace castor::cuda {
namespace {

using namespace detail;

struct ChannelPlan {
  bool cols = true;   // B == 1: column sums of an [A, C] matrix
  int64_t chunks = 1; // partial sums per channel
  int64_t per = 1;    // rows (cols) or (a, b) elements (rows) per chunk
};

ChannelPlan channelPlan(int64_t A, int64_t C, int64_t B) {
  const int64_t target = int64_t(smCount()) * kBlocksPerSm;
  ChannelPlan p;
  p.cols = B == 1;
  if (p.cols) {
    const int64_t tiles = std::max<int64_t>(1, (C + 31) / 32);
    int64_t chunks = std::max<int64_t>(1, target / tiles);
    chunks = std::min<int64_t>(chunks, std::max<int64_t>(1, (A + 31) / 32)); // at least 32 rows a chunk
    chunks = std::min<int64_t>(chunks, 65535);
    p.per = std::max<int64_t>(1, (A + chunks - 1) / chunks);
    p.chunks = std::max<int64_t>(1, (A + p.per - 1) / p.per);
  } else {
    const int64_t m = A * B;
    int64_t chunks = std::max<int64_t>(1, target / std::max<int64_t>(1, C));
    chunks = std::min<int64_t>(chunks, std::max<int64_t>(1, (m + 4 * kThreads - 1) / (4 * kThreads)));
    p.per = std::max<int64_t>(1, (m + chunks - 1) / chunks);
    p.chunks = std::max<int64_t>(1, (m + p.per - 1) / p.per);
  }
  return p;
}

// --- Terms: what stage one sums for element `at` of channel c (into s0, s1) ---------------------

template <typename IoT> struct SumTerm {
  using Acc = typename IoT::Acc;
  IoT x;
  __device__ void add(int64_t at, int64_t, Acc &s0, Acc &) const { s0 += x.ld(at); }
};
template <typename IoT> struct SqDevTerm {
  using Acc = typename IoT::Acc;
  IoT x;
  const double *mean;
  __device__ void add(int64_t at, int64_t c, Acc &s0, Acc &) const {
    const Acc d = x.ld(at) - Acc(mean[c]);
    s0 += d * d;
  }
};
template <typename IoT> struct BnBackTerm {
  using Acc = typename IoT::Acc;
  IoT dy, x;
  const double *mean;
  __device__ void add(int64_t at, int64_t c, Acc &s0, Acc &s1) const {
    const Acc g = dy.ld(at);
    s0 += g;
    s1 += g * (x.ld(at) - Acc(mean[c]));
  }
};

// blockDim (32, 8): 32 channels, 8 rows at a time; gridDim (channel tiles, chunks).
template <typename Term>
__global__ void colPartialKernel(Term t, int64_t A, int64_t C, int64_t rowsPerChunk, double2 *partial) {
  using Acc = typename Term::Acc;
  __shared__ double2 sh[8][32];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * rowsPerChunk, r1 = min(A, r0 + rowsPerChunk);
  Acc s0 = 0, s1 = 0;
  if (c < C)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8)
      t.add(r * C + c, c, s0, s1);
  sh[threadIdx.y][threadIdx.x] = make_double2(double(s0), double(s1));
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    double2 total = sh[0][threadIdx.x];
    for (int k = 1; k < 8; ++k)
      total.x += sh[k][threadIdx.x].x, total.y += sh[k][threadIdx.x].y;
    partial[int64_t(blockIdx.y) * C + c] = total;
  }
}

// One block per (channel, chunk of the A*B elements of the channel).
template <typename Term>
__global__ void rowPartialKernel(Term t, int64_t A, int64_t C, int64_t B, int64_t chunks, int64_t per,
                                 double2 *partial) {
  using Acc = typename Term::Acc;
  const int64_t c = int64_t(blockIdx.x) / chunks, chunk = int64_t(blockIdx.x) % chunks;
  const int64_t m = A * B, j0 = chunk * per, j1 = min(m, j0 + per);
  Acc s0 = 0, s1 = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const int64_t a = j / B, b = j - a * B;
    t.add((a * C + c) * B + b, c, s0, s1);
  }
  const double t0 = blockSum(double(s0)), t1 = blockSum(double(s1));
  if (threadIdx.x == 0)
    partial[chunk * C + c] = make_double2(t0, t1);
}

template <typename Fin> __global__ void finishKernel(Fin f, const double2 *partial, int64_t chunks, int64_t C) {
  CASTOR_GRID_LOOP(c, C) {
    double s0 = 0, s1 = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      const double2 p = partial[k * C + c];
      s0 += p.x, s1 += p.y;
    }
    f(c, s0, s1);
  }
}

template <typename Term, typename Fin>
cudaError_t channelReduce(const Term &t, const Fin &f, int64_t A, int64_t C, int64_t B, void *scratch, cudaStream_t s) {
  const ChannelPlan p = channelPlan(A, C, B);
  auto *partial = static_cast<double2 *>(scratch);
  if (p.cols)
    colPartialKernel<<<dim3(unsigned((C + 31) / 32), unsigned(p.chunks)), dim3(32, 8), 0, s>>>(t, A, C, p.per,
                                                                                               partial);
  else
    rowPartialKernel<<<unsigned(C * p.chunks), kThreads, 0, s>>>(t, A, C, B, p.chunks, p.per, partial);
  finishKernel<<<gridFor(C), kThreads, 0, s>>>(f, partial, p.chunks, C);
  return cudaGetLastError();
}

// --- Finishers: per channel, from the two totals -----------------------------------------------

struct StoreFin {
  Ref y;
  double scale;
  __device__ void operator()(int64_t c, double s0, double) const { stAny(y, c, scale * s0); }
};
struct MeanFin {
  double *mean;
  double m;
  __device__ void operator()(int64_t c, double s0, double) const { mean[c] = m > 0 ? s0 / m : 0.0; }
};
// Batch statistics: mean, inv std and the running update out; scale a = gamma inv_std in chan.
struct StatsFin {
  double *mean, *a, *b;
  Ref gamma, beta, meanOut, invStdOut, runMean, runVar;
  double m, eps, momentum;
  __device__ void operator()(int64_t c, double s0, double) const {
    const double mu = mean[c], var = m > 0 ? s0 / m : 0.0;
    const double is = 1.0 / sqrt(var + eps);
    stAny(meanOut, c, mu);
    stAny(invStdOut, c, is);
    if (runMean.p) {
      const double unbiased = m > 1 ? var * m / (m - 1) : var;
      stAny(runMean, c, (1 - momentum) * ldAny(runMean, c) + momentum * mu);
      stAny(runVar, c, (1 - momentum) * ldAny(runVar, c) + momentum * unbiased);
    }
    a[c] = ldAny(gamma, c) * is;
    b[c] = ldAny(beta, c);
  }
};
// chan: mean, inv std, gamma (filled by prepBackKernel); out: dscale, dbias; k = gamma inv_std,
// mean dy, mean dy xhat into chan.
struct BackFin {
  const double *mean, *is, *gamma;
  double *k, *mdy, *mdyx;
  Ref dScale, dBias;
  double m;
  __device__ void operator()(int64_t c, double s0, double s1) const {
    const double sdyx = s1 * is[c]; // sum dy xhat
    stAny(dScale, c, sdyx);
    stAny(dBias, c, s0);
    k[c] = gamma[c] * is[c];
    mdy[c] = m > 0 ? s0 / m : 0.0;
    mdyx[c] = m > 0 ? sdyx / m : 0.0;
  }
};

__global__ void prepBackKernel(Ref mean, Ref invStd, Ref gamma, double *mu, double *is, double *g, int64_t C) {
  CASTOR_GRID_LOOP(c, C) {
    mu[c] = ldAny(mean, c);
    is[c] = ldAny(invStd, c);
    g[c] = ldAny(gamma, c);
  }
}
__global__ void prepInferenceKernel(Ref gamma, Ref beta, Ref mean, Ref var, double eps, double *mu, double *a,
                                    double *b, int64_t C) {
  CASTOR_GRID_LOOP(c, C) {
    mu[c] = ldAny(mean, c);
    a[c] = ldAny(gamma, c) / sqrt(ldAny(var, c) + eps);
    b[c] = ldAny(beta, c);
  }
}

__device__ __forceinline__ int64_t channelOf(int64_t i, int64_t C, int64_t B) { return (B == 1 ? i : i / B) % C; }

// y = (x - mu[c]) a[c] + b[c]
template <typename IoT>
__global__ void bnApplyKernel(IoT x, IoT y, const double *mu, const double *a, const double *b, int64_t n, int64_t C,
                              int64_t B) {
  using A = typename IoT::Acc;
  CASTOR_GRID_LOOP(i, n) {
    const int64_t c = channelOf(i, C, B);
    y.st(i, (x.ld(i) - A(mu[c])) * A(a[c]) + A(b[c]));
  }
}

// dx = k[c] (dy - mdy[c] - xhat mdyx[c]), xhat = (x - mu[c]) is[c]
template <typename IoT>
__global__ void bnBackApplyKernel(IoT dy, IoT x, IoT dx, const double *mu, const double *is, const double *k,
                                  const double *mdy, const double *mdyx, int64_t n, int64_t C, int64_t B) {
  using A = typename IoT::Acc;
  CASTOR_GRID_LOOP(i, n) {
    const int64_t c = channelOf(i, C, B);
    const A xhat = (x.ld(i) - A(mu[c])) * A(is[c]);
    dx.st(i, A(k[c]) * (dy.ld(i) - A(mdy[c]) - xhat * A(mdyx[c])));
  }
}

__device__ __forceinline__ void runningUpdateOne(Ref rm, Ref rv, Ref mean, Ref invStd, int64_t c, double momentum,
                                                 double eps, int64_t count) {
  const double correction = count > 1 ? double(count) / double(count - 1) : 1.0;
  const double is = ldAny(invStd, c);
  const double varBiased = 1.0 / (is * is) - eps;
  stAny(rm, c, (1 - momentum) * ldAny(rm, c) + momentum * ldAny(mean, c));
  stAny(rv, c, (1 - momentum) * ldAny(rv, c) + momentum * varBiased * correction);
}

__global__ void batchNormRunningUpdateKernel(Ref rm, Ref rv, Ref mean, Ref invStd, Ref found, int64_t C,
                                             double momentum, double eps, int64_t count) {
  if (found.p && ldAny(found, 0) != 0.0)
    return; // a skipped step: the statistics keep their bytes
  CASTOR_GRID_LOOP(c, C) {
    runningUpdateOne(rm, rv, mean, invStd, c, momentum, eps, count);
  }
}

__global__ void batchNormRunningUpdateAllKernel(const RunningUpdate *entries, int n, Ref found) {
  if (found.p && ldAny(found, 0) != 0.0)
    return;
  for (int k = blockIdx.x; k < n; k += gridDim.x) {
    const RunningUpdate u = entries[k];
    for (int64_t c = threadIdx.x; c < u.C; c += blockDim.x)
      runningUpdateOne(u.runMean, u.runVar, u.mean, u.invStd, c, u.momentum, u.eps, u.count);
  }
}

__global__ void batchNormInvStdKernel(Ref var, float *invStd, int64_t C, double eps) {
  CASTOR_GRID_LOOP(c, C) {
    invStd[c] = float(1.0 / sqrt(ldAny(var, c) + eps));
  }
}

// --- General reduction -----------------------------------------------------------------------------

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
template <typename IoX> __global__ void reduceThreadKernel(IoX x, Ref y, Reduction r, double scale) {
  using A = typename IoX::Acc;
  CASTOR_GRID_LOOP(o, r.outCount) {
    const int64_t base = unravel(o, r.keptRank, r.kept, r.keptStride);
    A s = 0;
    for (int64_t j = 0; j < r.redCount; ++j)
      s += x.ld(base + unravel(j, r.redRank, r.red, r.redStride));
    stAny(y, o, scale * double(s));
  }
}

// One block per output (long reductions).
template <typename IoX> __global__ void reduceBlockKernel(IoX x, Ref y, Reduction r, double scale) {
  using A = typename IoX::Acc;
  for (int64_t o = blockIdx.x; o < r.outCount; o += gridDim.x) {
    const int64_t base = unravel(o, r.keptRank, r.kept, r.keptStride);
    A s = 0;
    for (int64_t j = threadIdx.x; j < r.redCount; j += blockDim.x)
      s += x.ld(base + unravel(j, r.redRank, r.red, r.redStride));
    const double total = blockSum(double(s));
    if (threadIdx.x == 0)
      stAny(y, o, scale * total);
  }
}

// --- Global average pooling ------------------------------------------------------------------------

// Channels-last x [N, inner, C]: a thread per (n, c), coalesced along c.
template <typename IoT> __global__ void gapColsKernel(IoT x, IoT y, int64_t N, int64_t C, int64_t inner) {
  using A = typename IoT::Acc;
  CASTOR_GRID_LOOP(o, N * C) {
    const int64_t n = o / C, c = o - n * C;
    const int64_t base = n * inner * C + c;
    A s = 0;
    for (int64_t j = 0; j < inner; ++j)
      s += x.ld(base + j * C);
    y.st(o, s / A(inner));
  }
}

// Row-major x [N*C, inner]: a warp per row.
template <typename IoT> __global__ void gapRowsKernel(IoT x, IoT y, int64_t rows, int64_t inner) {
  using A = typename IoT::Acc;
  const int lane = threadIdx.x & 31;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t r = warp; r < rows; r += warps) {
    A s = 0;
    for (int64_t j = lane; j < inner; j += 32)
      s += x.ld(r * inner + j);
    s = warpSum(s);
    if (lane == 0)
      y.st(r, s / A(inner));
  }
}

template <typename IoT>
__global__ void gapBackwardKernel(IoT dy, IoT dx, int64_t n, int64_t C, int64_t inner, bool channelsLast) {
  using A = typename IoT::Acc;
  CASTOR_GRID_LOOP(i, n) {
    const int64_t o = channelsLast ? (i / (inner * C)) * C + i % C : i / inner;
    dx.st(i, dy.ld(o) / A(inner));
  }
}

// --- Gradient statistics ---------------------------------------------------------------------------

// scratch: [0] sum |g| over finite, [1] max |g| (bits of a non-negative double), [2] finite
// count, [3] non-finite count (both as unsigned long long). The counts and the maximum come out
// the same in any order; the sum does not: the blocks' sums meet in one atomicAdd, unless
// `partials` is given (deterministic), where each block stores its own for the finish kernel
// to add in block order.
constexpr int kStatsPartials = 60; // scratch[4..63]

template <typename IoT> __global__ void gradientStatsKernel(IoT g, int64_t n, double *scratch, double *partials) {
  double sum = 0, mx = 0, finite = 0, nonFinite = 0;
  CASTOR_GRID_LOOP(i, n) {
    const double v = double(g.ld(i));
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
    if (partials)
      partials[blockIdx.x] = sum;
    else
      atomicAdd(scratch, sum);
    atomicAdd(bits + 2, static_cast<unsigned long long>(finite));
    atomicAdd(bits + 3, static_cast<unsigned long long>(nonFinite));
  }
}

__global__ void gradientStatsFinishKernel(const double *scratch, const double *partials, int blocks, Ref out) {
  const auto *bits = reinterpret_cast<const unsigned long long *>(scratch);
  const double finite = double(bits[2]);
  double sum = scratch[0];
  for (int b = 0; partials && b < blocks; ++b)
    sum += partials[b];
  stAny(out, 0, finite > 0 ? sum / finite : 0.0);
  stAny(out, 1, __longlong_as_double(static_cast<long long>(bits[1])));
  stAny(out, 2, double(bits[3]));
}

} // namespace

// --- Launch functions --------------------------------------------------------------------------------

size_t channelScratchBytes(int64_t A, int64_t C, int64_t B) {
  const ChannelPlan p = channelPlan(A, C, B);
  return size_t(std::max<int64_t>(1, p.chunks * C)) * sizeof(double2);
}

cudaError_t channelSum(Ref x, Ref y, int64_t A, int64_t C, int64_t B, double scale, void *scratch, cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  return withFloatType(x.dt, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    using IoT = typename IoOf<T>::type;
    return channelReduce(SumTerm<IoT>{io<T>(x)}, StoreFin{y, scale}, A, C, B, scratch, s);
  });
}

cudaError_t reduceSum(Ref x, Ref y, const Reduction &r, double scale, cudaStream_t s) {
  if (r.outCount <= 0)
    return cudaSuccess;
  return withFloatType(x.dt, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (r.redCount < 64)
      reduceThreadKernel<<<gridFor(r.outCount), kThreads, 0, s>>>(io<T>(x), y, r, scale);
    else
      reduceBlockKernel<<<unsigned(std::min<int64_t>(r.outCount, 1 << 20)), kThreads, 0, s>>>(io<T>(x), y, r, scale);
    return cudaGetLastError();
  });
}

cudaError_t globalAvgPool(Ref x, Ref y, int64_t N, int64_t C, int64_t inner, bool channelsLast, cudaStream_t s) {
  if (N * C <= 0)
    return cudaSuccess;
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (channelsLast)
      gapColsKernel<<<gridFor(N * C), kThreads, 0, s>>>(io<T>(x), io<T>(y), N, C, inner);
    else
      gapRowsKernel<<<gridFor(N * C * 32), kThreads, 0, s>>>(io<T>(x), io<T>(y), N * C, inner);
    return cudaGetLastError();
  });
}

cudaError_t globalAvgPoolBackward(Ref dy, Ref dx, int64_t N, int64_t C, int64_t inner, bool channelsLast,
                                  cudaStream_t s) {
  const int64_t n = N * C * inner;
  if (n <= 0)
    return cudaSuccess;
  return withSharedType({dy, dx}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    gapBackwardKernel<<<gridFor(n), kThreads, 0, s>>>(io<T>(dy), io<T>(dx), n, C, inner, channelsLast);
    return cudaGetLastError();
  });
}

// Scratch: the channel partials, then 6 arrays of C doubles.
size_t batchNormScratchBytes(int64_t A, int64_t C, int64_t B) {
  return channelScratchBytes(A, C, B) + size_t(6) * size_t(std::max<int64_t>(C, 1)) * sizeof(double);
}

namespace {
double *chanArrays(void *scratch, int64_t A, int64_t C, int64_t B) {
  return reinterpret_cast<double *>(static_cast<char *>(scratch) + channelScratchBytes(A, C, B));
}
} // namespace

cudaError_t batchNormTraining(Ref x, Ref gamma, Ref beta, Ref y, Ref mean, Ref invStd, Ref runMean, Ref runVar,
                              int64_t A, int64_t C, int64_t B, double eps, double momentum, void *scratch,
                              cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  double *chan = chanArrays(scratch, A, C, B);
  double *mu = chan, *a = chan + C, *b = chan + 2 * C;
  const double m = double(A * B);
  const int64_t n = A * C * B;
  cudaError_t e = withFloatType(x.dt, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    using IoT = typename IoOf<T>::type;
    cudaError_t r = channelReduce(SumTerm<IoT>{io<T>(x)}, MeanFin{mu, m}, A, C, B, scratch, s);
    if (r != cudaSuccess)
      return r;
    StatsFin f{mu, a, b, gamma, beta, mean, invStd, runMean, runVar, m, eps, momentum};
    return channelReduce(SqDevTerm<IoT>{io<T>(x), mu}, f, A, C, B, scratch, s);
  });
  if (e != cudaSuccess || n <= 0)
    return e;
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    bnApplyKernel<<<gridFor(n), kThreads, 0, s>>>(io<T>(x), io<T>(y), mu, a, b, n, C, B);
    return cudaGetLastError();
  });
}

cudaError_t batchNormInference(Ref x, Ref gamma, Ref beta, Ref mean, Ref var, Ref y, int64_t A, int64_t C, int64_t B,
                               double eps, void *scratch, cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  double *chan = chanArrays(scratch, A, C, B);
  double *mu = chan, *a = chan + C, *b = chan + 2 * C;
  const int64_t n = A * C * B;
  prepInferenceKernel<<<gridFor(C), kThreads, 0, s>>>(gamma, beta, mean, var, eps, mu, a, b, C);
  if (n <= 0)
    return cudaGetLastError();
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    bnApplyKernel<<<gridFor(n), kThreads, 0, s>>>(io<T>(x), io<T>(y), mu, a, b, n, C, B);
    return cudaGetLastError();
  });
}

cudaError_t batchNormBackward(Ref dy, Ref x, Ref gamma, Ref mean, Ref invStd, Ref dx, Ref dScale, Ref dBias,
                              int64_t A, int64_t C, int64_t B, void *scratch, cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  double *chan = chanArrays(scratch, A, C, B);
  double *mu = chan, *is = chan + C, *g = chan + 2 * C, *k = chan + 3 * C, *mdy = chan + 4 * C, *mdyx = chan + 5 * C;
  const double m = double(A * B);
  const int64_t n = A * C * B;
  prepBackKernel<<<gridFor(C), kThreads, 0, s>>>(mean, invStd, gamma, mu, is, g, C);
  return withSharedType({dy, x, dx}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    using IoT = typename IoOf<T>::type;
    BackFin f{mu, is, g, k, mdy, mdyx, dScale, dBias, m};
    cudaError_t r = channelReduce(BnBackTerm<IoT>{io<T>(dy), io<T>(x), mu}, f, A, C, B, scratch, s);
    if (r != cudaSuccess || n <= 0)
      return r;
    bnBackApplyKernel<<<gridFor(n), kThreads, 0, s>>>(io<T>(dy), io<T>(x), io<T>(dx), mu, is, k, mdy, mdyx, n, C, B);
    return cudaGetLastError();
  });
}

cudaError_t batchNormRunningUpdate(Ref runMean, Ref runVar, Ref mean, Ref invStd, Ref found, int64_t C,
                                   double momentum, double eps, int64_t count, cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  batchNormRunningUpdateKernel<<<gridFor(C), kThreads, 0, s>>>(runMean, runVar, mean, invStd, found, C, momentum, eps,
                                                               count);
  return cudaGetLastError();
}

cudaError_t batchNormRunningUpdateAll(const RunningUpdate *deviceEntries, int n, Ref found, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  batchNormRunningUpdateAllKernel<<<n, kThreads, 0, s>>>(deviceEntries, n, found);
  return cudaGetLastError();
}

cudaError_t batchNormInvStd(Ref var, float *invStd, int64_t C, double eps, cudaStream_t s) {
  if (C <= 0)
    return cudaSuccess;
  batchNormInvStdKernel<<<gridFor(C), kThreads, 0, s>>>(var, invStd, C, eps);
  return cudaGetLastError();
}

cudaError_t gradientStats(Ref g, int64_t n, Ref out, double *scratch, bool deterministic, cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(scratch, 0, 4 * sizeof(double), s);
  if (e != cudaSuccess)
    return e;
  // Deterministic: no more blocks than partial sums (the grid loop covers any n).
  double *partials = deterministic ? scratch + 4 : nullptr;
  const int blocks = deterministic ? std::min(gridFor(n), kStatsPartials) : gridFor(n);
  if (n > 0) {
    e = withFloatType(g.dt, [&](auto tag) -> cudaError_t {
      using T = typename decltype(tag)::type;
      gradientStatsKernel<<<blocks, kThreads, 0, s>>>(io<T>(g), n, scratch, partials);
      return cudaGetLastError();
    });
    if (e != cudaSuccess)
      return e;
  }
  gradientStatsFinishKernel<<<1, 1, 0, s>>>(scratch, partials, n > 0 ? blocks : 0, out);
  return cudaGetLastError();
}

} // namespace castor::cuda
