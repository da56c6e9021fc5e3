// The depthwise convolution kernels (depthwise_conv.h): what a block loads and how a thread
// computes its patch. Launch shapes come from launchPlan (depthwise_conv_plan.cpp).
#include "cuda/kernels/depthwise_conv.h"
#include "cuda/kernels/depthwise_dispatch.cuh"
#include "cuda/kernels/depthwise_rows.h"
#include "cuda/kernels/device_common.cuh"

#include <type_traits>

namespace castor::cuda::depthwise {
namespace {

using detail::fromAcc;
using detail::toAcc;

// --- Loading a window into shared memory ---------------------------------------------------------

// 16 bytes from global to shared memory without passing through registers; zeros where !valid
// (src is then only a valid address, never read).
__device__ __forceinline__ void copy16(void *sharedDst, const void *src, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(sharedDst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

// Waits for this thread's copy16 calls; the caller's __syncthreads then publishes them to the block.
__device__ __forceinline__ void finishCopies() {
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// The digits (row, column, lane) of the indices first, first + step, ... of a [rows][cols][per]
// grid, advanced by additions and carries: a division per copied vector would cost as much as the
// arithmetic of a 3x3 layer.
struct GridWalk {
  int lane, col, row;
  int dLane, dCol, dRow;
  int per, cols;
  __device__ __forceinline__ GridWalk(int first, int step, int perPixel, int columns) : per(perPixel), cols(columns) {
    lane = first % per;
    col = first / per % cols;
    row = first / per / cols;
    dLane = step % per;
    dCol = step / per % cols;
    dRow = step / per / cols;
  }
  __device__ __forceinline__ void advance() {
    lane += dLane;
    int carry = lane >= per;
    lane -= carry ? per : 0;
    col += dCol + carry;
    carry = col >= cols;
    col -= carry ? cols : 0;
    row += dRow + carry;
  }
};

// window[rows][cols][channels] = img[row0 + i][col0 + j][c0 + c] of an image [H][W][C], zero
// outside it (the padding) and for channels past C. Vectorized: 16-byte copies (C and `channels`
// multiples of 16 / sizeof(T), img 16-byte aligned), finished by finishCopies.
template <typename T>
__device__ __forceinline__ void loadWindow(T *window, const T *img, int H, int W, int C, int row0, int col0, int rows,
                                           int cols, int c0, int channels, bool vectorized) {
  const int nt = blockDim.x;
  if (vectorized) {
    constexpr int V = 16 / int(sizeof(T));
    const int perPixel = channels / V, total = rows * cols * perPixel;
    GridWalk at(threadIdx.x, nt, perPixel, cols);
    for (int i = threadIdx.x; i < total; i += nt, at.advance()) {
      const int h = row0 + at.row, w = col0 + at.col, c = c0 + at.lane * V;
      const bool valid = h >= 0 && h < H && w >= 0 && w < W && c < C;
      copy16(window + size_t(i) * V, valid ? img + ((size_t(h) * W + w) * C + c) : img, valid);
    }
    return;
  }
  const int total = rows * cols * channels;
  GridWalk at(threadIdx.x, nt, channels, cols);
  for (int i = threadIdx.x; i < total; i += nt, at.advance()) {
    const int h = row0 + at.row, w = col0 + at.col, c = c0 + at.lane;
    const bool valid = h >= 0 && h < H && w >= 0 && w < W && c < C;
    window[i] = valid ? img[(size_t(h) * W + w) * C + c] : fromAcc<T>(0.0f);
  }
}

// --- A thread's patch ---------------------------------------------------------------------------

// acc[p][q] += sum over r < KH, s < KW of in(p*ST + r, q*ST + s) w[r][s], in(i, j) at
// in[i*rowStride + j*colStride] (one channel of a shared window). Row by row of the window: each
// input row is loaded once into registers and serves every output row it reaches.
template <int KH, int KW, int TP, int TQ, int ST, typename T>
__device__ __forceinline__ void correlatePatch(const T *in, int rowStride, int colStride, const float (&w)[KH][KW],
                                               float (&acc)[TP][TQ]) {
  constexpr int kRows = (TP - 1) * ST + KH, kCols = (TQ - 1) * ST + KW;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    float row[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j)
      row[j] = toAcc(in[i * rowStride + j * colStride]);
#pragma unroll
    for (int p = 0; p < TP; ++p) {
      const int r = i - p * ST;
      if (r >= 0 && r < KH) {
#pragma unroll
        for (int q = 0; q < TQ; ++q)
#pragma unroll
          for (int s = 0; s < KW; ++s)
            acc[p][q] = fmaf(row[q * ST + s], w[r][s], acc[p][q]);
      }
    }
  }
}

// acc[r][s] += sum over p < TP, q < TQ of d[p][q] in(p*ST + r, q*ST + s): the weight gradient of
// one patch, with the same row-by-row walk.
template <int K, int TP, int TQ, int ST, typename T>
__device__ __forceinline__ void correlateFilterPatch(const T *in, int rowStride, int colStride, const float (&d)[TP][TQ],
                                                     float (&acc)[K][K]) {
  constexpr int kRows = (TP - 1) * ST + K, kCols = (TQ - 1) * ST + K;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    float row[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j)
      row[j] = toAcc(in[i * rowStride + j * colStride]);
#pragma unroll
    for (int p = 0; p < TP; ++p) {
      const int r = i - p * ST;
      if (r >= 0 && r < K) {
#pragma unroll
        for (int q = 0; q < TQ; ++q)
#pragma unroll
          for (int s = 0; s < K; ++s)
            acc[r][s] = fmaf(d[p][q], row[q * ST + s], acc[r][s]);
      }
    }
  }
}

// --- Forward and data gradient --------------------------------------------------------------------

// out[n, o, c] = sum over taps of in[n, o*ST - off + tap, c] wk(c, tap) (+ bias[c]) (+ add[n, o, c]),
// wk = w, or w flipped in both axes (the stride-1 data gradient).
struct CorrelateArgs {
  const void *in = nullptr, *w = nullptr, *add = nullptr;
  Ref bias;
  void *out = nullptr;
  int C = 0, inH = 0, inW = 0, outH = 0, outW = 0, offH = 0, offW = 0;
  int64_t tilesH = 1, tilesW = 1, channelBlocks = 1;
  int channels = 32, subH = 1, subW = 1;
  bool vectorized = false, flip = false;
};

// The block's (channel block, tile column, tile row, image) from its index, channel blocks
// fastest: blocks reading the same pixels run together.
struct BlockPosition {
  int channelBlock, tileRow, tileCol;
  int64_t image;
};
__device__ __forceinline__ BlockPosition blockPosition(int64_t b, int64_t channelBlocks, int64_t tilesW,
                                                       int64_t tilesH) {
  BlockPosition at;
  at.channelBlock = int(b % channelBlocks);
  b /= channelBlocks;
  at.tileCol = int(b % tilesW);
  b /= tilesW;
  at.tileRow = int(b % tilesH);
  at.image = b / tilesH;
  return at;
}

// Writes a thread's patch: out[row0 + p][col0 + q] (row stride rowStep, column stride colStep in
// output positions) for the positions inside the output.
template <int TP, int TQ, typename T>
__device__ __forceinline__ void storePatch(const float (&acc)[TP][TQ], T *out, const T *add, int H, int W, int C,
                                           int row0, int col0, int rowStep, int colStep) {
#pragma unroll
  for (int p = 0; p < TP; ++p) {
    const int h = row0 + p * rowStep;
#pragma unroll
    for (int q = 0; q < TQ; ++q) {
      const int w = col0 + q * colStep;
      if (h < H && w < W) {
        const size_t at = (size_t(h) * W + w) * C;
        float v = acc[p][q];
        if (add)
          v += toAcc(add[at]);
        out[at] = fromAcc<T>(v);
      }
    }
  }
}

template <typename T, int K, int ST, int TILE>
__global__ void __launch_bounds__(128) correlateKernel(CorrelateArgs a) {
  extern __shared__ __align__(16) unsigned char shared[];
  T *window = reinterpret_cast<T *>(shared);
  const BlockPosition at = blockPosition(blockIdx.x, a.channelBlocks, a.tilesW, a.tilesH);
  const int blockRows = a.subH * TILE, blockCols = a.subW * TILE;
  const int rows = (blockRows - 1) * ST + K, cols = (blockCols - 1) * ST + K;
  const int oh0 = at.tileRow * blockRows, ow0 = at.tileCol * blockCols, c0 = at.channelBlock * a.channels;
  const T *in = static_cast<const T *>(a.in) + size_t(at.image) * a.inH * a.inW * a.C;
  loadWindow(window, in, a.inH, a.inW, a.C, oh0 * ST - a.offH, ow0 * ST - a.offW, rows, cols, c0, a.channels,
             a.vectorized);
  const int c = threadIdx.x % a.channels, patch = threadIdx.x / a.channels;
  const bool active = c0 + c < a.C;
  // The weights straight to registers while the window's copies are in flight.
  float w[K][K];
  const T *wc = static_cast<const T *>(a.w) + size_t(active ? c0 + c : 0) * K * K;
#pragma unroll
  for (int r = 0; r < K; ++r)
#pragma unroll
    for (int s = 0; s < K; ++s)
      w[r][s] = toAcc(wc[a.flip ? (K - 1 - r) * K + (K - 1 - s) : r * K + s]);
  const float bias = active && a.bias.p ? float(detail::ldAny(a.bias, c0 + c)) : 0.0f;
  finishCopies();
  __syncthreads();
  if (!active)
    return;
  const int ph = patch / a.subW, pw = patch % a.subW;
  float acc[TILE][TILE];
#pragma unroll
  for (int p = 0; p < TILE; ++p)
#pragma unroll
    for (int q = 0; q < TILE; ++q)
      acc[p][q] = bias;
  correlatePatch<K, K, TILE, TILE, ST>(window + (size_t(ph * TILE * ST) * cols + pw * TILE * ST) * a.channels + c,
                                       cols * a.channels, a.channels, w, acc);
  const size_t image = size_t(at.image) * a.outH * a.outW * a.C + c0 + c;
  storePatch(acc, static_cast<T *>(a.out) + image, a.add ? static_cast<const T *>(a.add) + image : nullptr, a.outH,
             a.outW, a.C, oh0 + ph * TILE, ow0 + pw * TILE, 1, 1);
}

// The stride-2 data gradient: dx[2i + a] takes the taps r = (a + pad) mod 2 + 2k, each from
// dy[i + (a + pad - r) / 2] (the other taps fall between dy's rows); per phase a (and b across),
// a stride-1 correlation with KH = (K + 1) / 2 taps, zero weights for a tap past K. The block's
// dy window starts at i0 + pad/2 - (KH - 1); phase a's correlation starts (a + pad) / 2 - pad/2
// (0 or 1) rows into it. Threads: `channels` per phase, the four phases of one patch position.
template <typename T, int K, int TILE>
__global__ void __launch_bounds__(128) phaseKernel(CorrelateArgs a) {
  constexpr int KH = (K + 1) / 2;
  extern __shared__ __align__(16) unsigned char shared[];
  T *window = reinterpret_cast<T *>(shared);
  const BlockPosition at = blockPosition(blockIdx.x, a.channelBlocks, a.tilesW, a.tilesH);
  constexpr int side = TILE + KH;
  const int i0 = at.tileRow * TILE, j0 = at.tileCol * TILE, c0 = at.channelBlock * a.channels;
  const T *dy = static_cast<const T *>(a.in) + size_t(at.image) * a.inH * a.inW * a.C;
  loadWindow(window, dy, a.inH, a.inW, a.C, i0 + a.offH / 2 - (KH - 1), j0 + a.offW / 2 - (KH - 1), side, side, c0,
             a.channels, a.vectorized);
  const int c = threadIdx.x % a.channels, phase = threadIdx.x / a.channels;
  const int pa = phase >> 1, pb = phase & 1;
  const bool active = c0 + c < a.C;
  const int ra = (pa + a.offH) & 1, rb = (pb + a.offW) & 1; // the phase's first taps
  float w[KH][KH];
  const T *wc = static_cast<const T *>(a.w) + size_t(active ? c0 + c : 0) * K * K;
#pragma unroll
  for (int m = 0; m < KH; ++m)
#pragma unroll
    for (int n = 0; n < KH; ++n) {
      const int r = ra + 2 * (KH - 1 - m), s = rb + 2 * (KH - 1 - n);
      w[m][n] = r < K && s < K ? toAcc(wc[r * K + s]) : 0.0f;
    }
  finishCopies();
  __syncthreads();
  if (!active)
    return;
  const int da = (pa + a.offH - ra) / 2 - a.offH / 2, db = (pb + a.offW - rb) / 2 - a.offW / 2;
  float acc[TILE][TILE];
#pragma unroll
  for (int p = 0; p < TILE; ++p)
#pragma unroll
    for (int q = 0; q < TILE; ++q)
      acc[p][q] = 0.0f;
  correlatePatch<KH, KH, TILE, TILE, 1>(window + (size_t(da) * side + db) * a.channels + c, side * a.channels,
                                        a.channels, w, acc);
  const size_t image = size_t(at.image) * a.outH * a.outW * a.C + c0 + c;
  storePatch(acc, static_cast<T *>(a.out) + image, a.add ? static_cast<const T *>(a.add) + image : nullptr, a.outH,
             a.outW, a.C, 2 * i0 + pa, 2 * j0 + pb, 2, 2);
}

// --- Weight gradient --------------------------------------------------------------------------------

struct FilterArgs {
  const void *x = nullptr, *dy = nullptr;
  float *partials = nullptr; // [chunks][C][K*K]
  int C = 0, H = 0, W = 0, P = 0, Q = 0, padH = 0, padW = 0;
  int64_t N = 1, tilesH = 1, tilesW = 1, channelBlocks = 1, chunks = 1;
  int channels = 32, subH = 1, subW = 1;
  bool vectorized = false;
};

// One block: `channels` channels over a chunk of (image, tile row, tile column) tiles of dy, each
// thread summing the products of its patch for every tap in registers; then the block's partial
// sums per channel and tap, its patches added in a fixed order, into the chunk's row.
template <typename T, int K, int ST, int TILE>
__global__ void __launch_bounds__(128) filterPartialKernel(FilterArgs a) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int blockRows = a.subH * TILE, blockCols = a.subW * TILE;
  const int rows = (blockRows - 1) * ST + K, cols = (blockCols - 1) * ST + K;
  const size_t windowBytes = (size_t(rows) * cols * a.channels * sizeof(T) + 15) / 16 * 16;
  T *xWindow = reinterpret_cast<T *>(shared);
  T *dyPatch = reinterpret_cast<T *>(shared + windowBytes);
  const int channelBlock = int(blockIdx.x % a.channelBlocks);
  const int64_t chunk = blockIdx.x / a.channelBlocks;
  const int64_t tiles = a.N * a.tilesH * a.tilesW;
  const int64_t first = chunk * tiles / a.chunks, last = (chunk + 1) * tiles / a.chunks;
  const int c0 = channelBlock * a.channels;
  const int c = threadIdx.x % a.channels, patch = threadIdx.x / a.channels;
  const int ph = patch / a.subW, pw = patch % a.subW;
  float acc[K][K];
#pragma unroll
  for (int r = 0; r < K; ++r)
#pragma unroll
    for (int s = 0; s < K; ++s)
      acc[r][s] = 0.0f;
  for (int64_t t = first; t < last; ++t) {
    const int tileCol = int(t % a.tilesW), tileRow = int(t / a.tilesW % a.tilesH);
    const int64_t n = t / (a.tilesW * a.tilesH);
    const int oh0 = tileRow * blockRows, ow0 = tileCol * blockCols;
    loadWindow(xWindow, static_cast<const T *>(a.x) + size_t(n) * a.H * a.W * a.C, a.H, a.W, a.C,
               oh0 * ST - a.padH, ow0 * ST - a.padW, rows, cols, c0, a.channels, a.vectorized);
    loadWindow(dyPatch, static_cast<const T *>(a.dy) + size_t(n) * a.P * a.Q * a.C, a.P, a.Q, a.C, oh0, ow0,
               blockRows, blockCols, c0, a.channels, a.vectorized);
    finishCopies();
    __syncthreads();
    // Threads of channels past C sum zeros (their partial sums are not written).
    float d[TILE][TILE];
#pragma unroll
    for (int p = 0; p < TILE; ++p)
#pragma unroll
      for (int q = 0; q < TILE; ++q)
        d[p][q] = toAcc(dyPatch[(size_t(ph * TILE + p) * blockCols + pw * TILE + q) * a.channels + c]);
    correlateFilterPatch<K, TILE, TILE, ST>(
        xWindow + (size_t(ph * TILE * ST) * cols + pw * TILE * ST) * a.channels + c, cols * a.channels, a.channels, d,
        acc);
    __syncthreads(); // the windows are free for the next tile
  }
  // The patches' sums side by side in shared memory ([patch][channel][tap]: a warp's stores K*K
  // floats apart, an odd stride, without bank conflicts), then added patch after patch.
  constexpr int taps = K * K;
  float *sums = reinterpret_cast<float *>(shared);
#pragma unroll
  for (int r = 0; r < K; ++r)
#pragma unroll
    for (int s = 0; s < K; ++s)
      sums[(size_t(patch) * a.channels + c) * taps + r * K + s] = acc[r][s];
  __syncthreads();
  const int patches = a.subH * a.subW, values = a.channels * taps;
  const int64_t valid = int64_t(a.C - c0) * taps; // this block's channels below C
  float *row = a.partials + (size_t(chunk) * a.C + c0) * taps;
  for (int i = threadIdx.x; i < values && i < valid; i += blockDim.x) {
    float v = 0.0f;
    for (int k = 0; k < patches; ++k)
      v += sums[size_t(k) * values + i];
    row[i] = v;
  }
}

// dw[i] = the sum of partials[k][i] over the chunks k, in fp64 in a fixed order: kLanes lanes
// each sum every kLanes-th chunk, then lane after lane.
constexpr int kReduceColumns = 32, kReduceLanes = 8;
template <typename T> __global__ void __launch_bounds__(256) filterReduceKernel(const float *partials, T *dw, int64_t chunks, int columns) {
  __shared__ double lanes[kReduceLanes][kReduceColumns];
  const int x = threadIdx.x % kReduceColumns, lane = threadIdx.x / kReduceColumns;
  const int column = blockIdx.x * kReduceColumns + x;
  double v = 0.0;
  if (column < columns)
    for (int64_t k = lane; k < chunks; k += kReduceLanes)
      v += double(partials[size_t(k) * columns + column]);
  lanes[lane][x] = v;
  __syncthreads();
  if (lane != 0 || column >= columns)
    return;
  double total = 0.0;
  for (int l = 0; l < kReduceLanes; ++l)
    total += lanes[l][x];
  dw[column] = fromAcc<T>(total);
}

// --- Dispatch ---------------------------------------------------------------------------------------

using dispatch::Int;
using dispatch::withType;

template <typename F> cudaError_t withShape(int K, int stride, int tile, F &&f) {
  return dispatch::withKernelSize(K, [&](auto k) {
    return dispatch::withOneOrTwo(stride, [&](auto st) -> cudaError_t {
      if (tile == 7)
        return f(k, st, Int<7>{});
      if (tile == 8)
        return f(k, st, Int<8>{});
      return cudaErrorInvalidValue;
    });
  });
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

cudaError_t unsupportedLaunch(const Geometry &g, int dt) {
  return unsupported(g).empty() && (dt == kF32 || dt == kF16 || dt == kBF16) ? cudaSuccess : cudaErrorInvalidValue;
}

CorrelateArgs correlateArgs(const LaunchPlan &lp, const Geometry &g) {
  CorrelateArgs a;
  a.C = int(g.C);
  a.tilesH = lp.tilesH, a.tilesW = lp.tilesW, a.channelBlocks = lp.channelBlocks;
  a.channels = lp.channels, a.subH = lp.subH, a.subW = lp.subW;
  a.vectorized = lp.vectorized;
  return a;
}

cudaError_t launchCorrelate(int dt, int K, int stride, const LaunchPlan &lp, const CorrelateArgs &a, cudaStream_t s) {
  return withType(dt, [&](auto t) {
    using T = decltype(t);
    return withShape(K, stride, lp.tile, [&](auto k, auto st, auto tile) {
      correlateKernel<T, decltype(k)::value, decltype(st)::value, decltype(tile)::value>
          <<<dim3(unsigned(lp.blocks)), dim3(unsigned(lp.threads)), lp.sharedBytes, s>>>(a);
      return cudaGetLastError();
    });
  });
}

} // namespace

size_t workspaceBytes(const Geometry &g, Pass pass, int dtype) {
  return pass == Pass::BackwardFilter ? launchPlan(g, pass, dtype, detail::smCount()).workspaceBytes : 0;
}

cudaError_t forward(Ref x, Ref w, Ref bias, Ref y, const Geometry &g, cudaStream_t s, Kernel k) {
  if (cudaError_t e = unsupportedLaunch(g, x.dt); e != cudaSuccess)
    return e;
  if (k == Kernel::Rows && rowsTake(g, Pass::Forward, x.dt, x.p, y.p, nullptr))
    return launchRows(g, Pass::Forward, x.dt, x.p, w.p, bias, nullptr, y.p, s);
  const LaunchPlan lp = launchPlan(g, Pass::Forward, x.dt, detail::smCount());
  CorrelateArgs a = correlateArgs(lp, g);
  a.in = x.p, a.w = w.p, a.bias = bias, a.out = y.p;
  a.inH = int(g.H), a.inW = int(g.W), a.outH = int(g.P), a.outW = int(g.Q);
  a.offH = g.padH, a.offW = g.padW;
  a.vectorized = lp.vectorized && aligned16(x.p);
  return launchCorrelate(x.dt, g.K, g.stride, lp, a, s);
}

cudaError_t backwardData(Ref dy, Ref w, Ref acc, Ref dx, const Geometry &g, cudaStream_t s, Kernel k) {
  if (cudaError_t e = unsupportedLaunch(g, dy.dt); e != cudaSuccess)
    return e;
  if (k == Kernel::Rows && rowsTake(g, Pass::BackwardData, dy.dt, dy.p, dx.p, acc.p))
    return launchRows(g, Pass::BackwardData, dy.dt, dy.p, w.p, Ref{}, acc.p, dx.p, s);
  const LaunchPlan lp = launchPlan(g, Pass::BackwardData, dy.dt, detail::smCount());
  CorrelateArgs a = correlateArgs(lp, g);
  a.in = dy.p, a.w = w.p, a.add = acc.p, a.out = dx.p;
  a.inH = int(g.P), a.inW = int(g.Q), a.outH = int(g.H), a.outW = int(g.W);
  a.vectorized = lp.vectorized && aligned16(dy.p);
  if (g.stride == 1) {
    // dx[h] = sum over r of dy[h + pad - r] w[r] = sum over r' of dy[h - (K-1-pad) + r'] w[K-1-r'].
    a.offH = g.K - 1 - g.padH, a.offW = g.K - 1 - g.padW;
    a.flip = true;
    return launchCorrelate(dy.dt, g.K, 1, lp, a, s);
  }
  a.offH = g.padH, a.offW = g.padW;
  return withType(dy.dt, [&](auto t) {
    using T = decltype(t);
    return withShape(g.K, 1, lp.tile, [&](auto k, auto, auto tile) {
      phaseKernel<T, decltype(k)::value, decltype(tile)::value>
          <<<dim3(unsigned(lp.blocks)), dim3(unsigned(lp.threads)), lp.sharedBytes, s>>>(a);
      return cudaGetLastError();
    });
  });
}

cudaError_t backwardFilter(Ref x, Ref dy, Ref dw, const Geometry &g, void *workspace, size_t workspaceSize,
                           cudaStream_t s) {
  if (cudaError_t e = unsupportedLaunch(g, x.dt); e != cudaSuccess)
    return e;
  const LaunchPlan lp = launchPlan(g, Pass::BackwardFilter, x.dt, detail::smCount());
  if (workspaceSize < lp.workspaceBytes || !workspace)
    return cudaErrorInvalidValue;
  FilterArgs a;
  a.x = x.p, a.dy = dy.p, a.partials = static_cast<float *>(workspace);
  a.C = int(g.C), a.H = int(g.H), a.W = int(g.W), a.P = int(g.P), a.Q = int(g.Q), a.padH = g.padH, a.padW = g.padW;
  a.N = g.N, a.tilesH = lp.tilesH, a.tilesW = lp.tilesW, a.channelBlocks = lp.channelBlocks, a.chunks = lp.chunks;
  a.channels = lp.channels, a.subH = lp.subH, a.subW = lp.subW;
  a.vectorized = lp.vectorized && aligned16(x.p) && aligned16(dy.p);
  const int columns = int(g.C * g.K * g.K);
  return withType(x.dt, [&](auto t) {
    using T = decltype(t);
    cudaError_t e = withShape(g.K, g.stride, lp.tile, [&](auto k, auto st, auto tile) {
      filterPartialKernel<T, decltype(k)::value, decltype(st)::value, decltype(tile)::value>
          <<<dim3(unsigned(lp.blocks)), dim3(unsigned(lp.threads)), lp.sharedBytes, s>>>(a);
      return cudaGetLastError();
    });
    if (e != cudaSuccess)
      return e;
    filterReduceKernel<T><<<dim3(unsigned((columns + kReduceColumns - 1) / kReduceColumns)),
                            dim3(kReduceColumns * kReduceLanes), 0, s>>>(a.partials, static_cast<T *>(dw.p),
                                                                         lp.chunks, columns);
    return cudaGetLastError();
  });
}

} // namespace castor::cuda::depthwise
