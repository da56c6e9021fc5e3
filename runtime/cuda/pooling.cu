// Max and average pooling, forward and backward, in NCHW or NHWC storage. One thread per output
// (forward) or per input element (backward: it gathers the gradient of every window that holds
// it: deterministic, no atomics). Channels-last threads walk C fastest, so a warp reads
// consecutive channels of one position.
#include "cuda/kernel_common.cuh"

namespace castor::cuda {
namespace {

using namespace detail;

// Where position (n, c, h, w) of an [N, C, rows, cols] tensor lies: base(n, c) + h*hs + w*ws.
struct Plane {
  int64_t base, hs, ws;
};
__device__ __forceinline__ Plane plane(bool channelsLast, int64_t n, int64_t c, int64_t C, int64_t rows,
                                       int64_t cols) {
  if (channelsLast)
    return Plane{n * rows * cols * C + c, cols * C, C};
  return Plane{(n * C + c) * rows * cols, cols, 1};
}
// Splits a storage index of an [N, C, rows, cols] tensor into (n, c, h, w).
__device__ __forceinline__ void split(bool channelsLast, int64_t i, int64_t C, int64_t rows, int64_t cols, int64_t &n,
                                      int64_t &c, int64_t &h, int64_t &w) {
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

// The forward's divisor of an average window (as the CPU reference: the valid taps, or with
// count_include_pad the window clipped to the padded input).
__device__ __forceinline__ int64_t avgDivisor(const PoolGeometry &g, int64_t h0, int64_t w0, int64_t validRows,
                                              int64_t validCols) {
  if (!g.includePad)
    return validRows * validCols;
  const int64_t h1 = min(h0 + g.kh, g.H + g.padBottom), w1 = min(w0 + g.kw, g.W + g.padRight);
  return (h1 - h0) * (w1 - w0);
}

template <typename IoT> __global__ void poolKernel(bool isMax, IoT x, IoT y, PoolGeometry g) {
  using A = typename IoT::Acc;
  const int64_t total = g.N * g.C * g.P * g.Q;
  CASTOR_GRID_LOOP(o, total) {
    int64_t n, c, op, oq;
    split(g.channelsLast, o, g.C, g.P, g.Q, n, c, op, oq);
    const Plane xp = plane(g.channelsLast, n, c, g.C, g.H, g.W);
    const int64_t h0 = op * g.sh - g.padTop, w0 = oq * g.sw - g.padLeft;
    A acc = isMax ? A(-INFINITY) : A(0);
    int64_t rows = 0, cols = 0;
    for (int64_t s = 0; s < g.kw; ++s) {
      const int64_t w = w0 + s * g.dw;
      cols += (w >= 0 && w < g.W);
    }
    for (int64_t r = 0; r < g.kh; ++r) {
      const int64_t h = h0 + r * g.dh;
      if (h < 0 || h >= g.H)
        continue;
      ++rows;
      for (int64_t s = 0; s < g.kw; ++s) {
        const int64_t w = w0 + s * g.dw;
        if (w < 0 || w >= g.W)
          continue;
        const A v = x.ld(xp.base + h * xp.hs + w * xp.ws);
        if (isMax)
          acc = (v > acc || v != v) ? v : acc;
        else
          acc += v;
      }
    }
    if (!isMax) {
      const int64_t d = avgDivisor(g, h0, w0, rows, cols);
      acc = d > 0 ? acc / A(d) : A(0);
    }
    y.st(o, acc);
  }
}

template <typename IoT> __global__ void poolBackwardKernel(bool isMax, IoT dy, IoT x, IoT dx, PoolGeometry g) {
  using A = typename IoT::Acc;
  const int64_t total = g.N * g.C * g.H * g.W;
  const int64_t dh = isMax ? g.dh : 1, dw = isMax ? g.dw : 1;
  CASTOR_GRID_LOOP(e, total) {
    int64_t n, c, h, w;
    split(g.channelsLast, e, g.C, g.H, g.W, n, c, h, w);
    const Plane xp = plane(g.channelsLast, n, c, g.C, g.H, g.W);
    const Plane yp = plane(g.channelsLast, n, c, g.C, g.P, g.Q);
    A acc = 0;
    for (int64_t r = 0; r < g.kh; ++r) {
      const int64_t numH = h + g.padTop - r * dh;
      if (numH < 0 || numH % g.sh != 0 || numH / g.sh >= g.P)
        continue;
      const int64_t op = numH / g.sh, h0 = op * g.sh - g.padTop;
      for (int64_t s = 0; s < g.kw; ++s) {
        const int64_t numW = w + g.padLeft - s * dw;
        if (numW < 0 || numW % g.sw != 0 || numW / g.sw >= g.Q)
          continue;
        const int64_t oq = numW / g.sw, w0 = oq * g.sw - g.padLeft;
        const A grad = dy.ld(yp.base + op * yp.hs + oq * yp.ws);
        if (isMax) {
          // The window's first maximum in row-major window order (a NaN wins), as the forward.
          A best = A(-INFINITY);
          int64_t atH = -1, atW = -1;
          for (int64_t rr = 0; rr < g.kh; ++rr) {
            const int64_t hh = h0 + rr * dh;
            if (hh < 0 || hh >= g.H)
              continue;
            for (int64_t ss = 0; ss < g.kw; ++ss) {
              const int64_t ww = w0 + ss * dw;
              if (ww < 0 || ww >= g.W)
                continue;
              const A v = x.ld(xp.base + hh * xp.hs + ww * xp.ws);
              if (atH < 0 || v > best || v != v) {
                best = v;
                atH = hh, atW = ww;
              }
            }
          }
          if (atH == h && atW == w)
            acc += grad;
        } else {
          int64_t rows = 0, cols = 0;
          for (int64_t rr = 0; rr < g.kh; ++rr)
            rows += (h0 + rr >= 0 && h0 + rr < g.H);
          for (int64_t ss = 0; ss < g.kw; ++ss)
            cols += (w0 + ss >= 0 && w0 + ss < g.W);
          const int64_t d = avgDivisor(g, h0, w0, rows, cols);
          if (d > 0)
            acc += grad / A(d);
        }
      }
    }
    dx.st(e, acc);
  }
}

} // namespace

cudaError_t pool2d(bool isMax, Ref x, Ref y, const PoolGeometry &g, cudaStream_t s) {
  const int64_t n = g.N * g.C * g.P * g.Q;
  if (n <= 0)
    return cudaSuccess;
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    poolKernel<<<gridFor(n), kThreads, 0, s>>>(isMax, io<T>(x), io<T>(y), g);
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
    poolBackwardKernel<<<gridFor(n), kThreads, 0, s>>>(isMax, io<T>(dy), io<T>(x), io<T>(dx), g);
    return cudaGetLastError();
  });
}

} // namespace castor::cuda
