// Max and average pooling, forward and backward, in NCHW or NHWC storage. One thread per output
// (forward) or per input element (backward: it gathers the gradient of every window that holds
// it, found without a search: deterministic, no atomics). Max pooling's backward first records
// each window's winning tap in one byte per output, so the gather compares bytes instead of
// re-reading every covering window (up to 4 windows of 9 taps per element of ResNet's stem).
// Channels-last threads walk C fastest, so a warp reads consecutive channels of one position.
// In a training step the forward records the taps as it pools (maxPool2dRecordingTaps), and the
// backward then only gathers (maxPool2dBackwardFromTaps).
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/pooling.h"

#include <type_traits>

namespace castor::cuda {
namespace {

using namespace detail;

// Index arithmetic runs in I: int32_t when every index of the call fits (64-bit division costs
// several times more and dominated the backward), else int64_t.

// Where position (n, c, h, w) of an [N, C, rows, cols] tensor lies: base(n, c) + h*hs + w*ws.
template <typename I> struct Plane {
  I base, hs, ws;
};
template <typename I>
__device__ __forceinline__ Plane<I> plane(bool channelsLast, I n, I c, I C, I rows, I cols) {
  if (channelsLast)
    return Plane<I>{n * rows * cols * C + c, cols * C, C};
  return Plane<I>{(n * C + c) * rows * cols, cols, 1};
}
// Splits a storage index of an [N, C, rows, cols] tensor into (n, c, h, w).
template <typename I>
__device__ __forceinline__ void split(bool channelsLast, I i, I C, I rows, I cols, I &n, I &c, I &h, I &w) {
  if (channelsLast) {
    c = i % C;
    i /= C;
    w = i % cols;
    i /= cols;
    h = i % rows;
    n = i / rows;
  } else {
    w = i % cols;
    i /= cols;
    h = i % rows;
    i /= rows;
    c = i % C;
    n = i / C;
  }
}

// The geometry in the index type of the call.
template <typename I> struct Geometry {
  I N, C, H, W, P, Q, kh, kw, sh, sw, padTop, padLeft, padBottom, padRight, dh, dw;
  bool includePad, channelsLast;
  explicit Geometry(const PoolGeometry &g)
      : N(I(g.N)), C(I(g.C)), H(I(g.H)), W(I(g.W)), P(I(g.P)), Q(I(g.Q)), kh(I(g.kh)), kw(I(g.kw)), sh(I(g.sh)),
        sw(I(g.sw)), padTop(I(g.padTop)), padLeft(I(g.padLeft)), padBottom(I(g.padBottom)),
        padRight(I(g.padRight)), dh(I(g.dh)), dw(I(g.dw)), includePad(g.includePad), channelsLast(g.channelsLast) {}
};

#define CASTOR_GRID_LOOP_I(I, i, n)                                                                                \
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < (n); i += I(blockDim.x) * I(gridDim.x))

// The forward's divisor of an average window (as the CPU reference: the valid taps, or with
// count_include_pad the window clipped to the padded input).
template <typename I>
__device__ __forceinline__ I avgDivisor(const Geometry<I> &g, I h0, I w0, I validRows, I validCols) {
  if (!g.includePad)
    return validRows * validCols;
  const I h1 = min(h0 + g.kh, g.H + g.padBottom), w1 = min(w0 + g.kw, g.W + g.padRight);
  return (h1 - h0) * (w1 - w0);
}

template <typename I, typename IoT> __global__ void poolKernel(bool isMax, IoT x, IoT y, Geometry<I> g) {
  using A = typename IoT::Acc;
  const I total = g.N * g.C * g.P * g.Q;
  CASTOR_GRID_LOOP_I(I, o, total) {
    I n, c, op, oq;
    split<I>(g.channelsLast, o, g.C, g.P, g.Q, n, c, op, oq);
    const Plane<I> xp = plane<I>(g.channelsLast, n, c, g.C, g.H, g.W);
    const I h0 = op * g.sh - g.padTop, w0 = oq * g.sw - g.padLeft;
    A acc = isMax ? A(-INFINITY) : A(0);
    I rows = 0, cols = 0;
    for (I s = 0; s < g.kw; ++s) {
      const I w = w0 + s * g.dw;
      cols += (w >= 0 && w < g.W);
    }
    for (I r = 0; r < g.kh; ++r) {
      const I h = h0 + r * g.dh;
      if (h < 0 || h >= g.H)
        continue;
      ++rows;
      for (I s = 0; s < g.kw; ++s) {
        const I w = w0 + s * g.dw;
        if (w < 0 || w >= g.W)
          continue;
        const A v = x.ld(int64_t(xp.base + h * xp.hs + w * xp.ws));
        if (isMax)
          acc = (v > acc || v != v) ? v : acc;
        else
          acc += v;
      }
    }
    if (!isMax) {
      const I d = avgDivisor<I>(g, h0, w0, rows, cols);
      acc = d > 0 ? acc / A(d) : A(0);
    }
    y.st(int64_t(o), acc);
  }
}

// The output positions `o` whose windows hold input position `at` (tap r = (at + pad - o*stride)
// / dilation, an integer in [0, k)): o from `hi` down to `lo` (tap order ascending).
template <typename I> __device__ __forceinline__ void coveringWindows(I at, I pad, I k, I stride, I dil, I outSize,
                                                                      I &lo, I &hi) {
  const I top = at + pad;                 // o * stride <= top
  const I bottom = top - (k - 1) * dil;   // o * stride >= bottom
  lo = bottom <= 0 ? I(0) : (bottom + stride - 1) / stride;
  hi = min(top / stride, outSize - 1);
}

template <typename I, typename IoT>
__global__ void poolBackwardKernel(bool isMax, IoT dy, IoT x, IoT dx, Geometry<I> g) {
  using A = typename IoT::Acc;
  const I total = g.N * g.C * g.H * g.W;
  const I dh = isMax ? g.dh : I(1), dw = isMax ? g.dw : I(1);
  CASTOR_GRID_LOOP_I(I, e, total) {
    I n, c, h, w;
    split<I>(g.channelsLast, e, g.C, g.H, g.W, n, c, h, w);
    const Plane<I> xp = plane<I>(g.channelsLast, n, c, g.C, g.H, g.W);
    const Plane<I> yp = plane<I>(g.channelsLast, n, c, g.C, g.P, g.Q);
    I opLo, opHi, oqLo, oqHi;
    coveringWindows<I>(h, g.padTop, g.kh, g.sh, dh, g.P, opLo, opHi);
    coveringWindows<I>(w, g.padLeft, g.kw, g.sw, dw, g.Q, oqLo, oqHi);
    A acc = 0;
    for (I op = opHi; op >= opLo; --op) {
      if (dh != 1 && (h + g.padTop - op * g.sh) % dh != 0)
        continue;
      const I h0 = op * g.sh - g.padTop;
      for (I oq = oqHi; oq >= oqLo; --oq) {
        if (dw != 1 && (w + g.padLeft - oq * g.sw) % dw != 0)
          continue;
        const I w0 = oq * g.sw - g.padLeft;
        const A grad = dy.ld(int64_t(yp.base + op * yp.hs + oq * yp.ws));
        if (isMax) {
          // The window's first maximum in row-major window order (a NaN wins), as the forward.
          A best = A(-INFINITY);
          I atH = -1, atW = -1;
          for (I rr = 0; rr < g.kh; ++rr) {
            const I hh = h0 + rr * dh;
            if (hh < 0 || hh >= g.H)
              continue;
            for (I ss = 0; ss < g.kw; ++ss) {
              const I ww = w0 + ss * dw;
              if (ww < 0 || ww >= g.W)
                continue;
              const A v = x.ld(int64_t(xp.base + hh * xp.hs + ww * xp.ws));
              if (atH < 0 || v > best || v != v) {
                best = v;
                atH = hh, atW = ww;
              }
            }
          }
          if (atH == h && atW == w)
            acc += grad;
        } else {
          I rows = 0, cols = 0;
          for (I rr = 0; rr < g.kh; ++rr)
            rows += (h0 + rr >= 0 && h0 + rr < g.H);
          for (I ss = 0; ss < g.kw; ++ss)
            cols += (w0 + ss >= 0 && w0 + ss < g.W);
          const I d = avgDivisor<I>(g, h0, w0, rows, cols);
          if (d > 0)
            acc += grad / A(d);
        }
      }
    }
    dx.st(int64_t(e), acc);
  }
}

// The first maximum of each of V lanes over the window at (h0, w0) in row-major window order (a
// NaN wins), as the forward picks it: its value and its tap r * kw + s, kNoTap for a window
// without a valid tap. load(h, w, v) reads the V lanes' values at position (h, w).
constexpr uint8_t kNoTap = 0xFF;

template <int V, typename I, typename A, typename Load>
__device__ __forceinline__ void scanWindow(const Geometry<I> &g, I h0, I w0, Load load, A (&best)[V],
                                           uint8_t (&tap)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k)
    best[k] = A(-INFINITY), tap[k] = kNoTap;
  for (I r = 0; r < g.kh; ++r) {
    const I h = h0 + r * g.dh;
    if (h < 0 || h >= g.H)
      continue;
    for (I s = 0; s < g.kw; ++s) {
      const I w = w0 + s * g.dw;
      if (w < 0 || w >= g.W)
        continue;
      A v[V];
      load(h, w, v);
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (tap[k] == kNoTap || v[k] > best[k] || v[k] != v[k])
          best[k] = v[k], tap[k] = uint8_t(r * g.kw + s);
    }
  }
}

