// The own fused batch-norm-ReLU kernels (batch_norm_relu.h). Channels-last data [rows, C] read in
// packs of V neighbouring channels (16-byte loads when C allows): a block of 256 threads covers
// PB packs of a row and RB = 256 / PB rows at a time, each thread keeping U rows' loads in
// flight; the grid's rows of blocks split the rows, one resident wave of blocks. The reductions
// write per-block partial sums that a second kernel merges per channel in a fixed order
// (deterministic for a given GPU); they cover at most kReducePacks packs of a row per block, so
// that a wide layer with few rows (C = 2048 at 7x7) writes few partials, and the merge reads
// them coalesced. The element-wise passes keep their pack's per-channel coefficients in registers.
// A forward with a residual can record the ReLU's mask, a byte per pack of a row (bit j: channel j
// of the pack passed), which its backward reads instead of y: an eighth of y's bytes in f16.
#include "cuda/kernels/batch_norm_relu.h"
#include "cuda/kernels/device_common.cuh"

namespace castor::cuda {
namespace {

using namespace detail;

constexpr int kBlock = 256, kMaxVec = 8;
// Packs of a row one reduction block covers (so at least 256 / 32 = 8 rows a pass).
constexpr int kReducePacks = 32;
// The per-channel merge: 32 channels (one coalesced 128-byte read per group) x 32 lanes over
// the groups.
constexpr int kMergeChannels = 32, kMergeLanes = 32;

// How a block covers [rows, C] in packs of V channels.
struct Tiling {
  int V, P, PB, RB; // channels per pack, packs per row, packs per block, rows per block pass
  dim3 grid;        // (channel blocks, row groups)
};
// Up to maxPB packs of a row per block; blocksPerSm blocks of the grid per multiprocessor (the
// kernel's occupancy: every block walks the same number of rows, so a grid of one resident wave
// leaves no partly filled last wave); row groups of at least minRows rows a thread.
Tiling tiling(int64_t rows, int64_t C, int V, int maxPB, int blocksPerSm, int64_t minRows) {
  Tiling t;
  t.V = V;
  t.P = int(C / V);
  t.PB = std::min(t.P, maxPB);
  t.RB = kBlock / t.PB;
  const int64_t channelBlocks = (t.P + t.PB - 1) / t.PB;
  const int64_t want = std::max<int64_t>(1, int64_t(smCount()) * blocksPerSm / channelBlocks);
  const int64_t most = std::max<int64_t>(1, rows / (int64_t(t.RB) * minRows));
  t.grid = dim3(unsigned(channelBlocks), unsigned(std::min<int64_t>({want, most, 65535})));
  return t;
}
// Resident blocks of `kernel` per multiprocessor (at most kBlocksPerSm), once per kernel.
template <typename K> int residentBlocks(K *kernel) {
  static const int n = [&] {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kBlock, 0) != cudaSuccess || b < 1)
      b = 1;
    return std::min(b, kBlocksPerSm);
  }();
  return n;
}
// The element-wise passes: up to a whole row of packs per block, row groups of any size.
template <typename K> Tiling elementwiseTiling(K *kernel, int64_t rows, int64_t C, int V) {
  return tiling(rows, C, V, kBlock, residentBlocks(kernel), 1);
}
// The reductions: at most kReducePacks packs a block, row groups of at least 16 rows a thread
// before they merge. blocksPerSm = kBlocksPerSm bounds the workspace.
Tiling reduceTiling(int64_t rows, int64_t C, int V, int blocksPerSm = kBlocksPerSm) {
  return tiling(rows, C, V, kReducePacks, blocksPerSm, 16);
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

// A thread's walk over its rows: row0 of each of its block's passes over the grid's row groups,
// U rows at a time into a fresh Buffer (the U rows' registers). load(buffer, u, row) runs for the
// U rows first, so that their loads are in flight together, then use(buffer, u, row) for each;
// rows from `rows` on are skipped.
template <int U, typename Buffer, typename Load, typename Use>
__device__ __forceinline__ void walkRows(int64_t rows, int RB, int row0, Load &&load, Use &&use) {
  const int64_t step = int64_t(gridDim.y) * RB;
  for (int64_t r = int64_t(blockIdx.y) * RB + row0; r < rows; r += U * step) {
    Buffer buffer;
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (r + u * step < rows)
        load(buffer, u, r + u * step);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (r + u * step >= rows)
        break;
      use(buffer, u, r + u * step);
    }
  }
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

constexpr float kInfinity = __builtin_huge_valf();

// scale inv_std, from the saved (rounded) inv_std: the backward that recomputes the ReLU's mask
// gets the forward's coefficient bit for bit.
__host__ __device__ __forceinline__ float coefOf(float scale, float invStd) {
  return float(double(scale) * double(invStd));
}
// The normalised value t = (x - mean) coef + bias rounded to T, with one explicit fma so that the
// forward and the backward that recomputes it round alike.
template <typename T> __device__ __forceinline__ float normalized(float x, float mean, float coef, float bias) {
  return toAcc(fromAcc<T>(__fmaf_rn(x - mean, coef, bias)));
}

// Per (row group, channel): the sum and the sum of squares of x - shift, shift = x's first row
// (close to the mean, so that the squares do not cancel). U rows' loads in flight a thread.
template <typename T, int V>
__global__ void statsKernel(const T *x, int64_t rows, int64_t C, int P, int PB, int RB, float *partial) {
  constexpr int U = 4;
  const int t = threadIdx.x, packLocal = t % PB, row0 = t / PB;
  const int64_t pack = int64_t(blockIdx.x) * PB + packLocal, c0 = pack * V;
  const bool active = pack < P && row0 < RB;
  float s[V] = {}, q[V] = {}, shift[V] = {};
  if (active) {
    load<T, V>(x + c0, shift);
    struct Rows {
      float v[U][V];
    };
    walkRows<U, Rows>(
        rows, RB, row0, [&](Rows &b, int u, int64_t row) { load<T, V>(x + row * C + c0, b.v[u]); },
        [&](Rows &b, int u, int64_t) {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const float d = b.v[u][j] - shift[j];
            s[j] += d, q[j] += d * d;
          }
        });
  }
  blockPartials<V>(s, q, PB, RB, c0, active, C, partial);
}

