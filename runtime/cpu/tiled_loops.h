// The tile loops behind tiled_kernels.h's TileKernels, for one vector type. Each instruction set's
// translation unit (tiled_generic.cpp, tiled_avx2.cpp, tiled_avx512.cpp) includes this inside its own anonymous
// namespace, so copies compiled with different flags never merge at link time; for the same
// reason this uses no library code.
//
// Exactness (tiled_kernels.h): `a += w * x` on vectors is one rounded product and one rounded sum
// per lane (those translation units compile with -ffp-contract=off), each lane one output's
// accumulator, so the bits are the scalar loop's for any vector width.

template <typename V> constexpr int widthOf() { return int(sizeof(V) / sizeof(double)); }

template <typename V> inline V vload(const double *p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <typename V> inline void vstore(double *p, V v) { __builtin_memcpy(p, &v, sizeof v); }
// A broadcast (not 0 + x, which would turn -0 into +0).
template <typename V> inline V vsplat(double x) {
  if constexpr (widthOf<V>() == 8)
    return V{x, x, x, x, x, x, x, x};
  else if constexpr (widthOf<V>() == 4)
    return V{x, x, x, x};
  else
    return V{x, x};
}

// NR pixels x MR channels of a direct convolution (tiled_kernels.h: DirectTileFn).
template <typename V, int MR, int NR>
void directTile(const double *__restrict wp, int64_t wStride, const double *__restrict in, int64_t plane, int64_t nred,
                const castor::cpu::tiled::Tap *taps, int ntaps, int64_t istep, double *__restrict accOut) {
  static_assert(MR % widthOf<V>() == 0, "MR lanes are whole vectors");
  constexpr int NV = MR / widthOf<V>();
  V acc[NR][NV];
  for (int p = 0; p < NR; ++p)
    for (int j = 0; j < NV; ++j)
      acc[p][j] = vload<V>(accOut + p * MR + j * widthOf<V>());
  for (int64_t c = 0; c < nred; ++c) {
    const double *wc = wp + c * wStride;
    const double *xc = in + c * plane;
    for (int t = 0; t < ntaps; ++t) {
      const double *w = wc + taps[t].w;
      const double *x = xc + taps[t].x;
      V wv[NV];
      for (int j = 0; j < NV; ++j)
        wv[j] = vload<V>(w + j * widthOf<V>());
      for (int p = 0; p < NR; ++p) {
        const V xb = vsplat<V>(x[p * istep]);
        for (int j = 0; j < NV; ++j)
          acc[p][j] += wv[j] * xb;
      }
    }
  }
  for (int p = 0; p < NR; ++p)
    for (int j = 0; j < NV; ++j)
      vstore<V>(accOut + p * MR + j * widthOf<V>(), acc[p][j]);
}

// NR input channels x MR output channels of conv2d_backward_filter at one filter tap
// (tiled_kernels.h: FilterTileFn).
template <typename V, int MR, int NR>
void filterTile(const double *__restrict dyp, const double *__restrict x, int64_t xPlane, int64_t W, int64_t Q,
                int64_t op0, int64_t op1, int64_t oq0, int64_t oq1, int64_t sh, int64_t sw, int64_t hOff, int64_t wOff,
                double *__restrict acc, int64_t accStride) {
  static_assert(MR % widthOf<V>() == 0, "MR lanes are whole vectors");
  constexpr int NV = MR / widthOf<V>();
  V a[NR][NV];
  for (int q = 0; q < NR; ++q)
    for (int j = 0; j < NV; ++j)
      a[q][j] = vload<V>(acc + q * accStride + j * widthOf<V>());
  for (int64_t op = op0; op < op1; ++op) {
    const double *drow = dyp + op * Q * MR;
    const double *xrow = x + (op * sh + hOff) * W + wOff;
    for (int64_t oq = oq0; oq < oq1; ++oq) {
      const double *d = drow + oq * MR;
      const double *xv = xrow + oq * sw;
      V dv[NV];
      for (int j = 0; j < NV; ++j)
        dv[j] = vload<V>(d + j * widthOf<V>());
      for (int q = 0; q < NR; ++q) {
        const V xb = vsplat<V>(xv[q * xPlane]);
        for (int j = 0; j < NV; ++j)
          a[q][j] += dv[j] * xb;
      }
    }
  }
  for (int q = 0; q < NR; ++q)
    for (int j = 0; j < NV; ++j)
      vstore<V>(acc + q * accStride + j * widthOf<V>(), a[q][j]);
}

// Entry points taking the tile size at run time: tile<NR> for nr <= NR.
template <typename V, int MR, int NR>
void directTileN(int nr, const double *wp, int64_t wStride, const double *in, int64_t plane, int64_t nred,
                 const castor::cpu::tiled::Tap *taps, int ntaps, int64_t istep, double *acc) {
  if constexpr (NR > 1) {
    if (nr < NR)
      return directTileN<V, MR, NR - 1>(nr, wp, wStride, in, plane, nred, taps, ntaps, istep, acc);
  }
  directTile<V, MR, NR>(wp, wStride, in, plane, nred, taps, ntaps, istep, acc);
}

template <typename V, int MR, int NR>
void filterTileN(int nr, const double *dyp, const double *x, int64_t xPlane, int64_t W, int64_t Q, int64_t op0,
                 int64_t op1, int64_t oq0, int64_t oq1, int64_t sh, int64_t sw, int64_t hOff, int64_t wOff, double *acc,
                 int64_t accStride) {
  if constexpr (NR > 1) {
    if (nr < NR)
      return filterTileN<V, MR, NR - 1>(nr, dyp, x, xPlane, W, Q, op0, op1, oq0, oq1, sh, sw, hOff, wOff, acc,
                                        accStride);
  }
  filterTile<V, MR, NR>(dyp, x, xPlane, W, Q, op0, op1, oq0, oq1, sh, sw, hOff, wOff, acc, accStride);
}

// The table entry for MR lanes with tiles of at most DNR pixels and FNR input channels; constant
// (no code runs to build a table before the CPU's features are known).
template <typename V, int MR, int DNR, int FNR> constexpr castor::cpu::tiled::TileKernels tileKernelsFor() {
  return {DNR, directTileN<V, MR, DNR>, FNR, filterTileN<V, MR, FNR>};
}
