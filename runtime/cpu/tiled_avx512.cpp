// The tile loops with 8 doubles per vector (AVX-512, 32 zmm registers), for CPUs that have it
// (tiled_kernels.cpp asks the CPU first). Compiled with -mavx512f -mavx512vl -mno-fma
// -ffp-contract=off (runtime/CMakeLists.txt): a product and a sum rounded apart, as the reference,
// so each output's bits are those of the AVX2 and scalar loops.
#include "cpu/tiled_kernels.h"

namespace castor::cpu::tiled {
namespace {
typedef double v2d __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
#include "cpu/tiled_loops.h"

// 32 registers: 8 lanes are one vector, so a tile of 12 pixels (kMaxTile) keeps its accumulators,
// the weights, the broadcast and a product in registers at every MR.
constexpr TileKernels kTables[3] = {tileKernelsFor<v2d, 2, 12, 12>(), tileKernelsFor<v4d, 4, 12, 12>(),
                                    tileKernelsFor<v8d, 8, 12, 12>()};
} // namespace

const TileKernels *avx512TileKernels() { return kTables; }

} // namespace castor::cpu::tiled
