// The depthwise row kernels (depthwise_conv.h, Kernel::Rows): the forward and the data gradient
// of 3x3 and 5x5 layers. A thread
// owns one 4-byte vector of channels at `cols` adjacent output columns and sweeps a strip of
// `rows` output rows: each input row of the strip is read once, straight into registers, and
// added into every output row it reaches; an output row is rounded and stored as soon as its last
// input row is in. Launch shapes come from rowsPlan (depthwise_conv_plan.cpp).
#include "cuda/kernels/depthwise_conv.h"
#include "cuda/kernels/depthwise_dispatch.cuh"
#include "cuda/kernels/depthwise_rows.h"
#include "cuda/kernels/device_common.cuh"

#include <type_traits>

namespace castor::cuda::depthwise {
namespace {

using detail::fromAcc;
using detail::toAcc;

// Channels in a 4-byte vector of T.
template <typename T> constexpr int kVector = int(4 / sizeof(T));

// A 4-byte vector's elements as floats, and floats rounded once into one.
template <typename T> __device__ __forceinline__ void unpack(uint32_t bits, float (&v)[kVector<T>]) {
  if constexpr (std::is_same_v<T, float>) {
    v[0] = __uint_as_float(bits);
  } else if constexpr (std::is_same_v<T, __half>) {
    v[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
    v[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(bits >> 16)));
  } else {
    v[0] = __uint_as_float(bits << 16);
    v[1] = __uint_as_float(bits & 0xffff0000u);
  }
}
template <typename T> __device__ __forceinline__ uint32_t pack(const float (&v)[kVector<T>]) {
  if constexpr (std::is_same_v<T, float>) {
    return __float_as_uint(v[0]);
  } else if constexpr (std::is_same_v<T, __half>) {
    return uint32_t(__half_as_ushort(fromAcc<__half>(v[0]))) |
           uint32_t(__half_as_ushort(fromAcc<__half>(v[1]))) << 16;
  } else {
    return uint32_t(__bfloat16_as_ushort(fromAcc<__nv_bfloat16>(v[0]))) |
           uint32_t(__bfloat16_as_ushort(fromAcc<__nv_bfloat16>(v[1]))) << 16;
  }
}

// out[n, o, c] = sum over taps of in[n, o*ST - off + tap, c] wk(c, tap) (+ bias[c]) (+ add[n, o, c]),
// wk = w, or w flipped in both axes (the stride-1 data gradient).
struct RowsArgs {
  const void *in = nullptr, *w = nullptr, *add = nullptr;
  Ref bias;
  void *out = nullptr;
  int C = 0, inH = 0, inW = 0, outH = 0, outW = 0, offH = 0, offW = 0;
  int lanes = 32, colGroups = 4;
  int64_t channelBlocks = 1, colTiles = 1, rowTiles = 1;
  bool flip = false;
};

// A thread's place: its channel vector c, image n, first output column q0 and strip (row
// tile); `valid` false for the threads past C or the output's width (no barrier follows: they
// leave). Channel blocks fastest, then column tiles, row strips, images: neighbours run together.
struct RowsPlace {
  int c, q0, rowTile;
  int64_t n;
  bool valid;
};
template <int V, int TQ> __device__ __forceinline__ RowsPlace rowsPlace(const RowsArgs &a) {
  RowsPlace at;
  int64_t b = blockIdx.x;
  const int channelBlock = int(b % a.channelBlocks);
  b /= a.channelBlocks;
  const int colTile = int(b % a.colTiles);
  b /= a.colTiles;
  at.rowTile = int(b % a.rowTiles);
  at.n = b / a.rowTiles;
  const int lane = int(threadIdx.x) % a.lanes, group = int(threadIdx.x) / a.lanes;
  at.c = (channelBlock * a.lanes + lane) * V;
  at.q0 = (colTile * a.colGroups + group) * TQ;
  at.valid = at.c < a.C && at.q0 < a.outW;
  return at;
}

// The weights of channels c.. in registers, flipped in both axes where `flip`.
template <typename T, int K, int V>
__device__ __forceinline__ void loadWeights(const RowsArgs &a, int c, bool flip, float (&w)[K][K][V]) {
  const T *wc = static_cast<const T *>(a.w);
#pragma unroll
  for (int r = 0; r < K; ++r)
#pragma unroll
    for (int s = 0; s < K; ++s)
#pragma unroll
      for (int v = 0; v < V; ++v)
        w[r][s][v] = toAcc(wc[size_t(c + v) * K * K + (flip ? (K - 1 - r) * K + (K - 1 - s) : r * K + s)]);
}

// The thread's image and channels in the input, the output and the tensor added to it.
template <typename T> struct ImageOperands {
  const T *in;
  T *out;
  const T *add;
  __device__ __forceinline__ ImageOperands(const RowsArgs &a, const RowsPlace &at) {
    in = static_cast<const T *>(a.in) + size_t(at.n) * a.inH * a.inW * a.C + at.c;
    const size_t outImage = size_t(at.n) * a.outH * a.outW * a.C + at.c;
    out = static_cast<T *>(a.out) + outImage;
    add = a.add ? static_cast<const T *>(a.add) + outImage : nullptr;
  }
};

// Every sum of a thread's strip starts at `value` (the bias, or zero).
template <int TP, int TQ, int V>
__device__ __forceinline__ void fill(float (&acc)[TP][TQ][V], const float (&value)[V]) {
#pragma unroll
  for (int p = 0; p < TP; ++p)
#pragma unroll
    for (int q = 0; q < TQ; ++q)
#pragma unroll
      for (int v = 0; v < V; ++v)
        acc[p][q][v] = value[v];
}

// The input columns first, first + 1, ...: element offsets within a row, and whether each is
// inside the image (else it reads as zero: the padding).
template <int N> struct Columns {
  int at[N];
  bool in[N];
  __device__ __forceinline__ Columns(int first, int width, int C) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      in[j] = first + j >= 0 && first + j < width;
      at[j] = in[j] ? (first + j) * C : 0;
    }
  }
};

