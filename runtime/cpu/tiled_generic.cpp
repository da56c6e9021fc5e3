// The tile loops with 2 doubles per vector: SSE2 on x86-64 (the fallback where AVX2 is missing),
// NEON on AArch64, scalar code elsewhere (tiled_kernels.h).
#include "cpu/tiled_kernels.h"

namespace castor::cpu::tiled {
namespace {
typedef double v2d __attribute__((vector_size(16)));
#include "cpu/tiled_loops.h"

// Tile sizes that keep the accumulators, the weights or dy, the broadcast and a product in
// registers: x86-64 has 16 vector registers, AArch64 32.
#if defined(__x86_64__)
constexpr TileKernels kTables[3] = {tileKernelsFor<v2d, 2, 8, 12>(), tileKernelsFor<v2d, 4, 6, 6>(),
                                    tileKernelsFor<v2d, 8, 2, 2>()};
#else
constexpr TileKernels kTables[3] = {tileKernelsFor<v2d, 2, 8, 12>(), tileKernelsFor<v2d, 4, 6, 6>(),
                                    tileKernelsFor<v2d, 8, 3, 3>()};
#endif
} // namespace

const TileKernels *genericTileKernels() { return kTables; }

} // namespace castor::cpu::tiled
