// The choice of tile loops for this CPU, and the direct convolution's walk over a plan's tiles
// (tiled_kernels.h).
#include "cpu/tiled_kernels.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace castor::cpu::tiled {

// Defined by tiled_generic.cpp and, where the build has it (x86-64), tiled_avx2.cpp: call that
// only on a CPU with AVX2, since any of that file's code may use it.
const TileKernels *genericTileKernels();
#if CASTOR_CPU_AVX2
const TileKernels *avx2TileKernels();
#endif

namespace {
const TileKernels *chooseTables() {
  const char *v = std::getenv("CASTOR_CPU_VECTOR");
  const bool generic = v && std::string(v) == "generic";
#if CASTOR_CPU_AVX2
  if (!generic && __builtin_cpu_supports("avx2"))
    return avx2TileKernels();
#endif
  (void)generic;
  return genericTileKernels();
}
} // namespace

const TileKernels &tileKernels(int mr) {
  static const TileKernels *tables = chooseTables(); // [MR 2, 4, 8]
  return tables[mr == 8 ? 2 : mr == 4 ? 1 : 0];
}

void indexTaps(DirectPlan &plan, int mr) {
  plan.mr = mr;
  plan.taps.clear();
  plan.tapStart.assign(1, 0);
  for (const RowTaps &row : plan.rows)
    for (const ColTile &tile : plan.tiles) {
      for (const auto &[r, ir] : row.taps)
        for (const auto &[s, ic] : tile.taps)
          plan.taps.push_back(Tap{(r * plan.S + s) * mr, ir * plan.inCols + ic});
      plan.tapStart.push_back(plan.taps.size());
    }
}

void directBlock(const DirectPlan &plan, int mr, const double *wp, const double *in, int64_t nred,
                 const double *init, int lanes, double *out) {
  const TileKernels &k = tileKernels(mr);
  const int64_t plane = plan.inRows * plan.inCols, outPlane = plan.outRows * plan.outCols;
  const int64_t wStride = plan.R * plan.S * mr;
  double acc[kMaxTile * 8];
  const size_t *start = plan.tapStart.data();
  for (const RowTaps &row : plan.rows) {
    for (const ColTile &tile : plan.tiles) {
      const Tap *taps = plan.taps.data() + start[0];
      const int ntaps = int(start[1] - start[0]);
      ++start;
      for (int p = 0; p < tile.nr; ++p)
        std::memcpy(acc + p * mr, init, sizeof(double) * size_t(mr));
      k.direct(tile.nr, wp, wStride, in, plane, nred, taps, ntaps, plan.istep, acc);
      // Lane by lane: each output plane gets the tile's pixels in a run.
      double *o = out + row.o * plan.outCols + tile.o0;
      for (int l = 0; l < lanes; ++l)
        for (int p = 0; p < tile.nr; ++p)
          o[l * outPlane + p * plan.ostep] = acc[p * mr + l];
    }
  }
}

} // namespace castor::cpu::tiled
