// The random streams of the data sources: Philox4x32-10 keys derived from the data seed and a
// domain tag, and the conversion of random words to a uniform double.
#pragma once

#include "weights/philox.h"

#include <cstdint>

namespace castor::data {

// Domain tags that keep the data's random streams apart from each other (and from parameter
// initialization and dropout, which use other counter layouts).
constexpr uint32_t kImagesTag = 0x53594E49, kLabelsTag = 0x53594E4C, kShuffleTag = 0x5045524D;

inline weights::PhiloxKey dataKey(uint64_t seed, uint32_t tag) { return {uint32_t(seed), uint32_t(seed >> 32) ^ tag}; }
// 53 random bits as a double in [0, 1).
inline double u53(uint32_t a, uint32_t b) { return double((uint64_t(a) << 32 | b) >> 11) * 0x1.0p-53; }

} // namespace castor::data