// The per-channel merge of partial [2][groups][C] in a fixed order: the threads of a block are
// kMergeChannels channels (threadIdx.x) x kMergeLanes lanes (threadIdx.y), each lane summing
// every kMergeLanes-th group; lane 0 adds the lanes in order. The totals are valid in lane 0.
__device__ __forceinline__ void mergeGroups(const float *partial, int groups, int64_t C, int64_t c, double &a,
                                            double &b) {
  __shared__ double sa[kMergeLanes][kMergeChannels + 1], sb[kMergeLanes][kMergeChannels + 1];
  a = 0, b = 0;
  if (c < C)
    for (int g = threadIdx.y; g < groups; g += kMergeLanes)
      a += partial[int64_t(g) * C + c], b += partial[(int64_t(groups) + g) * C + c];
  sa[threadIdx.y][threadIdx.x] = a, sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0)
    for (int l = 1; l < kMergeLanes; ++l)
      a += sa[l][threadIdx.x], b += sb[l][threadIdx.x];
}
const dim3 kMergeBlock(kMergeChannels, kMergeLanes);
unsigned mergeGrid(int64_t C) { return unsigned((C + kMergeChannels - 1) / kMergeChannels); }

// Per channel: mean and inv_std from the partial sums (merged in fp64), and a = scale inv_std
// (y = (x - mean) a + bias).
__global__ void statsFinishKernel(const void *x, int dt, const float *partial, int groups, int64_t rows, int64_t C,
                                  double eps, const float *scale, float *mean, float *invStd, float *coef) {
  const int64_t c = int64_t(blockIdx.x) * kMergeChannels + threadIdx.x;
  double s, q;
  mergeGroups(partial, groups, C, c, s, q);
  if (threadIdx.y == 0 && c < C) {
    const double shift = ldAny(x, dt, c), m = double(rows);
    const double d = s / m, var = fmax(q / m - d * d, 0.0);
    const float is = float(1.0 / sqrt(var + eps));
    mean[c] = float(shift + d), invStd[c] = is;
    coef[c] = coefOf(scale[c], is);
  }
}

