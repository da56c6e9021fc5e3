// The own fused batch-norm-ReLU kernels (batch_norm_relu.h). Channels-last data [rows, C] read in
// packs of V neighbouring channels (16-byte loads when C allows): a block of 256 threads covers
// PB packs of a row and RB = 256 / PB rows at a time; the grid's rows of blocks split the rows,
// each block writing per-channel partial sums that a second kernel merges in a fixed order
// (deterministic for a given GPU). The element-wise passes work pack by pack.
#include "cuda/kernels/batch_norm_relu.h"
#include "cuda/kernels/device_common.cuh"

namespace castor::cuda {
namespace {

using namespace detail;

constexpr int kBlock = 256, kMaxVec = 8;

// How a block covers [rows, C] in packs of V channels.
struct Tiling {
  int V, P, PB, RB; // channels per pack, packs per row, packs per block, rows per block pass
  dim3 grid;        // (channel blocks, row groups)
};
// Row groups of at least `minRows` rows each (reductions want 16 rows a group before they merge;
// the element-wise pass takes any).
Tiling tiling(int64_t rows, int64_t C, int V, int64_t minRows = 16) {
  Tiling t;
  t.V = V;
  t.P = int(C / V);
  t.PB = std::min(t.P, kBlock);
  t.RB = kBlock / t.PB;
  const int64_t channelBlocks = (t.P + t.PB - 1) / t.PB;
  const int64_t want = std::max<int64_t>(1, int64_t(smCount()) * kBlocksPerSm / channelBlocks);
  const int64_t most = std::max<int64_t>(1, rows / (int64_t(t.RB) * minRows));
  t.grid = dim3(unsigned(channelBlocks), unsigned(std::min<int64_t>({want, most, 65535})));
  return t;
}

template <typename T, int V> __device__ __forceinline__ void load(const T *p, float (&v)[V]) {
  const Pack<T, V> q = *reinterpret_cast<const Pack<T, V> *>(p);
#pragma unroll
  for (int j = 0; j < V; ++j)
    v[j] = toAcc(q.v[j]);
}
template <typename T, int V> __device__ __forceinline__ void store(T *p, const float (&v)[V]) {
  Pack<T, V> q;
#pragma unroll
  for (int j = 0; j < V; ++j)
    q.v[j] = fromAcc<T>(v[j]);
  *reinterpret_cast<Pack<T, V> *>(p) = q;
}

// Sums over the block's rows of the V channels of each thread's pack: a[j], b[j] in, the block's
// totals out in the threads of row 0 (whose `first` is true), written to partial [2][groups][C].
template <int V>
__device__ __forceinline__ void blockPartials(float (&a)[V], float (&b)[V], int PB, int RB, int64_t c0, bool active,
                                              int64_t C, float *partial) {
  __shared__ float sa[kBlock * kMaxVec], sb[kBlock * kMaxVec];
  const int t = threadIdx.x;
#pragma unroll
  for (int j = 0; j < V; ++j)
    sa[t * V + j] = a[j], sb[t * V + j] = b[j];
  __syncthreads();
  if (t < PB && active) {
    for (int r = 1; r < RB; ++r)
#pragma unroll
      for (int j = 0; j < V; ++j)
        a[j] += sa[(r * PB + t) * V + j], b[j] += sb[(r * PB + t) * V + j];
    const int64_t groups = gridDim.y, at = int64_t(blockIdx.y) * C + c0;
#pragma unroll
    for (int j = 0; j < V; ++j)
      partial[at + j] = a[j], partial[groups * C + at + j] = b[j];
  }
}

// Per (row group, channel): the sum and the sum of squares of x - shift, shift = x's first row
// (close to the mean, so that the squares do not cancel).
template <typename T, int V>
__global__ void statsKernel(const T *x, int64_t rows, int64_t C, int P, int PB, int RB, float *partial) {
  const int t = threadIdx.x, packLocal = t % PB, row0 = t / PB;
  const int64_t pack = int64_t(blockIdx.x) * PB + packLocal, c0 = pack * V;
  const bool active = pack < P && row0 < RB;
  float s[V] = {}, q[V] = {}, shift[V] = {};
  if (active) {
    load<T, V>(x + c0, shift);
    for (int64_t r = int64_t(blockIdx.y) * RB + row0; r < rows; r += int64_t(gridDim.y) * RB) {
      float v[V];
      load<T, V>(x + r * C + c0, v);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float d = v[j] - shift[j];
        s[j] += d, q[j] += d * d;
      }
    }
  }
  blockPartials<V>(s, q, PB, RB, c0, active, C, partial);
}

// Per channel: mean and inv_std from the partial sums (merged in fp64), and a = scale inv_std
// (y = (x - mean) a + bias).
// One block per channel, its threads over the row groups.
__global__ void statsFinishKernel(const void *x, int dt, const float *partial, int groups, int64_t rows, int64_t C,
                                  double eps, const float *scale, float *mean, float *invStd, float *coef) {
  const int64_t c = blockIdx.x;
  double s = 0, q = 0;
  for (int g = threadIdx.x; g < groups; g += blockDim.x)
    s += partial[int64_t(g) * C + c], q += partial[(int64_t(groups) + g) * C + c];
  s = blockSum(s);
  q = blockSum(q);
  if (threadIdx.x == 0) {
    const double shift = ldAny(x, dt, c), m = double(rows);
    const double d = s / m, var = fmax(q / m - d * d, 0.0);
    const double is = 1.0 / sqrt(var + eps);
    mean[c] = float(shift + d), invStd[c] = float(is);
    coef[c] = float(double(scale[c]) * is);
  }
}

// The element-wise pass over channels-last rows, tiled as the statistics are (Tiling): each
// thread keeps its pack's per-channel coefficients in registers and walks the rows with U
// packs in flight, so that the pass streams at memory speed without a division per pack.
// t = (x - mean) coef + bias rounded to T, then + z (rounded), then relu when Relu.
template <typename T, int V, bool Relu>
__global__ void applyRowsKernel(const T *x, const T *z, T *y, const float *coef, const float *mean,
                                const float *bias, int64_t rows, int64_t C, int P, int PB, int RB) {
  constexpr int U = 4;
  const int tp = int(threadIdx.x) % PB, tr = int(threadIdx.x) / PB;
  const int p = int(blockIdx.x) * PB + tp;
  if (p >= P || tr >= RB)
    return;
  const int64_t c0 = int64_t(p) * V;
  float a[V], m[V], b[V];
#pragma unroll
  for (int j = 0; j < V; ++j)
    a[j] = coef[c0 + j], m[j] = mean[c0 + j], b[j] = bias[c0 + j];
  const int64_t step = int64_t(gridDim.y) * RB;
  for (int64_t r = int64_t(blockIdx.y) * RB + tr; r < rows; r += U * step) {
    float v[U][V], w[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t row = r + u * step;
      if (row < rows) {
        load<T, V>(x + row * C + c0, v[u]);
        if (z)
          load<T, V>(z + row * C + c0, w[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t row = r + u * step;
      if (row >= rows)
        break;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        float t = toAcc(fromAcc<T>((v[u][j] - m[j]) * a[j] + b[j]));
        if (z)
          t = toAcc(fromAcc<T>(t + w[u][j]));
        v[u][j] = !Relu || t > 0.f ? t : (t != t ? t : 0.f);
      }
      store<T, V>(y + row * C + c0, v[u]);
    }
  }
}

// coef = scale inv_std per channel (batch_norm_apply).
__global__ void coefKernel(const float *scale, const float *invStd, float *coef, int64_t C) {
  CASTOR_GRID_LOOP(c, C) { coef[c] = scale[c] * invStd[c]; }
}

// batch_norm_apply on channels-first data [A, C, B], element by element.
template <typename T, bool Relu>
__global__ void applyStridedKernel(const T *x, const T *z, T *y, const float *coef, const float *mean,
                                   const float *bias, int64_t n, int64_t C, int64_t B) {
  CASTOR_GRID_LOOP(i, n) {
    const int64_t c = (i / B) % C;
    float t = toAcc(fromAcc<T>((toAcc(x[i]) - mean[c]) * coef[c] + bias[c]));
    if (z)
      t = toAcc(fromAcc<T>(t + toAcc(z[i])));
    y[i] = fromAcc<T>(!Relu || t > 0.f ? t : (t != t ? t : 0.f));
  }
}

// Per (row group, channel): sum of g and of g (x - mean), g = dy where y > 0.
template <typename T, int V>
__global__ void gradSumsKernel(const T *dy, const T *x, const T *y, const float *mean, int64_t rows, int64_t C, int P,
                               int PB, int RB, float *partial) {
  const int t = threadIdx.x, packLocal = t % PB, row0 = t / PB;
  const int64_t pack = int64_t(blockIdx.x) * PB + packLocal, c0 = pack * V;
  const bool active = pack < P && row0 < RB;
  float sg[V] = {}, sgx[V] = {}, mu[V] = {};
  if (active) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      mu[j] = mean[c0 + j];
    for (int64_t r = int64_t(blockIdx.y) * RB + row0; r < rows; r += int64_t(gridDim.y) * RB) {
      float d[V], xv[V], yv[V];
      load<T, V>(dy + r * C + c0, d);
      load<T, V>(x + r * C + c0, xv);
      load<T, V>(y + r * C + c0, yv);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float g = yv[j] > 0.f ? d[j] : 0.f;
        sg[j] += g, sgx[j] += g * (xv[j] - mu[j]);
      }
    }
  }
  blockPartials<V>(sg, sgx, PB, RB, c0, active, C, partial);
}

// Per channel: dbias = sum g, dscale = sum g xhat, and dx = A g + B (x - mean) + D with
// A = scale inv_std, B = -scale inv_std^2 dscale / m, D = -scale inv_std dbias / m.
// One block per channel, its threads over the row groups.
__global__ void gradFinishKernel(const float *partial, int groups, int64_t C, int64_t rows, const float *scale,
                                 const float *invStd, float *dscale, float *dbias, float *coef /* [3][C] */) {
  const int64_t c = blockIdx.x;
  double sg = 0, sgx = 0;
  for (int g = threadIdx.x; g < groups; g += blockDim.x)
    sg += partial[int64_t(g) * C + c], sgx += partial[(int64_t(groups) + g) * C + c];
  sg = blockSum(sg);
  sgx = blockSum(sgx);
  if (threadIdx.x == 0) {
    const double is = invStd[c], ds = sgx * is, k = double(scale[c]) * is / double(rows);
    dscale[c] = float(ds), dbias[c] = float(sg);
    coef[c] = float(double(scale[c]) * is);
    coef[C + c] = float(-k * is * ds);
    coef[2 * C + c] = float(-k * sg);
  }
}

template <typename T, int V>
__global__ void gradApplyKernel(const T *dy, const T *x, const T *y, T *dx, T *dz, const float *coef,
                                const float *mean, int64_t packs, int P, int64_t C) {
  CASTOR_GRID_LOOP(i, packs) {
    const int c0 = int(i % P) * V;
    float d[V], xv[V], yv[V];
    load<T, V>(dy + i * V, d);
    load<T, V>(x + i * V, xv);
    load<T, V>(y + i * V, yv);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int c = c0 + j;
      const float g = yv[j] > 0.f ? d[j] : 0.f;
      d[j] = g;
      xv[j] = coef[c] * g + coef[C + c] * (xv[j] - mean[c]) + coef[2 * C + c];
    }
    store<T, V>(dx + i * V, xv);
    if (dz)
      store<T, V>(dz + i * V, d);
  }
}