// The winning taps of max pooling and, with writeY, its forward y (the window's first maximum,
// as poolKernel finds it).
template <typename I, typename IoT>
__global__ void maxPoolTapsKernel(IoT x, IoT y, bool writeY, uint8_t *taps, Geometry<I> g) {
  using A = typename IoT::Acc;
  const I total = g.N * g.C * g.P * g.Q;
  CASTOR_GRID_LOOP_I(I, o, total) {
    I n, c, op, oq;
    split<I>(g.channelsLast, o, g.C, g.P, g.Q, n, c, op, oq);
    const Plane<I> xp = plane<I>(g.channelsLast, n, c, g.C, g.H, g.W);
    A best[1];
    uint8_t tap[1];
    scanWindow<1>(
        g, op * g.sh - g.padTop, oq * g.sw - g.padLeft,
        [&](I h, I w, A(&v)[1]) { v[0] = x.ld(int64_t(xp.base + h * xp.hs + w * xp.ws)); }, best, tap);
    taps[o] = tap[0];
    if (writeY)
      y.st(int64_t(o), best[0]);
  }
}

// dx of max pooling from the recorded taps: the sum of dy over the windows whose winner is here.
template <typename I, typename IoT>
__global__ void maxPoolGatherKernel(IoT dy, const uint8_t *taps, IoT dx, Geometry<I> g) {
  using A = typename IoT::Acc;
  const I total = g.N * g.C * g.H * g.W;
  CASTOR_GRID_LOOP_I(I, e, total) {
    I n, c, h, w;
    split<I>(g.channelsLast, e, g.C, g.H, g.W, n, c, h, w);
    const Plane<I> yp = plane<I>(g.channelsLast, n, c, g.C, g.P, g.Q);
    I opLo, opHi, oqLo, oqHi;
    coveringWindows<I>(h, g.padTop, g.kh, g.sh, g.dh, g.P, opLo, opHi);
    coveringWindows<I>(w, g.padLeft, g.kw, g.sw, g.dw, g.Q, oqLo, oqHi);
    A acc = 0;
    for (I op = opHi; op >= opLo; --op) {
      const I fromTop = h + g.padTop - op * g.sh;
      if (g.dh != 1 && fromTop % g.dh != 0)
        continue;
      for (I oq = oqHi; oq >= oqLo; --oq) {
        const I fromLeft = w + g.padLeft - oq * g.sw;
        if (g.dw != 1 && fromLeft % g.dw != 0)
          continue;
        const I at = yp.base + op * yp.hs + oq * yp.ws;
        if (I(taps[at]) == (fromTop / g.dh) * g.kw + fromLeft / g.dw)
          acc += A(dy.ld(int64_t(at)));
      }
    }
    dx.st(int64_t(e), acc);
  }
}