// Input row h of the thread's image and channels, its columns' vectors as floats (zeros outside).
template <typename T, int N, int V>
__device__ __forceinline__ void loadRow(const T *image, int h, const RowsArgs &a, const Columns<N> &cols,
                                        float (&x)[N][V]) {
  const bool rowIn = h >= 0 && h < a.inH;
  const T *row = image + size_t(rowIn ? h : 0) * a.inW * a.C;
#pragma unroll
  for (int j = 0; j < N; ++j)
    unpack<T>(rowIn && cols.in[j] ? __ldg(reinterpret_cast<const unsigned *>(row + cols.at[j])) : 0u, x[j]);
}

// Output row oh's columns q0.. of the thread's image and channels: acc (+ add) rounded once and
// stored, the positions past the output's edge left alone.
template <typename T, int TQ, int V>
__device__ __forceinline__ void storeRow(float (&acc)[TQ][V], T *out, const T *add, int oh, int q0,
                                         const RowsArgs &a) {
  if (oh >= a.outH)
    return;
#pragma unroll
  for (int q = 0; q < TQ; ++q) {
    if (q0 + q >= a.outW)
      continue;
    const size_t at = (size_t(oh) * a.outW + q0 + q) * a.C;
    if (add) {
      float extra[V];
      unpack<T>(*reinterpret_cast<const unsigned *>(add + at), extra);
#pragma unroll
      for (int v = 0; v < V; ++v)
        acc[q][v] += extra[v];
    }
    *reinterpret_cast<unsigned *>(out + at) = pack<T>(acc[q]);
  }
}

template <typename T, int K, int ST, int TQ, int TP>
__global__ void __launch_bounds__(256) rowsKernel(RowsArgs a) {
  constexpr int V = kVector<T>;
  constexpr int kCols = (TQ - 1) * ST + K, kRows = (TP - 1) * ST + K;
  const RowsPlace at = rowsPlace<V, TQ>(a);
  if (!at.valid)
    return;
  float w[K][K][V];
  loadWeights<T>(a, at.c, a.flip, w);
  float bias[V];
#pragma unroll
  for (int v = 0; v < V; ++v)
    bias[v] = a.bias.p ? float(detail::ldAny(a.bias, at.c + v)) : 0.0f;
  const Columns<kCols> cols(at.q0 * ST - a.offW, a.inW, a.C);
  const ImageOperands<T> op(a, at);
  float acc[TP][TQ][V];
  fill(acc, bias);
  const int p0 = at.rowTile * TP, h0 = p0 * ST - a.offH;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    float x[kCols][V];
    loadRow<T>(op.in, h0 + i, a, cols, x);
#pragma unroll
    for (int p = 0; p < TP; ++p) {
      const int r = i - p * ST;
      if (r < 0 || r >= K)
        continue;
#pragma unroll
      for (int q = 0; q < TQ; ++q)
#pragma unroll
        for (int s = 0; s < K; ++s)
#pragma unroll
          for (int v = 0; v < V; ++v)
            acc[p][q][v] = fmaf(x[q * ST + s][v], w[r][s][v], acc[p][q][v]);
      if (r == K - 1) // output row p's last input row
        storeRow<T>(acc[p], op.out, op.add, p0 + p, at.q0, a);
    }
  }
}