// Per channel: mean and inv_std from the sum and the sum of squares of x over `rows` rows
// (sums [2][C], computed elsewhere: a convolution's epilogue), and a = scale inv_std. The variance
// E[x^2] - E[x]^2 in fp64 from the fp32 sums: without a shift it loses the digits the mean's
// square shares with E[x^2], harmless while |mean| stays within a few hundred standard deviations.
__global__ void sumsFinishKernel(const float *sums, int64_t rows, int64_t C, double eps, const float *scale,
                                 float *mean, float *invStd, float *coef) {
  CASTOR_GRID_LOOP(c, C) {
    const double m = double(rows), d = double(sums[c]) / m;
    const double var = fmax(double(sums[C + c]) / m - d * d, 0.0);
    const float is = float(1.0 / sqrt(var + eps));
    mean[c] = float(d), invStd[c] = is;
    coef[c] = coefOf(scale[c], is);
  }
}

// relu(t) (hi infinite) or clip(t, 0, hi); NaN stays NaN.
__device__ __forceinline__ float activated(float t, float hi) {
  return t > 0.f ? (t < hi ? t : hi) : (t != t ? t : 0.f);
}

// Whether the activation's gradient passes at the normalised value t: t > 0 for relu (hi
// infinite), 0 <= t <= hi for ReLU6's clip (clip_backward's rule, bounds included).
__device__ __forceinline__ bool activationPasses(float t, bool clip, float hi) {
  return clip ? (t >= 0.f && t <= hi) : t > 0.f;
}

// The element-wise pass over channels-last rows, tiled as the statistics are (Tiling): each
// thread keeps its pack's per-channel coefficients in registers and walks the rows with U
// packs in flight, so that the pass streams at memory speed without a division per pack.
// t = (x - mean) coef + bias rounded to T, then + z (rounded), then when Relu relu, or with a
// finite `hi` ReLU6's clip to [0, hi].
// With Mask, bit j of mask[row P + pack] records whether element j of the pack's stored y is
// above 0 (the ReLU passed). A template parameter: a branch on a null mask costs the pass without
// one a third of its bandwidth. Two blocks a multiprocessor at the least (128 registers a thread):
// the mask's bits would otherwise take the f16 pass past that, to one block and half the bandwidth.
template <typename T, int V, bool Relu, bool Mask = false>
__global__ void __launch_bounds__(kBlock, 2) applyRowsKernel(const T *x, const T *z, T *y, uint8_t *mask, const float *coef, const float *mean,
                                const float *bias, int64_t rows, int64_t C, int P, int PB, int RB, float hi) {
  constexpr int U = Mask ? 3 : 4; // the mask's bits and index: within 128 registers without spilling
  const int tp = int(threadIdx.x) % PB, tr = int(threadIdx.x) / PB;
  const int p = int(blockIdx.x) * PB + tp;
  if (p >= P || tr >= RB)
    return;
  const int64_t c0 = int64_t(p) * V;
  float a[V], m[V], b[V];
#pragma unroll
  for (int j = 0; j < V; ++j)
    a[j] = coef[c0 + j], m[j] = mean[c0 + j], b[j] = bias[c0 + j];
  struct Rows {
    float v[U][V], w[U][V];
  };
  walkRows<U, Rows>(
      rows, RB, tr,
      [&](Rows &r, int u, int64_t row) {
        load<T, V>(x + row * C + c0, r.v[u]);
        if (z)
          load<T, V>(z + row * C + c0, r.w[u]);
      },
      [&](Rows &r, int u, int64_t row) {
        unsigned bits = 0;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          float t = normalized<T>(r.v[u][j], m[j], a[j], b[j]);
          if (z)
            t = toAcc(fromAcc<T>(t + r.w[u][j]));
          r.v[u][j] = !Relu ? t : activated(t, hi);
          // t is a T value, and so is its activation: y > 0 exactly where it is.
          if constexpr (Mask)
            bits |= unsigned(r.v[u][j] > 0.f) << j;
        }
        store<T, V>(y + row * C + c0, r.v[u]);
        if constexpr (Mask)
          mask[row * P + p] = uint8_t(bits);
      });
}