// Division by a divisor fixed for the launch as a multiply-high and a shift: a division by a
// runtime value costs tens of instructions, and the index splits were most of the vector
// kernels' work. Exact for dividends in [0, 2^31) with mul = ceil(2^(31+l) / d), l = ceil(log2 d)
// (the vector kernels run only when every index fits in 32 bits).
struct FastDiv {
  uint32_t d = 1, mul = 0, shr = 0;
  FastDiv() = default;
  explicit FastDiv(int64_t divisor) : d(uint32_t(divisor)) {
    if (d <= 1)
      return;
    uint32_t l = 0;
    while ((uint64_t(1) << l) < d)
      ++l;
    mul = uint32_t(((uint64_t(1) << (31 + l)) + d - 1) / d);
    shr = l - 1;
  }
  __device__ __forceinline__ int32_t div(int32_t n) const {
    return d == 1 ? n : int32_t(__umulhi(uint32_t(n), mul) >> shr);
  }
  // n / d, and n % d in rem.
  __device__ __forceinline__ int32_t divmod(int32_t n, int32_t &rem) const {
    const int32_t q = div(n);
    rem = n - q * int32_t(d);
    return q;
  }
};

// The vector kernels' geometry: the divisors of their index splits and of the covering windows.
struct VectorGeometry {
  Geometry<int32_t> g;
  FastDiv channels;       // C / V
  FastDiv rows, cols;     // the tensor the thread index walks: P, Q (forward) or H, W (gather)
  FastDiv strideH, strideW;
  VectorGeometry(const PoolGeometry &pg, int V, bool overInput)
      : g(pg), channels(pg.C / V), rows(overInput ? pg.H : pg.P), cols(overInput ? pg.W : pg.Q), strideH(pg.sh),
        strideW(pg.sw) {}
};

