// The own fused batch-norm-ReLU kernels (batch_norm_relu.h). Channels-last data [rows, C]: a block
// covers 32 consecutive channels (one warp's loads are one row's 32 neighbouring elements) and 8
// rows at a time; the grid's rows of blocks split the rows, each writing a partial per channel that
// a second kernel merges in a fixed order (deterministic for a given GPU).
#include "cuda/kernels/batch_norm_relu.h"
#include "cuda/kernels/device_common.cuh"

namespace castor::cuda {
namespace {

using namespace detail;

constexpr int kTileC = 32, kTileRows = 8;

// The number of row groups (grid.y): about kBlocksPerSm blocks per multiprocessor in all, each
// thread at least 16 rows.
int rowGroups(int64_t rows, int64_t C) {
  const int64_t tiles = (C + kTileC - 1) / kTileC;
  const int64_t want = std::max<int64_t>(1, int64_t(smCount()) * kBlocksPerSm / tiles);
  const int64_t most = std::max<int64_t>(1, rows / (kTileRows * 16));
  return int(std::min<int64_t>({want, most, 65535}));
}

// Chan's merge of two (count, mean, M2) states.
__device__ __forceinline__ void merge(float &n, float &mean, float &m2, float nb, float meanb, float m2b) {
  const float total = n + nb;
  if (nb == 0.f)
    return;
  const float delta = meanb - mean, w = nb / total;
  mean += delta * w;
  m2 += m2b + delta * delta * n * w;
  n = total;
}

// Per (row group, channel): count, mean and M2 of x over the group's rows.
template <typename T>
__global__ void statsKernel(const T *x, int64_t rows, int64_t C, float *partial /* [3][groups][C] */) {
  __shared__ float sn[kTileRows][kTileC], sm[kTileRows][kTileC], s2[kTileRows][kTileC];
  const int64_t c = int64_t(blockIdx.x) * kTileC + threadIdx.x;
  float n = 0.f, mean = 0.f, m2 = 0.f;
  if (c < C)
    for (int64_t r = int64_t(blockIdx.y) * kTileRows + threadIdx.y; r < rows; r += int64_t(gridDim.y) * kTileRows) {
      const float v = toAcc(x[r * C + c]);
      n += 1.f;
      const float d = v - mean;
      mean += d / n;
      m2 += d * (v - mean);
    }
  sn[threadIdx.y][threadIdx.x] = n, sm[threadIdx.y][threadIdx.x] = mean, s2[threadIdx.y][threadIdx.x] = m2;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < kTileRows; ++j)
      merge(n, mean, m2, sn[j][threadIdx.x], sm[j][threadIdx.x], s2[j][threadIdx.x]);
    const int64_t groups = gridDim.y, at = int64_t(blockIdx.y) * C + c;
    partial[at] = n, partial[groups * C + at] = mean, partial[2 * groups * C + at] = m2;
  }
}

// Per channel: the merged statistics, and a = scale inv_std (y = (x - mean) a + bias).
__global__ void statsFinishKernel(const float *partial, int groups, int64_t C, double eps, const float *scale,
                                  const float *bias, float *mean, float *invStd, float *coef /* [2][C] */) {
  CASTOR_GRID_LOOP(c, C) {
    float n = 0.f, mu = 0.f, m2 = 0.f;
    for (int g = 0; g < groups; ++g)
      merge(n, mu, m2, partial[int64_t(g) * C + c], partial[(int64_t(groups) + g) * C + c],
            partial[(2 * int64_t(groups) + g) * C + c]);
    const float var = n > 0.f ? m2 / n : 0.f;
    const float is = float(1.0 / sqrt(double(var) + eps));
    mean[c] = mu, invStd[c] = is;
    coef[c] = scale[c] * is;
  }
}

template <typename T>
__global__ void applyKernel(const T *x, const T *z, T *y, const float *coef, const float *mean, const float *bias,
                            int64_t n, int64_t C) {
  CASTOR_GRID_LOOP(i, n) {
    const int64_t c = i % C;
    float t = toAcc(fromAcc<T>((toAcc(x[i]) - mean[c]) * coef[c] + bias[c]));
    if (z)
      t = toAcc(fromAcc<T>(t + toAcc(z[i])));
    y[i] = fromAcc<T>(t > 0.f ? t : (t != t ? t : 0.f));
  }
}

// Per (row group, channel): sum of g and of g (x - mean), g = dy where y > 0.
template <typename T>
__global__ void gradSumsKernel(const T *dy, const T *x, const T *y, const float *mean, int64_t rows, int64_t C,
                               float *partial /* [2][groups][C] */) {
  __shared__ float sa[kTileRows][kTileC], sb[kTileRows][kTileC];
  const int64_t c = int64_t(blockIdx.x) * kTileC + threadIdx.x;
  float sg = 0.f, sgx = 0.f;
  if (c < C) {
    const float mu = mean[c];
    for (int64_t r = int64_t(blockIdx.y) * kTileRows + threadIdx.y; r < rows; r += int64_t(gridDim.y) * kTileRows) {
      const int64_t i = r * C + c;
      const float g = toAcc(y[i]) > 0.f ? toAcc(dy[i]) : 0.f;
      sg += g;
      sgx += g * (toAcc(x[i]) - mu);
    }
  }
  sa[threadIdx.y][threadIdx.x] = sg, sb[threadIdx.y][threadIdx.x] = sgx;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < kTileRows; ++j)
      sg += sa[j][threadIdx.x], sgx += sb[j][threadIdx.x];
    const int64_t groups = gridDim.y, at = int64_t(blockIdx.y) * C + c;
    partial[at] = sg, partial[groups * C + at] = sgx;
  }
}

