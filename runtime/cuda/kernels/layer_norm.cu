// The fp64 layer norm kernels (a block of 256 threads a row, every access through the dtype
// switch) for what layer_norm_rows.cu does not take, and the dispatch between the two.
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/layer_norm.h"
#include "cuda/kernels/layer_norm_rows.h"

#include <algorithm>
#include <climits>

namespace castor::cuda {
namespace {

using detail::blockSum;
using detail::ldAny;
using detail::stAny;

constexpr int kRowThreads = 256;
// Rows per chunk of the parameter gradients' partial sums (more when there would be over kMaxChunks).
constexpr int64_t kChunkRows = 32, kMaxChunks = 1024;

__global__ void forwardKernel(Ref x, Ref scale, Ref bias, Ref y, Ref mean, Ref invStd, int64_t length, double eps) {
  const int64_t row = blockIdx.x, base = row * length;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < length; j += blockDim.x)
    sum += ldAny(x, base + j);
  const double mu = blockSum(sum) / double(length);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < length; j += blockDim.x) {
    const double d = ldAny(x, base + j) - mu;
    sq += d * d;
  }
  const double inv = 1.0 / sqrt(blockSum(sq) / double(length) + eps);
  for (int64_t j = threadIdx.x; j < length; j += blockDim.x)
    stAny(y, base + j, (ldAny(x, base + j) - mu) * inv * ldAny(scale, j) + ldAny(bias, j));
  if (threadIdx.x == 0) {
    stAny(mean, row, mu);
    stAny(invStd, row, inv);
  }
}

__global__ void inputGradKernel(Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, int64_t length) {
  const int64_t row = blockIdx.x, base = row * length;
  const double mu = ldAny(mean, row), inv = ldAny(invStd, row);
  double sumG = 0, sumGX = 0;
  for (int64_t j = threadIdx.x; j < length; j += blockDim.x) {
    const double g = ldAny(dy, base + j) * ldAny(scale, j);
    sumG += g;
    sumGX += g * (ldAny(x, base + j) - mu) * inv;
  }
  const double n = double(length);
  const double meanG = blockSum(sumG) / n, meanGX = blockSum(sumGX) / n;
  for (int64_t j = threadIdx.x; j < length; j += blockDim.x) {
    const double g = ldAny(dy, base + j) * ldAny(scale, j), xhat = (ldAny(x, base + j) - mu) * inv;
    stAny(dx, base + j, inv * (g - meanG - xhat * meanGX));
  }
}

// partial[chunk][j] (dscale) and partial[chunks + chunk][j] (dbias) over the chunk's rows.
__global__ void paramPartialKernel(Ref dy, Ref x, Ref mean, Ref invStd, int64_t rows, int64_t length,
                                   int64_t chunkRows, double *partial) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (j >= length)
    return;
  const int64_t first = chunk * chunkRows, last = min(rows, first + chunkRows);
  double dg = 0, db = 0;
  for (int64_t r = first; r < last; ++r) {
    const double g = ldAny(dy, r * length + j);
    dg += g * (ldAny(x, r * length + j) - ldAny(mean, r)) * ldAny(invStd, r);
    db += g;
  }
  const int64_t chunks = gridDim.y;
  partial[chunk * length + j] = dg;
  partial[(chunks + chunk) * length + j] = db;
}

// One block per column: its chunks summed by the block's threads in a fixed order
// (deterministic), so many chunks cost no long serial loop.
__global__ void paramSumKernel(const double *partial, int64_t chunks, int64_t length, Ref dscale, Ref dbias) {
  const int64_t j = blockIdx.x;
  double dg = 0, db = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    dg += partial[c * length + j];
    db += partial[(chunks + c) * length + j];
  }
  dg = blockSum(dg);
  db = blockSum(db);
  if (threadIdx.x == 0) {
    stAny(dscale, j, dg);
    stAny(dbias, j, db);
  }
}

int64_t chunkRowsOf(int64_t rows) {
  return std::max(kChunkRows, (rows + kMaxChunks - 1) / kMaxChunks);
}
int64_t chunksOf(int64_t rows) {
  return std::max<int64_t>(1, (rows + chunkRowsOf(rows) - 1) / chunkRowsOf(rows));
}