// Channels-last with C a multiple of the vector width: one thread per V channels of one position.
// The index arithmetic is then shared by V elements, and every access is one 16-byte load or
// store. Same results, bit for bit, as the scalar kernels (same taps, same summation order).
__device__ __forceinline__ void splitVector(const VectorGeometry &v, int32_t i, int32_t &n, int32_t &cv, int32_t &h,
                                            int32_t &w) {
  i = v.channels.divmod(i, cv);
  i = v.cols.divmod(i, w);
  n = v.rows.divmod(i, h);
}

// coveringWindows with the stride's division by multiply-high.
__device__ __forceinline__ void coveringWindowsFast(int32_t at, int32_t pad, int32_t k, const FastDiv &stride,
                                                    int32_t dil, int32_t outSize, int32_t &lo, int32_t &hi) {
  const int32_t top = at + pad;
  const int32_t bottom = top - (k - 1) * dil;
  lo = bottom <= 0 ? 0 : stride.div(bottom + int32_t(stride.d) - 1);
  hi = min(stride.div(top), outSize - 1);
}

// Max pooling's forward (kY: y) and its winning taps (kTaps), V channels each.
template <typename T, int V, bool kY, bool kTaps>
__global__ void maxPoolVectorKernel(const T *x, T *y, uint8_t *taps, VectorGeometry vg) {
  using P = Pack<T, V>;
  const Geometry<int32_t> &g = vg.g;
  const int32_t CV = g.C / V, total = g.N * g.P * g.Q * CV;
  CASTOR_GRID_LOOP_I(int32_t, i, total) {
    int32_t n, cv, op, oq;
    splitVector(vg, i, n, cv, op, oq);
    Acc<T> best[V];
    uint8_t tap[V];
    scanWindow<V>(
        g, op * g.sh - g.padTop, oq * g.sw - g.padLeft,
        [&](int32_t h, int32_t w, Acc<T>(&v)[V]) {
          const P p = reinterpret_cast<const P *>(x)[((n * g.H + h) * g.W + w) * CV + cv];
#pragma unroll
          for (int k = 0; k < V; ++k)
            v[k] = toAcc(p.v[k]);
        },
        best, tap);
    if constexpr (kTaps) {
      Pack<uint8_t, V> t;
#pragma unroll
      for (int k = 0; k < V; ++k)
        t.v[k] = tap[k];
      reinterpret_cast<Pack<uint8_t, V> *>(taps)[i] = t;
    }
    if constexpr (kY) {
      P out;
#pragma unroll
      for (int k = 0; k < V; ++k)
        out.v[k] = fromAcc<T>(best[k]);
      reinterpret_cast<P *>(y)[i] = out;
    }
  }
}

