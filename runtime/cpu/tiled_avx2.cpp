// The tile loops with 4 doubles per vector (AVX2, 16 ymm registers), for CPUs that have it
// (tiled_kernels.cpp asks the CPU first). This file is compiled with -mavx2 -mno-fma
// -ffp-contract=off (runtime/CMakeLists.txt): a product and a sum rounded apart, as the reference.
#include "cpu/tiled_kernels.h"

namespace castor::cpu::tiled {
namespace {
typedef double v2d __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
#include "cpu/tiled_loops.h"

// Accumulators + weights (or dy) + broadcast + product within 16 registers; MR = 2 stays 2-wide.
constexpr TileKernels kTables[3] = {tileKernelsFor<v2d, 2, 12, 12>(), tileKernelsFor<v4d, 4, 12, 12>(),
                                    tileKernelsFor<v4d, 8, 6, 6>()};
} // namespace

const TileKernels *avx2TileKernels() { return kTables; }

} // namespace castor::cpu::tiled