// partial [2][groups][C], then coef [3][C].
struct Scratch {
  float *partial, *coef;
};
Scratch scratchOf(void *workspace, const Tiling &t, int64_t C) {
  Scratch s;
  s.partial = static_cast<float *>(workspace);
  s.coef = s.partial + 2 * int64_t(t.grid.y) * C;
  return s;
}

// f(Tag<T>, V) for the data dtype, with V the widest pack that divides C and fits 16 bytes.
template <typename F> cudaError_t withDataType(int dt, int64_t C, F &&f) {
  auto go = [&](auto tag, auto vec) -> cudaError_t {
    using T = typename decltype(tag)::type;
    constexpr int W = decltype(vec)::value;
    if (C % W == 0)
      return f(tag, std::integral_constant<int, W>{});
    return f(tag, std::integral_constant<int, 1>{});
  };
  switch (dt) {
  case kF32:
    return go(Tag<float>{}, std::integral_constant<int, 4>{});
  case kF16:
    return go(Tag<__half>{}, std::integral_constant<int, 8>{});
  case kBF16:
    return go(Tag<__nv_bfloat16>{}, std::integral_constant<int, 8>{});
  default:
    return cudaErrorNotSupported;
  }
}

int vecFor(int dt, int64_t C) {
  const int w = dt == kF32 ? 4 : 8;
  return C % w == 0 ? w : 1;
}

} // namespace

