#include "cpu/rounding_noise.h"

#include <cstring>

namespace castor::cpu {
namespace {

// SplitMix64: a well-mixed bit per element, cheap enough to run on every stored value.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// One element in sign-magnitude bits of `Bits` width: exponentMask marks inf/NaN, magnitude the
// bits below the sign.
template <typename Bits> void nudge(uint8_t *p, bool up, Bits exponentMask, Bits magnitude) {
  Bits b;
  std::memcpy(&b, p, sizeof b);
  const Bits mag = b & magnitude;
  if ((b & exponentMask) == exponentMask || mag == 0)
    return; // inf or NaN; an exact zero (a ReLU's, a flag's) is exact in any implementation
  if (up) {
    if (((mag + 1) & exponentMask) == exponentMask)
      return; // the largest finite value stays finite
    b = Bits(b + 1);
  } else {
    b = Bits(b - 1);
  }
  std::memcpy(p, &b, sizeof b);
}

} // namespace

void addRoundingNoise(const plan::Tensor &t, uint8_t *data, uint64_t seed, uint64_t salt) {
  const size_t size = plan::dtypeSize(t.dtype());
  if (size == 0 || t.dtype() == plan::I64)
    return;
  const uint64_t n = t.bytes() / size, key = mix(seed ^ mix(salt));
  for (uint64_t e = 0; e < n; ++e) {
    const bool up = (mix(key + e) >> 63) != 0;
    uint8_t *p = data + e * size;
    switch (t.dtype()) {
    case plan::F32: nudge<uint32_t>(p, up, 0x7F800000u, 0x7FFFFFFFu); break;
    case plan::F64: nudge<uint64_t>(p, up, 0x7FF0000000000000ull, 0x7FFFFFFFFFFFFFFFull); break;
    case plan::F16: nudge<uint16_t>(p, up, 0x7C00, 0x7FFF); break;
    case plan::BF16: nudge<uint16_t>(p, up, 0x7F80, 0x7FFF); break;
    default: return;
    }
  }
}

} // namespace castor::cpu
