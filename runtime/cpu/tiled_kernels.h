// Register-tiled loops of the CPU backend's heavy kernels (convolutions, gemm, matmul); not a
// public header.
//
// Exactness: every output is one accumulator that starts at its initial value (0 or the bias)
// and adds its products one at a time, in the reference order, in fp64. A tile computes several
// independent outputs side by side (one per SIMD lane, several registers per tile), never one
// output's sum split into parts, so the bits do not depend on tiling, vector width or threads.
// Padded taps are skipped (not multiplied by zero), as in the reference loops.
//
// The tile loops (tiled_loops.h) use GCC/Clang vector extensions, compiled once per instruction
// set without contraction into fused multiply-adds, chosen at run time: 8 doubles per vector where
// the CPU has AVX-512 (tiled_avx512.cpp), 4 where it has AVX2 (tiled_avx2.cpp), else 2 (SSE2 on
// x86-64, NEON on AArch64, scalar code elsewhere: tiled_generic.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace castor::cpu::tiled {

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

  // From indexTaps, once per plan rather than per block: every tile of outputs with its taps
  // (taps[tap0, tap1), for MR = mr); pixel p is at out + p * ostep of a plane and reads input
  // (tap's x) + p * istep. The rows' tiles, but for narrow ones (the columns at a border: tiles
  // of one pixel are slow, their accumulators' additions one chain), which run down the rows,
  // several rows in one tile where the rows' taps shift alike.
  struct Work {
    int64_t out, ostep, istep;
    int nr;
    std::size_t tap0, tap1;
  };
  int mr = 0;
  std::vector<Tap> taps;
  std::vector<Work> work;
};

// Lists the work of a plan for blocks of `mr` lanes with tiles of at most maxNr pixels.
void indexTaps(DirectPlan &plan, int mr, int maxNr);

// Accumulates one tile of nr pixels x MR channels into acc [nr][MR] (holding the initial values):
// wp points at the MR weights of (reduction channel 0, tap 0), wStride is the weights per
// reduction channel; pixel p of reduction channel c at tap t reads in[c * plane + t.x + p * istep].
using DirectTileFn = void (*)(int nr, const double *wp, int64_t wStride, const double *in, int64_t plane, int64_t nred,
                              const Tap *taps, int ntaps, int64_t istep, double *acc);

// conv2d_backward_filter at one filter tap: adds to acc[q * accStride + l] (nr input channels q,
// MR output channels l), over the output pixels [op0, op1) x [oq0, oq1) in row-major order,
// dyp[(op * Q + oq) * MR + l] * x[q * xPlane + (op * sh + hOff) * W + wOff + oq * sw].
using FilterTileFn = void (*)(int nr, const double *dyp, const double *x, int64_t xPlane, int64_t W, int64_t Q,
                              int64_t op0, int64_t op1, int64_t oq0, int64_t oq1, int64_t sh, int64_t sw, int64_t hOff,
                              int64_t wOff, double *acc, int64_t accStride);

// The tile loops for one MR: the largest tiles that keep their accumulators in registers.
struct TileKernels {
  int directMax;
  DirectTileFn direct;
  int filterMax;
  FilterTileFn filter;
};

// The largest directMax or filterMax of any table.
constexpr int kMaxTile = 12;

// The loops for MR = 2, 4 or 8 lanes on this CPU: AVX2 where it has it, unless
// CASTOR_CPU_VECTOR=generic (read once) asks for the 2-wide loops.
const TileKernels &tileKernels(int mr);

// The blocks of MR lanes for `channels` outputs: few wasted lanes.
inline int lanesFor(int64_t channels) { return channels >= 8 ? 8 : channels >= 3 ? 4 : 2; }

// Computes one block of MR output channels (lanes valid: `lanes`) for one image/group: `wp` the
// block's packed weights [nred][R*S][MR], `in` the reduction channels' planes, `out` the block's
// first output channel plane; `init` MR initial values. The plan's tiles have at most
// tileKernels(mr).directMax pixels, and its taps are indexed for mr.
void directBlock(const DirectPlan &plan, int mr, const double *wp, const double *in, int64_t nred, const double *init,
                 int lanes, double *out);

} // namespace castor::cpu::tiled