// The stride-2 data gradient: dx[h] = sum over taps r with h + pad - r even of dy[(h + pad - r) / 2]
// w[r], in both axes. The strip's dx rows h0.. (h0 even) take dy rows i0 + ii, i0 = (h0 + pad -
// (K-1) - PP) / 2 (exact: PP = pad mod 2), dy row i0 + ii reaching local dx row 2 ii + r - (K-1) - PP
// through tap r; columns alike. Every index below is a constant of the unrolled loops.
template <typename T, int K, int TQ, int TP, int PP>
__global__ void __launch_bounds__(256) rowsTransposedKernel(RowsArgs a) {
  constexpr int V = kVector<T>;
  constexpr int kRows = (TP - 1 + K - 1 + PP) / 2 + 1, kCols = (TQ - 1 + K - 1 + PP) / 2 + 1;
  const RowsPlace at = rowsPlace<V, TQ>(a);
  if (!at.valid)
    return;
  float w[K][K][V];
  loadWeights<T>(a, at.c, false, w); // the taps as they are
  const int h0 = at.rowTile * TP;
  const int j0 = (at.q0 + a.offW - (K - 1) - PP) / 2, i0 = (h0 + a.offH - (K - 1) - PP) / 2;
  const Columns<kCols> cols(j0, a.inW, a.C);
  const ImageOperands<T> op(a, at);
  float acc[TP][TQ][V];
  const float zero[V] = {};
  fill(acc, zero);
#pragma unroll
  for (int ii = 0; ii < kRows; ++ii) {
    float x[kCols][V];
    loadRow<T>(op.in, i0 + ii, a, cols, x);
#pragma unroll
    for (int r = 0; r < K; ++r) {
      const int p = 2 * ii + r - (K - 1) - PP;
      if (p < 0 || p >= TP)
        continue;
#pragma unroll
      for (int q = 0; q < TQ; ++q)
#pragma unroll
        for (int s = 0; s < K; ++s) {
          const int jj2 = q + K - 1 + PP - s; // 2 jj
          if (jj2 % 2 != 0)
            continue;
#pragma unroll
          for (int v = 0; v < V; ++v)
            acc[p][q][v] = fmaf(x[jj2 / 2][v], w[r][s][v], acc[p][q][v]);
        }
      if (ii == (p + K - 1 + PP) / 2) // dx row p's last dy row
        storeRow<T>(acc[p], op.out, op.add, h0 + p, at.q0, a);
    }
  }
}

// f(T{}, Int<K>{}, Int<v>{}) for the dtype, a kernel size 3 or 5 and v = 1 or 2.
template <typename F> cudaError_t withRowsShape(int dt, int K, int v, F &&f) {
  return dispatch::withType(dt, [&](auto t) {
    return dispatch::withKernelSize<5>(K, [&](auto k) {
      return dispatch::withOneOrTwo(v, [&](auto one) { return f(t, k, one); });
    });
  });
}

bool aligned4(const void *p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

} // namespace

bool rowsTake(const Geometry &g, Pass pass, int dt, const void *in, const void *out, const void *add) {
  return aligned4(in) && aligned4(out) && (!add || aligned4(add)) && rowsUnsupported(g, pass, dt).empty();
}

cudaError_t launchRows(const Geometry &g, Pass pass, int dt, const void *in, const void *w, Ref bias,
                       const void *add, void *out, cudaStream_t s) {
  const RowsPlan rp = rowsPlan(g, pass, dt);
  RowsArgs a;
  a.in = in, a.w = w, a.add = add, a.bias = bias, a.out = out;
  a.C = int(g.C);
  a.lanes = rp.lanes, a.colGroups = rp.colGroups;
  a.channelBlocks = rp.channelBlocks, a.colTiles = rp.colTiles, a.rowTiles = rp.rowTiles;
  if (pass == Pass::Forward) {
    a.inH = int(g.H), a.inW = int(g.W), a.outH = int(g.P), a.outW = int(g.Q);
    a.offH = g.padH, a.offW = g.padW;
  } else {
    // dx[h] = sum over r of dy[h + pad - r] w[r] = sum over r' of dy[h - (K-1-pad) + r'] w[K-1-r'].
    a.inH = int(g.P), a.inW = int(g.Q), a.outH = int(g.H), a.outW = int(g.W);
    a.offH = g.K - 1 - g.padH, a.offW = g.K - 1 - g.padW;
    a.flip = true;
  }
  if (rp.cols != 4 || rp.rows != 8)
    return cudaErrorInvalidValue;
  if (pass == Pass::BackwardData && g.stride == 2) {
    a.inH = int(g.P), a.inW = int(g.Q), a.outH = int(g.H), a.outW = int(g.W);
    a.offH = g.padH, a.offW = g.padW;
    a.flip = false;
    return withRowsShape(dt, g.K, 1 + (g.padH & 1), [&](auto t, auto k, auto parity) {
      rowsTransposedKernel<decltype(t), decltype(k)::value, 4, 8, decltype(parity)::value - 1>
          <<<dim3(unsigned(rp.blocks)), dim3(unsigned(rp.threads)), 0, s>>>(a);
      return cudaGetLastError();
    });
  }
  const int stride = pass == Pass::Forward ? g.stride : 1;
  return withRowsShape(dt, g.K, stride, [&](auto t, auto k, auto st) {
    rowsKernel<decltype(t), decltype(k)::value, decltype(st)::value, 4, 8>
        <<<dim3(unsigned(rp.blocks)), dim3(unsigned(rp.threads)), 0, s>>>(a);
    return cudaGetLastError();
  });
}

} // namespace castor::cuda::depthwise