template <typename T, int V>
__global__ void maxPoolGatherVectorKernel(const T *dy, const uint8_t *taps, T *dx, VectorGeometry vg) {
  using P = Pack<T, V>;
  const Geometry<int32_t> &g = vg.g;
  const int32_t CV = g.C / V, total = g.N * g.H * g.W * CV;
  CASTOR_GRID_LOOP_I(int32_t, i, total) {
    int32_t n, cv, h, w;
    splitVector(vg, i, n, cv, h, w);
    int32_t opLo, opHi, oqLo, oqHi;
    coveringWindowsFast(h, g.padTop, g.kh, vg.strideH, g.dh, g.P, opLo, opHi);
    coveringWindowsFast(w, g.padLeft, g.kw, vg.strideW, g.dw, g.Q, oqLo, oqHi);
    Acc<T> acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k)
      acc[k] = Acc<T>(0);
    for (int32_t op = opHi; op >= opLo; --op) {
      int32_t r = h + g.padTop - op * g.sh;
      if (g.dh != 1) {
        if (r % g.dh != 0)
          continue;
        r /= g.dh;
      }
      for (int32_t oq = oqHi; oq >= oqLo; --oq) {
        int32_t c = w + g.padLeft - oq * g.sw;
        if (g.dw != 1) {
          if (c % g.dw != 0)
            continue;
          c /= g.dw;
        }
        const int32_t at = ((n * g.P + op) * g.Q + oq) * CV + cv, mine = r * g.kw + c;
        const Pack<uint8_t, V> t = reinterpret_cast<const Pack<uint8_t, V> *>(taps)[at];
        const P d = reinterpret_cast<const P *>(dy)[at];
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (int32_t(t.v[k]) == mine)
            acc[k] += toAcc(d.v[k]);
      }
    }
    P out;
#pragma unroll
    for (int k = 0; k < V; ++k)
      out.v[k] = fromAcc<T>(acc[k]);
    reinterpret_cast<P *>(dx)[i] = out;
  }
}

// Whether every index of the call (both tensors, with a window's reach past their ends) fits
// in 32 bits.
bool fits32(const PoolGeometry &g) {
  const int64_t limit = int64_t(1) << 30;
  return g.N * g.C * g.H * g.W < limit && g.N * g.C * g.P * g.Q < limit && g.H + g.padTop + g.padBottom < limit &&
         g.W + g.padLeft + g.padRight < limit;
}

// Whether the channels-last vector kernels run this call for element type T.
template <typename T> bool vectorPath(const PoolGeometry &g, std::initializer_list<const void *> ptrs) {
  if constexpr (std::is_same_v<T, Any>)
    return false;
  else {
    if (!g.channelsLast || g.C % kVec<T> != 0 || !fits32(g))
      return false;
    for (const void *p : ptrs)
      if (!aligned(p, 16))
        return false;
    return true;
  }
}

} // namespace

cudaError_t pool2d(bool isMax, Ref x, Ref y, const PoolGeometry &g, cudaStream_t s) {
  const int64_t n = g.N * g.C * g.P * g.Q;
  if (n <= 0)
    return cudaSuccess;
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, Any>)
      if (isMax && vectorPath<T>(g, {x.p, y.p})) {
        constexpr int V = kVec<T>;
        maxPoolVectorKernel<T, V, true, false><<<gridFor(n / V), kThreads, 0, s>>>(
            static_cast<const T *>(x.p), static_cast<T *>(y.p), nullptr, VectorGeometry(g, V, false));
        return cudaGetLastError();
      }
    if (fits32(g))
      poolKernel<<<gridFor(n), kThreads, 0, s>>>(isMax, io<T>(x), io<T>(y), Geometry<int32_t>(g));
    else
      poolKernel<<<gridFor(n), kThreads, 0, s>>>(isMax, io<T>(x), io<T>(y), Geometry<int64_t>(g));
    return cudaGetLastError();
  });
}

cudaError_t pool2dBackward(bool isMax, Ref dy, Ref x, Ref dx, const PoolGeometry &g, cudaStream_t s) {
  const int64_t n = g.N * g.C * g.H * g.W;
  if (n <= 0)
    return cudaSuccess;
  if (!x.p)
    x = dx; // average pooling reads no x; any pointer of dx's dtype keeps the dispatch uniform
  return withSharedType({dy, x, dx}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (fits32(g))
      poolBackwardKernel<<<gridFor(n), kThreads, 0, s>>>(isMax, io<T>(dy), io<T>(x), io<T>(dx), Geometry<int32_t>(g));
    else
      poolBackwardKernel<<<gridFor(n), kThreads, 0, s>>>(isMax, io<T>(dy), io<T>(x), io<T>(dx), Geometry<int64_t>(g));
    return cudaGetLastError();
  });
}

