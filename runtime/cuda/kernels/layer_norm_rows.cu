#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/layer_norm_rows.h"

#include <algorithm>

namespace castor::cuda::rows {
namespace {

using detail::fromAcc;
using detail::kVec;
using detail::Pack;
using detail::Tag;
using detail::toAcc;

// A row's threads at most: the backward keeps 2 * 32 fp32 column sums and 32 16-bit values of x
// and dy a thread, which fits 128 registers (512 threads a block) without spilling.
constexpr int kMaxGroup = 512;
// The block of sub-warp groups (rows of at most 32 threads).
constexpr int kBlockThreads = 256;
// The backward's blocks a multiprocessor: each block sums its rows' columns once, so more blocks
// only add partial sums; two of 256 threads at up to 128 registers fill the register file.
constexpr int kBackwardBlocksPerSm = 2;

// Sum over the row's group (every thread of the block calls it, the group a power of two). The
// butterfly gives every thread of a group the same bits; over 32, one group is the whole block.
__device__ __forceinline__ float2 groupSum(float2 v, int group) {
  const int width = group < 32 ? group : 32;
  for (int o = width >> 1; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  if (group <= 32)
    return v;
  __shared__ float2 warps[kMaxGroup / 32];
  if ((threadIdx.x & 31) == 0)
    warps[threadIdx.x >> 5] = v;
  __syncthreads();
  float2 r = {0.f, 0.f};
  for (int w = 0; w < group / 32; ++w)
    r.x += warps[w].x, r.y += warps[w].y;
  __syncthreads(); // before the next call writes `warps`
  return r;
}

template <typename T, int V> __device__ __forceinline__ Pack<T, V> load(const T *p, int64_t i) {
  return *reinterpret_cast<const Pack<T, V> *>(p + i);
}
template <typename T, int V> __device__ __forceinline__ Pack<T, V> zeros() {
  Pack<T, V> r;
#pragma unroll
  for (int k = 0; k < V; ++k)
    r.v[k] = fromAcc<T>(0.f);
  return r;
}
// V parameters from column c on, in loads of at most 16 bytes (c is a multiple of V).
template <typename P, int V> __device__ __forceinline__ void loadParams(const P *p, int c, float (&out)[V]) {
  constexpr int W = V * int(sizeof(P)) > 16 ? 16 / int(sizeof(P)) : V;
#pragma unroll
  for (int k = 0; k < V; k += W) {
    const Pack<P, W> q = load<P, W>(p, c + k);
#pragma unroll
    for (int m = 0; m < W; ++m)
      out[k + m] = toAcc(q.v[m]);
  }
}

// Thread `lane` of a row's group holds the row's vectors lane, lane + group, ... (I at most):
// neighbouring threads read neighbouring 16 bytes. The loop over rows advances by whole blocks so
// that every thread of a warp reaches the group sums (rows past the end only skip memory).
template <typename T, typename P, int V, int I>
__global__ void __launch_bounds__(kMaxGroup)
    forwardKernel(const T *__restrict__ x, const P *__restrict__ scale, const P *__restrict__ bias, T *__restrict__ y,
                  P *__restrict__ mean, P *__restrict__ invStd, int64_t rows, int length, int group, float eps) {
  const int groups = blockDim.x / group, lane = threadIdx.x % group, nvec = length / V;
  const float n = float(length);
  for (int64_t base = int64_t(blockIdx.x) * groups; base < rows; base += int64_t(gridDim.x) * groups) {
    const int64_t row = base + threadIdx.x / group;
    const bool valid = row < rows;
    const T *xr = x + row * length;
    Pack<T, V> raw[I];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int j = i * group + lane;
      raw[i] = valid && j < nvec ? load<T, V>(xr, int64_t(j) * V) : zeros<T, V>();
#pragma unroll
      for (int k = 0; k < V; ++k)
        sum += toAcc(raw[i].v[k]);
    }
    const float mu = groupSum(float2{sum, 0.f}, group).x / n;
    // The variance from the deviations (as the CPU reference), not E[x^2] - mean^2.
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < I; ++i)
      if (i * group + lane < nvec)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = toAcc(raw[i].v[k]) - mu;
          sq += d * d;
        }
    const float rstd = 1.f / sqrtf(groupSum(float2{sq, 0.f}, group).x / n + eps);
    if (!valid)
      continue;
    T *yr = y + row * length;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int j = i * group + lane;
      if (j >= nvec)
        continue;
      float g[V], b[V];
      loadParams<P, V>(scale, j * V, g);
      loadParams<P, V>(bias, j * V, b);
      Pack<T, V> o;
#pragma unroll
      for (int k = 0; k < V; ++k)
        o.v[k] = fromAcc<T>((toAcc(raw[i].v[k]) - mu) * rstd * g[k] + b[k]);
      *reinterpret_cast<Pack<T, V> *>(yr + int64_t(j) * V) = o;
    }
    if (lane == 0) {
      mean[row] = fromAcc<P>(mu);
      invStd[row] = fromAcc<P>(rstd);
    }
  }
}