// coef = scale inv_std per channel (batch_norm_apply).
__global__ void coefKernel(const float *scale, const float *invStd, float *coef, int64_t C) {
  CASTOR_GRID_LOOP(c, C) { coef[c] = scale[c] * invStd[c]; }
}

// batch_norm_apply on channels-first data [A, C, B], element by element; with Relu the
// activation is relu (hi infinite) or clip(t, 0, hi).
template <typename T, bool Relu>
__global__ void applyStridedKernel(const T *x, const T *z, T *y, const float *coef, const float *mean,
                                   const float *bias, int64_t n, int64_t C, int64_t B, float hi) {
  CASTOR_GRID_LOOP(i, n) {
    const int64_t c = (i / B) % C;
    float t = toAcc(fromAcc<T>((toAcc(x[i]) - mean[c]) * coef[c] + bias[c]));
    if (z)
      t = toAcc(fromAcc<T>(t + toAcc(z[i])));
    y[i] = fromAcc<T>(Relu ? activated(t, hi) : t);
  }
}

// Where the backward finds the forward's ReLU mask: recomputed from x (a forward without
// residual), y > 0 read from y, or the bits the forward recorded.
enum class MaskFrom { Recompute, Output, Bits };

// The backward passes' registers for U rows (walkRows' Buffer): dy, x and the mask's source (y,
// or the pack's byte of bits), loaded a pack at element i, pack index `pack` of the rows' packs.
template <typename T, int V, int U, MaskFrom M> struct GradRows {
  float d[U][V], x[U][V], y[U][V] = {};
  unsigned bits[U] = {};
  __device__ __forceinline__ void load(const T *dyp, const T *xp, const T *yp, const uint8_t *mask, int u, int64_t i,
                                       int64_t pack) {
    castor::cuda::load<T, V>(dyp + i, d[u]);
    castor::cuda::load<T, V>(xp + i, x[u]);
    if constexpr (M == MaskFrom::Output)
      castor::cuda::load<T, V>(yp + i, y[u]);
    if constexpr (M == MaskFrom::Bits)
      bits[u] = mask[pack];
  }
  // Whether the forward's activation let element j of row u through: y > 0 (relu), its recorded
  // bit, or activationPasses at t recomputed from x as the forward computed it.
  __device__ __forceinline__ bool passes(int u, int j, float mean, float coef, float bias, bool clip,
                                         float hi) const {
    if constexpr (M == MaskFrom::Recompute)
      return activationPasses(normalized<T>(x[u][j], mean, coef, bias), clip, hi);
    else if constexpr (M == MaskFrom::Output)
      return y[u][j] > 0.f;
    else
      return (bits[u] >> j) & 1u;
  }
};

// Per (row group, channel): sum of g and of g (x - mean), g = dy where the ReLU passed. U rows'
// loads in flight a thread.
template <typename T, int V, MaskFrom M>
__global__ void gradSumsKernel(const T *dy, const T *x, const T *y, const uint8_t *mask, const float *mean,
                               const float *scale, const float *invStd, const float *bias, int64_t rows, int64_t C,
                               int P, int PB, int RB, bool clip, float hi, float *partial) {
  constexpr int U = 2;
  const int t = threadIdx.x, packLocal = t % PB, row0 = t / PB;
  const int64_t pack = int64_t(blockIdx.x) * PB + packLocal, c0 = pack * V;
  const bool active = pack < P && row0 < RB;
  float sg[V] = {}, sgx[V] = {}, mu[V] = {}, a[V] = {}, b[V] = {};
  if (active) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      mu[j] = mean[c0 + j];
      if constexpr (M == MaskFrom::Recompute)
        a[j] = coefOf(scale[c0 + j], invStd[c0 + j]), b[j] = bias[c0 + j];
    }
    using Rows = GradRows<T, V, U, M>;
    walkRows<U, Rows>(
        rows, RB, row0, [&](Rows &r, int u, int64_t row) { r.load(dy, x, y, mask, u, row * C + c0, row * P + pack); },
        [&](Rows &r, int u, int64_t) {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const float g = r.passes(u, j, mu[j], a[j], b[j], clip, hi) ? r.d[u][j] : 0.f;
            sg[j] += g, sgx[j] += g * (r.x[u][j] - mu[j]);
          }
        });
  }
  blockPartials<V>(sg, sgx, PB, RB, c0, active, C, partial);
}