size_t bnReluWorkspaceBytes(int64_t rows, int64_t C) {
  // The most row groups any pack width gives (the dtype is not known here).
  int64_t groups = 1;
  for (int V : {1, 4, 8})
    if (C % V == 0)
      groups = std::max<int64_t>(groups, tiling(rows, C, V).grid.y);
  return sizeof(float) * size_t(2 * groups * C + 3 * C);
}

cudaError_t bnReluForward(Ref x, Ref z, const float *scale, const float *bias, Ref y, float *mean, float *invStd,
                          int64_t rows, int64_t C, double eps, void *workspace, cudaStream_t s) {
  if (x.dt != y.dt || (z.p && z.dt != x.dt))
    return cudaErrorInvalidValue;
  const Tiling t = tiling(rows, C, vecFor(x.dt, C));
  const Scratch w = scratchOf(workspace, t, C);
  return withDataType(x.dt, C, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    statsKernel<T, V><<<t.grid, kBlock, 0, s>>>(static_cast<const T *>(x.p), rows, C, t.P, t.PB, t.RB, w.partial);
    statsFinishKernel<<<unsigned(C), kThreads, 0, s>>>(x.p, x.dt, w.partial, int(t.grid.y), rows, C, eps, scale, mean,
                                                      invStd, w.coef);
    applyRowsKernel<T, V, true><<<tiling(rows, C, V, 1).grid, kBlock, 0, s>>>(
        static_cast<const T *>(x.p), static_cast<const T *>(z.p), static_cast<T *>(y.p), w.coef, mean, bias, rows, C,
        t.P, t.PB, t.RB);
    return cudaGetLastError();
  });
}