size_t fp64Scratch(int64_t rows, int64_t length) {
  return size_t(2 * chunksOf(rows) * std::max<int64_t>(length, 1)) * sizeof(double);
}

// The register-resident kernels' plan for these operands: data one dtype, parameters and
// statistics one (f32, or the data's); !ok() otherwise.
rows::RowPlan rowPlan(std::initializer_list<Ref> data, std::initializer_list<Ref> params, int64_t length) {
  if (!detail::sameDtype(data) || !detail::sameDtype(params))
    return {};
  bool vector = true;
  for (auto list : {data, params})
    for (const Ref &r : list)
      vector = vector && detail::aligned(r.p, 16);
  return rows::planRows(data.begin()->dt, params.begin()->dt, length, vector);
}

} // namespace

cudaError_t layerNormForward(Ref x, Ref scale, Ref bias, Ref y, Ref mean, Ref invStd, int64_t rows, int64_t length,
                             double eps, cudaStream_t s) {
  if (rows <= 0 || length <= 0)
    return cudaSuccess;
  if (const rows::RowPlan p = rowPlan({x, y}, {scale, bias, mean, invStd}, length); p.ok())
    return rows::forward(p, x, scale, bias, y, mean, invStd, rows, length, eps, s);
  if (rows > INT32_MAX)
    return cudaErrorInvalidValue;
  forwardKernel<<<unsigned(rows), kRowThreads, 0, s>>>(x, scale, bias, y, mean, invStd, length, eps);
  return cudaGetLastError();
}

size_t layerNormBackwardScratch(Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, Ref dscale, Ref dbias,
                                int64_t rows, int64_t length) {
  // Whatever the operands' alignment at run time (the arena's is 256 bytes): the register-resident
  // kernels' when their one-element plan takes the rows, else the fp64 kernels' as well.
  auto fits = [&](uintptr_t address) {
    for (Ref *r : {&dy, &x, &scale, &mean, &invStd, &dx, &dscale, &dbias})
      r->p = reinterpret_cast<void *>(address);
    return rowPlan({dy, x, dx}, {scale, mean, invStd, dscale, dbias}, length).ok();
  };
  const bool anyAlignment = fits(2), aligned = fits(256);
  const size_t fast = rows::backwardScratch(rows, length), fp64 = fp64Scratch(rows, length);
  return anyAlignment ? fast : aligned ? std::max(fast, fp64) : fp64;
}

cudaError_t layerNormBackward(Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, Ref dscale, Ref dbias,
                              int64_t rows, int64_t length, void *scratch, size_t scratchBytes, cudaStream_t s) {
  if (length <= 0)
    return cudaSuccess;
  if (const rows::RowPlan p = rowPlan({dy, x, dx}, {scale, mean, invStd, dscale, dbias}, length); p.ok())
    return rows::backward(p, dy, x, scale, mean, invStd, dx, dscale, dbias, rows, length, scratch, scratchBytes, s);
  if (scratchBytes < fp64Scratch(rows, length))
    return cudaErrorInvalidValue;
  const int64_t chunks = chunksOf(rows);
  if (rows > INT32_MAX || chunks > 65535)
    return cudaErrorInvalidValue;
  if (rows > 0) {
    inputGradKernel<<<unsigned(rows), kRowThreads, 0, s>>>(dy, x, scale, mean, invStd, dx, length);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      return e;
  }
  const dim3 grid(unsigned((length + kRowThreads - 1) / kRowThreads), unsigned(chunks));
  double *partial = static_cast<double *>(scratch);
  paramPartialKernel<<<grid, kRowThreads, 0, s>>>(dy, x, mean, invStd, rows, length, chunkRowsOf(rows), partial);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return e;
  if (length > INT32_MAX)
    return cudaErrorInvalidValue;
  paramSumKernel<<<unsigned(length), kRowThreads, 0, s>>>(partial, chunks, length, dscale, dbias);
  return cudaGetLastError();
}

} // namespace castor::cuda