// Per channel: dbias = sum g, dscale = sum g xhat, and dx = A g + B (x - mean) + D with
// A = scale inv_std, B = -scale inv_std^2 dscale / m, D = -scale inv_std dbias / m.
__global__ void gradFinishKernel(const float *partial, int groups, int64_t C, int64_t rows, const float *scale,
                                 const float *invStd, float *dscale, float *dbias, float *coef /* [3][C] */) {
  const int64_t c = int64_t(blockIdx.x) * kMergeChannels + threadIdx.x;
  double sg, sgx;
  mergeGroups(partial, groups, C, c, sg, sgx);
  if (threadIdx.y == 0 && c < C) {
    const double is = invStd[c], ds = sgx * is, k = double(scale[c]) * is / double(rows);
    dscale[c] = float(ds), dbias[c] = float(sg);
    coef[c] = coefOf(scale[c], invStd[c]);
    coef[C + c] = float(-k * is * ds);
    coef[2 * C + c] = float(-k * sg);
  }
}

// dx = A g + B (x - mean) + D and dz = g over channels-last rows, tiled as applyRowsKernel: the
// pack's coefficients in registers, U rows' loads in flight a thread. A = scale inv_std is also
// the forward's coefficient, from which Recompute recomputes the ReLU's mask.
template <typename T, int V, MaskFrom M>
__global__ void gradApplyKernel(const T *dy, const T *x, const T *y, const uint8_t *mask, T *dx, T *dz,
                                const float *coef, const float *mean, const float *bias, int64_t rows, int64_t C,
                                int P, int PB, int RB, bool clip, float hi) {
  constexpr int U = 2;
  const int tp = int(threadIdx.x) % PB, tr = int(threadIdx.x) / PB;
  const int p = int(blockIdx.x) * PB + tp;
  if (p >= P || tr >= RB)
    return;
  const int64_t c0 = int64_t(p) * V;
  float A[V], B[V], D[V], m[V], b[V] = {};
#pragma unroll
  for (int j = 0; j < V; ++j) {
    A[j] = coef[c0 + j], B[j] = coef[C + c0 + j], D[j] = coef[2 * C + c0 + j], m[j] = mean[c0 + j];
    if constexpr (M == MaskFrom::Recompute)
      b[j] = bias[c0 + j];
  }
  using Rows = GradRows<T, V, U, M>;
  walkRows<U, Rows>(
      rows, RB, tr, [&](Rows &r, int u, int64_t row) { r.load(dy, x, y, mask, u, row * C + c0, row * P + p); },
      [&](Rows &r, int u, int64_t row) {
        const int64_t i = row * C + c0;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float g = r.passes(u, j, m[j], A[j], b[j], clip, hi) ? r.d[u][j] : 0.f;
          r.d[u][j] = g;
          r.x[u][j] = A[j] * g + B[j] * (r.x[u][j] - m[j]) + D[j];
        }
        store<T, V>(dx + i, r.x[u]);
        if (dz)
          store<T, V>(dz + i, r.d[u]);
      });
}