bool maxPoolTapsFit(const PoolGeometry &g) { return g.kh * g.kw < kNoTap; }

cudaError_t maxPool2dRecordingTaps(Ref x, Ref y, uint8_t *taps, const PoolGeometry &g, cudaStream_t s) {
  const int64_t outputs = g.N * g.C * g.P * g.Q;
  if (outputs <= 0)
    return cudaSuccess;
  if (!maxPoolTapsFit(g))
    return cudaErrorInvalidValue;
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, Any>)
      if (vectorPath<T>(g, {x.p, y.p})) {
        constexpr int V = kVec<T>;
        maxPoolVectorKernel<T, V, true, true><<<gridFor(outputs / V), kThreads, 0, s>>>(
            static_cast<const T *>(x.p), static_cast<T *>(y.p), taps, VectorGeometry(g, V, false));
        return cudaGetLastError();
      }
    if (fits32(g))
      maxPoolTapsKernel<<<gridFor(outputs), kThreads, 0, s>>>(io<T>(x), io<T>(y), true, taps, Geometry<int32_t>(g));
    else
      maxPoolTapsKernel<<<gridFor(outputs), kThreads, 0, s>>>(io<T>(x), io<T>(y), true, taps, Geometry<int64_t>(g));
    return cudaGetLastError();
  });
}

cudaError_t maxPool2dBackwardFromTaps(Ref dy, const uint8_t *taps, Ref dx, const PoolGeometry &g, cudaStream_t s) {
  const int64_t n = g.N * g.C * g.H * g.W;
  if (n <= 0)
    return cudaSuccess;
  if (!maxPoolTapsFit(g))
    return cudaErrorInvalidValue;
  return withSharedType({dy, dx}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, Any>)
      if (vectorPath<T>(g, {dy.p, dx.p})) {
        constexpr int V = kVec<T>;
        maxPoolGatherVectorKernel<T, V><<<gridFor(n / V), kThreads, 0, s>>>(
            static_cast<const T *>(dy.p), taps, static_cast<T *>(dx.p), VectorGeometry(g, V, true));
        return cudaGetLastError();
      }
    if (fits32(g))
      maxPoolGatherKernel<<<gridFor(n), kThreads, 0, s>>>(io<T>(dy), taps, io<T>(dx), Geometry<int32_t>(g));
    else
      maxPoolGatherKernel<<<gridFor(n), kThreads, 0, s>>>(io<T>(dy), taps, io<T>(dx), Geometry<int64_t>(g));
    return cudaGetLastError();
  });
}

cudaError_t maxPool2dBackward(Ref dy, Ref x, Ref dx, uint8_t *taps, const PoolGeometry &g, cudaStream_t s) {
  const int64_t n = g.N * g.C * g.H * g.W, outputs = g.N * g.C * g.P * g.Q;
  if (n <= 0)
    return cudaSuccess;
  if (!maxPoolTapsFit(g))
    return cudaErrorInvalidValue;
  const cudaError_t recorded = withSharedType({dy, x, dx}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (outputs <= 0)
      return cudaSuccess;
    if constexpr (!std::is_same_v<T, Any>)
      if (vectorPath<T>(g, {dy.p, x.p, dx.p})) {
        constexpr int V = kVec<T>;
        maxPoolVectorKernel<T, V, false, true><<<gridFor(outputs / V), kThreads, 0, s>>>(
            static_cast<const T *>(x.p), nullptr, taps, VectorGeometry(g, V, false));
        return cudaGetLastError();
      }
    if (fits32(g))
      maxPoolTapsKernel<<<gridFor(outputs), kThreads, 0, s>>>(io<T>(x), io<T>(x), false, taps, Geometry<int32_t>(g));
    else
      maxPoolTapsKernel<<<gridFor(outputs), kThreads, 0, s>>>(io<T>(x), io<T>(x), false, taps, Geometry<int64_t>(g));
    return cudaGetLastError();
  });
  if (recorded != cudaSuccess)
    return recorded;
  return maxPool2dBackwardFromTaps(dy, taps, dx, g, s);
}

} // namespace castor::cuda