// dx = invStd (g - mean(g) - xhat mean(g xhat)) with g = dy scale, per row as the forward; each
// thread also sums dy xhat and dy over its rows for its columns, the block's groups combine them
// in shared memory (a fixed tree), and the block writes one row of `partial` for each.
template <typename T, typename P, int V, int I>
__global__ void __launch_bounds__(kMaxGroup)
    backwardKernel(const T *__restrict__ dy, const T *__restrict__ x, const P *__restrict__ scale,
                   const P *__restrict__ mean, const P *__restrict__ invStd, T *__restrict__ dx,
                   float *__restrict__ partial, int64_t rows, int length, int group) {
  const int groups = blockDim.x / group, gid = threadIdx.x / group, lane = threadIdx.x % group, nvec = length / V;
  const float n = float(length);
  float dg[I][V], db[I][V];
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k)
      dg[i][k] = db[i][k] = 0.f;
  for (int64_t base = int64_t(blockIdx.x) * groups; base < rows; base += int64_t(gridDim.x) * groups) {
    const int64_t row = base + gid;
    const bool valid = row < rows;
    const float mu = valid ? toAcc(mean[row]) : 0.f, rs = valid ? toAcc(invStd[row]) : 0.f;
    const T *xr = x + row * length, *dyr = dy + row * length;
    Pack<T, V> rx[I], rdy[I];
    float sumG = 0.f, sumGX = 0.f;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int j = i * group + lane;
      const bool in = valid && j < nvec;
      rx[i] = in ? load<T, V>(xr, int64_t(j) * V) : zeros<T, V>();
      rdy[i] = in ? load<T, V>(dyr, int64_t(j) * V) : zeros<T, V>();
      if (!in)
        continue;
      float g[V];
      loadParams<P, V>(scale, j * V, g);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = toAcc(rdy[i].v[k]), xh = (toAcc(rx[i].v[k]) - mu) * rs, gk = d * g[k];
        sumG += gk;
        sumGX += gk * xh;
        dg[i][k] += d * xh;
        db[i][k] += d;
      }
    }
    const float2 s = groupSum(float2{sumG, sumGX}, group);
    const float meanG = s.x / n, meanGX = s.y / n;
    if (!valid)
      continue;
    T *dxr = dx + row * length;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int j = i * group + lane;
      if (j >= nvec)
        continue;
      float g[V];
      loadParams<P, V>(scale, j * V, g); // again (L1): holding it would cost I * V registers
      Pack<T, V> o;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xh = (toAcc(rx[i].v[k]) - mu) * rs;
        o.v[k] = fromAcc<T>(rs * (toAcc(rdy[i].v[k]) * g[k] - meanG - xh * meanGX));
      }
      *reinterpret_cast<Pack<T, V> *>(dxr + int64_t(j) * V) = o;
    }
  }
  // The groups' column sums: the upper half adds into the lower, halving until group 0 holds them.
  // groups * length <= 2 * kBlockThreads / 2 * I * V floats a sum (length <= group * I * V).
  __shared__ float red[2 * (kBlockThreads / 2) * I * V];
  const int stride = (groups / 2) * length;
  for (int half = groups / 2; half > 0; half >>= 1) {
    if (gid >= half && gid < 2 * half)
#pragma unroll
      for (int i = 0; i < I; ++i)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const int c = (i * group + lane) * V + k;
          if (c < length) {
            red[(gid - half) * length + c] = dg[i][k];
            red[stride + (gid - half) * length + c] = db[i][k];
          }
        }
    __syncthreads();
    if (gid < half)
#pragma unroll
      for (int i = 0; i < I; ++i)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const int c = (i * group + lane) * V + k;
          if (c < length) {
            dg[i][k] += red[gid * length + c];
            db[i][k] += red[stride + gid * length + c];
          }
        }
    __syncthreads();
  }
  if (gid != 0)
    return;
  float *pg = partial + int64_t(blockIdx.x) * length, *pb = partial + int64_t(gridDim.x + blockIdx.x) * length;
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int c = (i * group + lane) * V + k;
      if (c < length) {
        pg[c] = dg[i][k];
        pb[c] = db[i][k];
      }
    }
}

// dscale[c] and dbias[c]: the blocks' partial sums of column c added in a fixed order (32 threads
// a column each take every 32nd block, then thread 0 adds the 32 in order).
constexpr int kSumRows = 32;
template <typename P>
__global__ void columnSumKernel(const float *__restrict__ partial, int blocks, int length, P *__restrict__ dscale,
                                P *__restrict__ dbias) {
  __shared__ float sg[kSumRows][33], sb[kSumRows][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float g = 0.f, b = 0.f;
  if (c < length)
    for (int r = threadIdx.y; r < blocks; r += kSumRows) {
      g += partial[int64_t(r) * length + c];
      b += partial[int64_t(blocks + r) * length + c];
    }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= length)
    return;
  for (int r = 1; r < kSumRows; ++r)
    g += sg[r][threadIdx.x], b += sb[r][threadIdx.x];
  dscale[c] = fromAcc<P>(g);
  dbias[c] = fromAcc<P>(b);
}