// The element-wise pass over channels-last rows (applyRowsKernel), with the activation when
// `relu` (clipMax: its bound), recording the mask where one is given (relu only).
template <typename T, int V>
cudaError_t applyRows(Ref x, Ref z, Ref y, bool relu, uint8_t *mask, const float *coef, const float *mean,
                      const float *bias, int64_t rows, int64_t C, float clipMax, cudaStream_t s) {
  auto run = [&](auto *kernel) {
    const Tiling a = elementwiseTiling(kernel, rows, C, V);
    kernel<<<a.grid, kBlock, 0, s>>>(static_cast<const T *>(x.p), static_cast<const T *>(z.p), static_cast<T *>(y.p),
                                     mask, coef, mean, bias, rows, C, a.P, a.PB, a.RB, relu ? clipMax : kInfinity);
    return cudaGetLastError();
  };
  if (!relu)
    return run(applyRowsKernel<T, V, false, false>);
  return mask ? run(applyRowsKernel<T, V, true, true>) : run(applyRowsKernel<T, V, true, false>);
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

// The forward from the sums (bnReluForwardFromSums, bnForwardFromSums): mean, inv_std and the
// coefficients per channel, then the element-wise pass.
cudaError_t forwardFromSums(Ref x, Ref z, bool relu, const float *scale, const float *bias, const float *sums, Ref y,
                            float *mean, float *invStd, uint8_t *mask, int64_t rows, int64_t C, double eps,
                            float clipMax, void *workspace, cudaStream_t s) {
  float *coef = static_cast<float *>(workspace);
  sumsFinishKernel<<<gridFor(C), kThreads, 0, s>>>(sums, rows, C, eps, scale, mean, invStd, coef);
  return withDataType(x.dt, C, [&](auto tag, auto vec) {
    return applyRows<typename decltype(tag)::type, decltype(vec)::value>(x, z, y, relu, mask, coef, mean, bias, rows,
                                                                          C, clipMax, s);
  });
}

} // namespace

size_t bnReluWorkspaceBytes(int64_t rows, int64_t C) {
  // The most row groups any pack width gives (the dtype is not known here).
  int64_t groups = 1;
  for (int V : {1, 4, 8})
    if (C % V == 0)
      groups = std::max<int64_t>(groups, reduceTiling(rows, C, V).grid.y);
  return sizeof(float) * size_t(2 * groups * C + 3 * C);
}

size_t bnReluMaskBytes(int dt, int64_t rows, int64_t C) {
  size_t bytes = 0;
  withDataType(dt, C, [&](auto, auto vec) {
    bytes = size_t(rows) * size_t(C / decltype(vec)::value);
    return cudaSuccess;
  });
  return bytes;
}

cudaError_t bnReluForward(Ref x, Ref z, const float *scale, const float *bias, Ref y, float *mean, float *invStd,
                          uint8_t *mask, int64_t rows, int64_t C, double eps, float clipMax, void *workspace,
                          cudaStream_t s) {
  if (x.dt != y.dt || (z.p && z.dt != x.dt) || (z.p && clipMax < kInfinity) || (mask && clipMax < kInfinity))
    return cudaErrorInvalidValue;
  return withDataType(x.dt, C, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    const Tiling t = reduceTiling(rows, C, V, residentBlocks(statsKernel<T, V>));
    const Scratch w = scratchOf(workspace, t, C);
    statsKernel<T, V><<<t.grid, kBlock, 0, s>>>(static_cast<const T *>(x.p), rows, C, t.P, t.PB, t.RB, w.partial);
    statsFinishKernel<<<mergeGrid(C), kMergeBlock, 0, s>>>(x.p, x.dt, w.partial, int(t.grid.y), rows, C, eps, scale,
                                                           mean, invStd, w.coef);
    return applyRows<T, V>(x, z, y, true, mask, w.coef, mean, bias, rows, C, clipMax, s);
  });
}

cudaError_t bnReluForwardFromSums(Ref x, Ref z, const float *scale, const float *bias, const float *sums, Ref y,
                                  float *mean, float *invStd, uint8_t *mask, int64_t rows, int64_t C, double eps,
                                  float clipMax, void *workspace, cudaStream_t s) {
  if (x.dt != y.dt || (z.p && z.dt != x.dt) || (z.p && clipMax < kInfinity) || (mask && clipMax < kInfinity))
    return cudaErrorInvalidValue;
  return forwardFromSums(x, z, true, scale, bias, sums, y, mean, invStd, mask, rows, C, eps, clipMax, workspace, s);
}