cudaError_t bnApply(Ref x, Ref z, const float *scale, const float *bias, const float *mean, const float *invStd,
                    Ref y, int64_t A, int64_t C, int64_t B, bool relu, float *coef, cudaStream_t s) {
  if (x.dt != y.dt || (z.p && z.dt != x.dt))
    return cudaErrorInvalidValue;
  const int64_t n = A * C * B;
  if (n <= 0)
    return cudaSuccess;
  coefKernel<<<gridFor(C), kThreads, 0, s>>>(scale, invStd, coef, C);
  return withDataType(x.dt, C, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    const T *xp = static_cast<const T *>(x.p), *zp = static_cast<const T *>(z.p);
    T *yp = static_cast<T *>(y.p);
    if (B == 1) { // channels last: rows of C, packs of V channels
      const int64_t rows = A;
      const Tiling t = tiling(rows, C, V, 1);
      const dim3 grid = t.grid;
      if (relu)
        applyRowsKernel<T, V, true><<<grid, kBlock, 0, s>>>(xp, zp, yp, coef, mean, bias, rows, C, t.P, t.PB, t.RB);
      else
        applyRowsKernel<T, V, false><<<grid, kBlock, 0, s>>>(xp, zp, yp, coef, mean, bias, rows, C, t.P, t.PB, t.RB);
    } else if (relu) {
      applyStridedKernel<T, true><<<gridFor(n), kThreads, 0, s>>>(xp, zp, yp, coef, mean, bias, n, C, B);
    } else {
      applyStridedKernel<T, false><<<gridFor(n), kThreads, 0, s>>>(xp, zp, yp, coef, mean, bias, n, C, B);
    }
    return cudaGetLastError();
  });
}

cudaError_t bnReluBackward(Ref dy, Ref x, Ref y, const float *scale, const float *mean, const float *invStd, Ref dx,
                           Ref dz, float *dscale, float *dbias, int64_t rows, int64_t C, void *workspace,
                           cudaStream_t s) {
  if (dy.dt != x.dt || y.dt != x.dt || dx.dt != x.dt || (dz.p && dz.dt != x.dt))
    return cudaErrorInvalidValue;
  const Tiling t = tiling(rows, C, vecFor(x.dt, C));
  const Scratch w = scratchOf(workspace, t, C);
  return withDataType(x.dt, C, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    const T *pdy = static_cast<const T *>(dy.p), *px = static_cast<const T *>(x.p), *py = static_cast<const T *>(y.p);
    gradSumsKernel<T, V><<<t.grid, kBlock, 0, s>>>(pdy, px, py, mean, rows, C, t.P, t.PB, t.RB, w.partial);
    gradFinishKernel<<<unsigned(C), kThreads, 0, s>>>(w.partial, int(t.grid.y), C, rows, scale, invStd, dscale, dbias,
                                                     w.coef);
    const int64_t packs = rows * C / V;
    gradApplyKernel<T, V><<<gridFor(packs), kThreads, 0, s>>>(pdy, px, py, static_cast<T *>(dx.p),
                                                               static_cast<T *>(dz.p), w.coef, mean, packs, t.P, C);
    return cudaGetLastError();
  });
}

} // namespace castor::cuda