// f(Tag<T>, Tag<P>) for the data and parameter dtypes planRows takes.
template <typename F> cudaError_t withRowTypes(int dt, int pt, F &&f) {
  switch (dt) {
  case kF32:
    return f(Tag<float>{}, Tag<float>{});
  case kF16:
    return pt == kF32 ? f(Tag<__half>{}, Tag<float>{}) : f(Tag<__half>{}, Tag<__half>{});
  case kBF16:
    return pt == kF32 ? f(Tag<__nv_bfloat16>{}, Tag<float>{}) : f(Tag<__nv_bfloat16>{}, Tag<__nv_bfloat16>{});
  }
  return cudaErrorInvalidValue;
}

int maxBackwardBlocks() { return detail::smCount() * kBackwardBlocksPerSm; }

int gridOf(const RowPlan &p, int64_t rows, int64_t most) {
  return int(std::max<int64_t>(1, std::min<int64_t>((rows + p.groups() - 1) / p.groups(), most)));
}

template <typename T> T *ptr(Ref r) { return static_cast<T *>(r.p); }

} // namespace

RowPlan planRows(int dt, int pt, int64_t length, bool vector) {
  if ((dt != kF32 && dt != kF16 && dt != kBF16) || (pt != kF32 && pt != dt) || length <= 0)
    return {};
  RowPlan p;
  const int full = dt == kF32 ? 4 : 8;
  // Loads of 16 bytes where the rows start 16-byte aligned, else one element at a time (with more
  // of them a thread, so that a row still fits the registers of kMaxGroup threads).
  p.vec = vector && length % full == 0 ? full : 1;
  p.items = p.vec == 1 ? 16 : 4;
  const int64_t nvec = length / p.vec;
  int64_t g = 4; // about 4 loads a thread, at least 4 threads a row
  while (g * 4 < nvec && g < kMaxGroup)
    g *= 2;
  if (g * p.items < nvec)
    return {};
  p.group = int(g);
  p.threads = g <= 32 ? kBlockThreads : int(g);
  return p;
}

size_t backwardScratch(int64_t, int64_t length) {
  return size_t(2) * size_t(maxBackwardBlocks()) * size_t(std::max<int64_t>(length, 1)) * sizeof(float);
}

cudaError_t forward(const RowPlan &p, Ref x, Ref scale, Ref bias, Ref y, Ref mean, Ref invStd, int64_t rows,
                    int64_t length, double eps, cudaStream_t s) {
  if (rows <= 0)
    return cudaSuccess;
  const int grid = gridOf(p, rows, 1 << 30);
  return withRowTypes(x.dt, scale.dt, [&](auto t, auto pt) {
    using T = typename decltype(t)::type;
    using P = typename decltype(pt)::type;
    auto run = [&](auto kernel) {
      kernel<<<grid, p.threads, 0, s>>>(ptr<T>(x), ptr<P>(scale), ptr<P>(bias), ptr<T>(y), ptr<P>(mean),
                                        ptr<P>(invStd), rows, int(length), p.group, float(eps));
      return cudaGetLastError();
    };
    return p.vec == 1 ? run(forwardKernel<T, P, 1, 16>) : run(forwardKernel<T, P, kVec<T>, 4>);
  });
}

cudaError_t backward(const RowPlan &p, Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, Ref dscale, Ref dbias,
                     int64_t rows, int64_t length, void *scratch, size_t scratchBytes, cudaStream_t s) {
  if (scratchBytes < backwardScratch(rows, length) || !scratch)
    return cudaErrorInvalidValue;
  const int grid = gridOf(p, rows, maxBackwardBlocks());
  float *partial = static_cast<float *>(scratch);
  return withRowTypes(x.dt, scale.dt, [&](auto t, auto pt) {
    using T = typename decltype(t)::type;
    using P = typename decltype(pt)::type;
    auto run = [&](auto kernel) {
      kernel<<<grid, p.threads, 0, s>>>(ptr<T>(dy), ptr<T>(x), ptr<P>(scale), ptr<P>(mean), ptr<P>(invStd),
                                        ptr<T>(dx), partial, rows, int(length), p.group);
      return cudaGetLastError();
    };
    const cudaError_t e = p.vec == 1 ? run(backwardKernel<T, P, 1, 16>) : run(backwardKernel<T, P, kVec<T>, 4>);
    if (e != cudaSuccess)
      return e;
    columnSumKernel<P><<<unsigned((length + 31) / 32), dim3(32, kSumRows), 0, s>>>(partial, grid, int(length),
                                                                                  ptr<P>(dscale), ptr<P>(dbias));
    return cudaGetLastError();
  });
}

} // namespace castor::cuda::rows