cudaError_t bnForwardFromSums(Ref x, const float *scale, const float *bias, const float *sums, Ref y, float *mean,
                              float *invStd, int64_t rows, int64_t C, double eps, void *workspace, cudaStream_t s) {
  if (x.dt != y.dt)
    return cudaErrorInvalidValue;
  return forwardFromSums(x, Ref{}, false, scale, bias, sums, y, mean, invStd, nullptr, rows, C, eps, kInfinity,
                         workspace, s);
}

cudaError_t bnApply(Ref x, Ref z, const float *scale, const float *bias, const float *mean, const float *invStd,
                    Ref y, int64_t A, int64_t C, int64_t B, bool relu, float clipMax, float *coef, cudaStream_t s) {
  if (x.dt != y.dt || (z.p && z.dt != x.dt) || (z.p && clipMax < kInfinity))
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
    if (B == 1) // channels last: rows of C, packs of V channels
      return applyRows<T, V>(x, z, y, relu, nullptr, coef, mean, bias, A, C, clipMax, s);
    if (relu) {
      applyStridedKernel<T, true><<<gridFor(n), kThreads, 0, s>>>(xp, zp, yp, coef, mean, bias, n, C, B, clipMax);
    } else {
      applyStridedKernel<T, false><<<gridFor(n), kThreads, 0, s>>>(xp, zp, yp, coef, mean, bias, n, C, B,
                                                                   kInfinity);
    }
    return cudaGetLastError();
  });
}

cudaError_t bnReluBackward(Ref dy, Ref x, Ref y, const uint8_t *mask, const float *scale, const float *bias,
                           const float *mean, const float *invStd, Ref dx, Ref dz, float *dscale, float *dbias,
                           int64_t rows, int64_t C, float clipMax, void *workspace, cudaStream_t s) {
  const bool clip = clipMax < kInfinity;
  if (dy.dt != x.dt || (y.p && y.dt != x.dt) || dx.dt != x.dt || (dz.p && dz.dt != x.dt) || (clip && (y.p || mask)) ||
      (y.p && mask))
    return cudaErrorInvalidValue;
  auto run = [&](auto tag, auto vec, auto from) -> cudaError_t {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    constexpr MaskFrom M = decltype(from)::value;
    const Tiling t = reduceTiling(rows, C, V, residentBlocks(gradSumsKernel<T, V, M>));
    const Scratch w = scratchOf(workspace, t, C);
    const T *pdy = static_cast<const T *>(dy.p), *px = static_cast<const T *>(x.p), *py = static_cast<const T *>(y.p);
    gradSumsKernel<T, V, M><<<t.grid, kBlock, 0, s>>>(pdy, px, py, mask, mean, scale, invStd, bias, rows, C, t.P, t.PB,
                                                      t.RB, clip, clipMax, w.partial);
    gradFinishKernel<<<mergeGrid(C), kMergeBlock, 0, s>>>(w.partial, int(t.grid.y), C, rows, scale, invStd, dscale,
                                                          dbias, w.coef);
    const Tiling a = elementwiseTiling(gradApplyKernel<T, V, M>, rows, C, V);
    gradApplyKernel<T, V, M><<<a.grid, kBlock, 0, s>>>(pdy, px, py, mask, static_cast<T *>(dx.p),
                                                       static_cast<T *>(dz.p), w.coef, mean, bias, rows, C, a.P, a.PB,
                                                       a.RB, clip, clipMax);
    return cudaGetLastError();
  };
  return withDataType(x.dt, C, [&](auto tag, auto vec) {
    if (y.p)
      return run(tag, vec, std::integral_constant<MaskFrom, MaskFrom::Output>{});
    if (mask)
      return run(tag, vec, std::integral_constant<MaskFrom, MaskFrom::Bits>{});
    return run(tag, vec, std::integral_constant<MaskFrom, MaskFrom::Recompute>{});
  });
}

} // namespace castor::cuda
