// The choice of tile loops for this CPU, and the direct convolution's walk over a plan's tiles
// (tiled_kernels.h).
#include "cpu/tiled_kernels.h"
#include "cpu/vector_isa.h"

#include <cstring>
#include <vector>

namespace castor::cpu::tiled {

// Defined by tiled_generic.cpp and, where the build has it (x86-64), tiled_avx2.cpp: call that
// only on a CPU with AVX2, since any of that file's code may use it.
const TileKernels *genericTileKernels();
#if CASTOR_CPU_AVX2
const TileKernels *avx2TileKernels();
const TileKernels *avx512TileKernels(); // tiled_avx512.cpp: call only on a CPU with AVX-512F and VL
#endif

namespace {
const TileKernels *chooseTables() {
#if CASTOR_CPU_AVX2
  switch (vectorIsa()) {
  case VectorIsa::Avx512:
    return avx512TileKernels();
  case VectorIsa::Avx2:
    return avx2TileKernels();
  case VectorIsa::Generic:
    break;
  }
#endif
  return genericTileKernels();
}
} // namespace

const TileKernels &tileKernels(int mr) {
  static const TileKernels *tables = chooseTables(); // [MR 2, 4, 8]
  return tables[mr == 8 ? 2 : mr == 4 ? 1 : 0];
}

void indexTaps(DirectPlan &plan, int mr, int maxNr) {
  plan.mr = mr;
  plan.taps.clear();
  plan.work.clear();
  // The taps of a row's tile, for its pixel p.
  auto addTaps = [&](const RowTaps &row, const ColTile &tile, int64_t p) {
    for (const auto &[r, ir] : row.taps)
      for (const auto &[s, ic] : tile.taps)
        plan.taps.push_back(Tap{(r * plan.S + s) * mr, ir * plan.inCols + ic + p * plan.istep});
  };
  auto narrow = [&](const ColTile &tile) { return maxNr >= 3 && 3 * tile.nr <= maxNr; };
  for (const RowTaps &row : plan.rows)
    for (const ColTile &tile : plan.tiles)
      if (!narrow(tile)) {
        const size_t t0 = plan.taps.size();
        addTaps(row, tile, 0);
        plan.work.push_back({row.o * plan.outCols + tile.o0, plan.ostep, plan.istep, tile.nr, t0, plan.taps.size()});
      }
  // Rows i+1.. extend a run of rows starting at i while they have the same filter rows, each input
  // row (and the output row) dIn (dOut) after the previous row's.
  const std::vector<RowTaps> &rows = plan.rows;
  auto follows = [&](size_t prev, size_t next, int64_t dIn, int64_t dOut) {
    const auto &a = rows[prev].taps, &b = rows[next].taps;
    if (a.size() != b.size() || a.empty() || rows[next].o - rows[prev].o != dOut)
      return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].first != b[k].first || b[k].second - a[k].second != dIn)
        return false;
    return true;
  };
  for (const ColTile &tile : plan.tiles) {
    if (!narrow(tile))
      continue;
    for (size_t i = 0; i < rows.size();) {
      size_t j = i + 1;
      int64_t dIn = 0, dOut = 0;
      if (j < rows.size() && !rows[i].taps.empty() && !rows[j].taps.empty()) {
        dIn = rows[j].taps[0].second - rows[i].taps[0].second;
        dOut = rows[j].o - rows[i].o;
        while (j < rows.size() && int(j - i) < maxNr && follows(j - 1, j, dIn, dOut))
          ++j;
      }
      for (int64_t p = 0; p < tile.nr; ++p) {
        const size_t t0 = plan.taps.size();
        addTaps(rows[i], tile, p);
        plan.work.push_back({rows[i].o * plan.outCols + tile.o0 + p * plan.ostep, dOut * plan.outCols,
                             dIn * plan.inCols, int(j - i), t0, plan.taps.size()});
      }
      i = j;
    }
  }
}

void directBlock(const DirectPlan &plan, int mr, const double *wp, const double *in, int64_t nred, const double *init,
                 int lanes, double *out) {
  const TileKernels &k = tileKernels(mr);
  const int64_t plane = plan.inRows * plan.inCols, outPlane = plan.outRows * plan.outCols;
  const int64_t wStride = plan.R * plan.S * mr;
  double acc[kMaxTile * 8];
  for (const DirectPlan::Work &w : plan.work) {
    for (int p = 0; p < w.nr; ++p)
      std::memcpy(acc + p * mr, init, sizeof(double) * size_t(mr));
    k.direct(w.nr, wp, wStride, in, plane, nred, plan.taps.data() + w.tap0, int(w.tap1 - w.tap0), w.istep, acc);
    // Lane by lane: each output plane gets the tile's pixels in a run.
    double *o = out + w.out;
    for (int l = 0; l < lanes; ++l)
      for (int p = 0; p < w.nr; ++p)
        o[l * outPlane + p * w.ostep] = acc[p * mr + l];
  }
}

} // namespace castor::cpu::tiled
