// The dropout mask, identical on every backend.
//
// Element e (flat row-major index) of a dropout kernel with attributes seed, salt and ratio, at
// training iteration `iteration` (the i64 scalar operand), is kept iff u >= ratio, where u comes
// from one Philox4x32-10 call (weights/philox.h):
//   key     = {lo32(seed), hi32(seed)}
//   counter = {lo32(e), hi32(e), lo32(iteration), lo32(salt)}
//   w       = philox4x32_10(counter, key)
//   u       = ((uint64(w0) << 32 | w1) >> 11) * 2^-53          (a double in [0, 1))
// Kept elements are scaled by 1 / (1 - ratio) (computed in double); with ratio 1 every element
// is dropped (y = 0). seed and salt are the kernel's int attributes taken as 64-bit two's
// complement; iteration wraps modulo 2^32. The compiler gives each dropout of a model its own
// salt, so masks differ between layers; the forward and its dropout_backward share the triple.
#pragma once

#include "weights/philox.h"

#include <cstdint>

namespace castor::weights {

inline double dropoutUniform(int64_t seed, int64_t salt, int64_t iteration, uint64_t element) {
  const uint64_t s = uint64_t(seed);
  const PhiloxKey key{uint32_t(s), uint32_t(s >> 32)};
  const PhiloxCounter counter{uint32_t(element), uint32_t(element >> 32), uint32_t(uint64_t(iteration)),
                              uint32_t(uint64_t(salt))};
  const PhiloxCounter w = philox4x32_10(counter, key);
  return double((uint64_t(w[0]) << 32 | w[1]) >> 11) * 0x1.0p-53;
}

inline bool dropoutKeeps(double ratio, int64_t seed, int64_t salt, int64_t iteration, uint64_t element) {
  return ratio < 1.0 && dropoutUniform(seed, salt, iteration, element) >= ratio;
}

} // namespace castor::weights