// Per channel: dbias = sum g, dscale = sum g xhat, and dx = A g + B (x - mean) + D with
// A = scale inv_std, B = -scale inv_std^2 dscale / m, D = -scale inv_std dbias / m.
__global__ void gradFinishKernel(const float *partial, int groups, int64_t C, int64_t rows, const float *scale,
                                 const float *invStd, float *dscale, float *dbias,
                                 float *coef /* [3][C] */) {
  CASTOR_GRID_LOOP(c, C) {
    double sg = 0, sgx = 0;
    for (int g = 0; g < groups; ++g)
      sg += partial[int64_t(g) * C + c], sgx += partial[(int64_t(groups) + g) * C + c];
    const double is = invStd[c], ds = sgx * is, k = double(scale[c]) * is / double(rows);
    dscale[c] = float(ds), dbias[c] = float(sg);
    coef[c] = float(double(scale[c]) * is);
    coef[C + c] = float(-k * is * ds);
    coef[2 * C + c] = float(-k * sg);
  }
}

template <typename T>
__global__ void gradApplyKernel(const T *dy, const T *x, const T *y, T *dx, T *dz, const float *coef,
                                const float *mean, int64_t n, int64_t C) {
  CASTOR_GRID_LOOP(i, n) {
    const int64_t c = i % C;
    const float g = toAcc(y[i]) > 0.f ? toAcc(dy[i]) : 0.f;
    dx[i] = fromAcc<T>(coef[c] * g + coef[C + c] * (toAcc(x[i]) - mean[c]) + coef[2 * C + c]);
    if (dz)
      dz[i] = fromAcc<T>(g);
  }
}

struct Layout {
  int groups;
  float *partial, *coef;
};
Layout layoutOf(void *workspace, int64_t rows, int64_t C) {
  Layout l;
  l.groups = rowGroups(rows, C);
  l.partial = static_cast<float *>(workspace);
  l.coef = l.partial + 3 * int64_t(l.groups) * C;
  return l;
}

template <typename F> cudaError_t withDataType(int dt, F &&f) {
  switch (dt) {
  case kF32:
    return f(Tag<float>{});
  case kF16:
    return f(Tag<__half>{});
  case kBF16:
    return f(Tag<__nv_bfloat16>{});
  default:
    return cudaErrorNotSupported;
  }
}

} // namespace

size_t bnReluWorkspaceBytes(int64_t rows, int64_t C) {
  return sizeof(float) * size_t(3 * int64_t(rowGroups(rows, C)) * C + 3 * C);
}

cudaError_t bnReluForward(Ref x, Ref z, const float *scale, const float *bias, Ref y, float *mean, float *invStd,
                          int64_t rows, int64_t C, double eps, void *workspace, cudaStream_t s) {
  if (x.dt != y.dt || (z.p && z.dt != x.dt))
    return cudaErrorInvalidValue;
  const Layout l = layoutOf(workspace, rows, C);
  const dim3 grid(unsigned((C + kTileC - 1) / kTileC), unsigned(l.groups)), block(kTileC, kTileRows);
  return withDataType(x.dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    statsKernel<T><<<grid, block, 0, s>>>(static_cast<const T *>(x.p), rows, C, l.partial);
    statsFinishKernel<<<gridFor(C), kThreads, 0, s>>>(l.partial, l.groups, C, eps, scale, bias, mean, invStd, l.coef);
    applyKernel<T><<<gridFor(rows * C), kThreads, 0, s>>>(static_cast<const T *>(x.p), static_cast<const T *>(z.p),
                                                           static_cast<T *>(y.p), l.coef, mean, bias, rows * C, C);
    return cudaGetLastError();
  });
}

cudaError_t bnReluBackward(Ref dy, Ref x, Ref y, const float *scale, const float *mean, const float *invStd, Ref dx,
                           Ref dz, float *dscale, float *dbias, int64_t rows, int64_t C, void *workspace,
                           cudaStream_t s) {
  if (dy.dt != x.dt || y.dt != x.dt || dx.dt != x.dt || (dz.p && dz.dt != x.dt))
    return cudaErrorInvalidValue;
  const Layout l = layoutOf(workspace, rows, C);
  const dim3 grid(unsigned((C + kTileC - 1) / kTileC), unsigned(l.groups)), block(kTileC, kTileRows);
  return withDataType(x.dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pdy = static_cast<const T *>(dy.p), *px = static_cast<const T *>(x.p), *py = static_cast<const T *>(y.p);
    gradSumsKernel<T><<<grid, block, 0, s>>>(pdy, px, py, mean, rows, C, l.partial);
    gradFinishKernel<<<gridFor(C), kThreads, 0, s>>>(l.partial, l.groups, C, rows, scale, invStd, dscale, dbias,
                                                     l.coef);
    gradApplyKernel<T><<<gridFor(rows * C), kThreads, 0, s>>>(pdy, px, py, static_cast<T *>(dx.p),
                                                               static_cast<T *>(dz.p), l.coef, mean, rows * C, C);
    return cudaGetLastError();
  });
}

} // namespace castor::cuda
