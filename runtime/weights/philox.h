// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3" (SC'11), as in the Random123 library: a 128-bit counter and a 64-bit key give
// 128 random bits, with no state carried between calls, so any element of a stream can be
// generated independently (on any backend).
#pragma once

#include <array>
#include <cstdint>

namespace castor::weights {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

} // namespace castor::weights
