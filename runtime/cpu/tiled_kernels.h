// Register-tiled loops of the CPU backend's heavy kernels (convolutions, gemm, matmul); not a
// public header.
//
// Exactness: every output is one accumulator that starts at its initial value (0 or the bias)
// and adds its products one at a time, in the reference order, in fp64. A tile computes several
// independent outputs side by side (two per SIMD register, several registers per tile), never one
// output's sum split into parts, so the bits do not depend on tiling or threads. Padded taps are
// skipped (not multiplied by zero), as in the reference loops.
//
// The code uses GCC/Clang vector extensions: two doubles per vector (SSE2 on x86-64, NEON on
// AArch64, scalar code elsewhere).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace castor::cpu::tiled {

typedef double v2d __attribute__((vector_size(16)));

inline v2d splat(double v) { return v2d{v, v}; }
inline v2d loadu(const double *p) {
  v2d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeu(double *p, v2d v) { std::memcpy(p, &v, sizeof v); }

// --- Direct convolution as a tiled, indirect product ----------------------------------------
//
// out[k][o][col] = init[k] + sum over reduction channels c (ascending), then taps t (ascending
// (r, s)) of wp[c][t][k] * in[c][tap input position], skipping taps that fall outside the input.
// conv2d and conv2d_backward_data are both of this form (for the latter, the "input" is dy and
// the reduction runs over the output channels k of the group, then r, s).

struct Tap {
  int64_t w; // offset of the tap's MR weights within a reduction channel's block
  int64_t x; // offset of the tap's input element (for the tile's first pixel) within a plane
};

// One row of outputs: its index and its valid filter rows (r, input row), r ascending.
struct RowTaps {
  int64_t o;
  std::vector<std::pair<int64_t, int64_t>> taps;
};

// Up to NR output pixels of a row that share the same valid filter columns (s, input column of
// the first pixel), s ascending; pixel p is at output column o0 + p * ostep and reads input
// column (tap's column) + p * istep.
struct ColTile {
  int64_t o0;
  int nr;
  std::vector<std::pair<int64_t, int64_t>> taps;
};

struct DirectPlan {
  int64_t outRows = 0, outCols = 0, inRows = 0, inCols = 0, R = 0, S = 0;
  int64_t ostep = 1, istep = 1;
  std::vector<RowTaps> rows;
  std::vector<ColTile> tiles;
};

// Accumulates one tile: NR pixels x 2*NV output channels; wc points at the MR = 2*NV weights of
// (reduction channel 0, tap 0), wStride is the weights per reduction channel.
template <int NV, int NR>
inline void directTile(const double *__restrict wp, int64_t wStride, const double *__restrict in, int64_t plane,
                       int64_t nred, const Tap *taps, int ntaps, int64_t istep, double *__restrict accOut) {
  v2d acc[NR][NV];
  for (int p = 0; p < NR; ++p)
    for (int j = 0; j < NV; ++j)
      acc[p][j] = loadu(accOut + (p * NV + j) * 2);
  for (int64_t c = 0; c < nred; ++c) {
    const double *wc = wp + c * wStride;
    const double *xc = in + c * plane;
    for (int t = 0; t < ntaps; ++t) {
      const double *w = wc + taps[t].w;
      const double *x = xc + taps[t].x;
      v2d wv[NV];
      for (int j = 0; j < NV; ++j)
        wv[j] = loadu(w + 2 * j);
      for (int p = 0; p < NR; ++p) {
        const v2d xb = splat(x[p * istep]);
        for (int j = 0; j < NV; ++j)
          acc[p][j] += wv[j] * xb;
      }
    }
  }
  for (int p = 0; p < NR; ++p)
    for (int j = 0; j < NV; ++j)
      storeu(accOut + (p * NV + j) * 2, acc[p][j]);
}

template <int NV> constexpr int maxTile() { return NV >= 4 ? 3 : NV == 2 ? 6 : 8; }

template <int NV, int NR = maxTile<NV>()>
inline void directTileN(int nr, const double *wp, int64_t wStride, const double *in, int64_t plane, int64_t nred,
                        const Tap *taps, int ntaps, int64_t istep, double *acc) {
  if constexpr (NR > 1) {
    if (nr < NR)
      return directTileN<NV, NR - 1>(nr, wp, wStride, in, plane, nred, taps, ntaps, istep, acc);
  }
  directTile<NV, NR>(wp, wStride, in, plane, nred, taps, ntaps, istep, acc);
}

// Computes one block of MR = 2*NV output channels (lanes valid: `lanes`) for one image/group:
// `wp` the block's packed weights [nred][R*S][MR], `in` the reduction channels' planes,
// `out` the block's first output channel plane; `init` MR initial values.
template <int NV>
void directBlock(const DirectPlan &plan, const double *wp, const double *in, int64_t nred, const double *init,
                 int lanes, double *out) {
  constexpr int MR = 2 * NV;
  const int64_t plane = plan.inRows * plan.inCols, outPlane = plan.outRows * plan.outCols;
  const int64_t wStride = plan.R * plan.S * MR;
  std::vector<Tap> taps;
  taps.reserve(size_t(plan.R * plan.S));
  double acc[maxTile<NV>() * MR];
  for (const RowTaps &row : plan.rows) {
    for (const ColTile &tile : plan.tiles) {
      taps.clear();
      for (const auto &[r, ir] : row.taps)
        for (const auto &[s, ic] : tile.taps)
          taps.push_back(Tap{(r * plan.S + s) * MR, ir * plan.inCols + ic});
      for (int p = 0; p < tile.nr; ++p)
        std::memcpy(acc + p * MR, init, sizeof(double) * MR);
      directTileN<NV>(tile.nr, wp, wStride, in, plane, nred, taps.data(), int(taps.size()), plan.istep, acc);
      for (int p = 0; p < tile.nr; ++p) {
        double *o = out + row.o * plan.outCols + tile.o0 + p * plan.ostep;
        for (int l = 0; l < lanes; ++l)
          o[l * outPlane] = acc[p * MR + l];
      }
    }
  }
}

} // namespace castor::cpu::tiled
