#include "cpu/rounding_noise.h"

#include <cstring>

namespace castor::cpu {
namespace {

// SplitMix64: well-mixed bits per element, cheap enough to run on every stored value.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Moves one element, stored in sign-magnitude bits of `Bits` width, by `ulps` units in the last
// place (positive: away from zero). exponentMask marks inf/NaN; magnitude the bits below the sign.
template <typename Bits> void move(uint8_t *p, int64_t ulps, Bits exponentMask, Bits magnitude) {
  Bits b;
  std::memcpy(&b, p, sizeof b);
  const Bits mag = b & magnitude;
  if ((b & exponentMask) == exponentMask || mag == 0 || ulps == 0)
    return; // inf or NaN; an exact zero (a ReLU's, a flag's) is exact in any implementation
  int64_t moved = int64_t(mag) + ulps;
  if (moved <= 0)
    moved = 1; // stays on its side of zero
  if ((Bits(moved) & exponentMask) == exponentMask)
    return; // would become infinite
  b = Bits((b & ~magnitude) | Bits(moved));
  std::memcpy(p, &b, sizeof b);
}

} // namespace

void addRoundingNoise(const plan::Tensor &t, uint8_t *data, uint64_t seed, uint64_t salt) {
  const size_t size = plan::dtypeSize(t.dtype());
  if (size == 0 || t.dtype() == plan::I64)
    return;
  const uint64_t n = t.bytes() / size, key = mix(seed ^ mix(salt));
  for (uint64_t e = 0; e < n; ++e) {
    const uint64_t r = mix(key + e);
    uint8_t *p = data + e * size;
    switch (t.dtype()) {
    case plan::F32: // uniform in [-32, 32]
      move<uint32_t>(p, int64_t(r % 65) - 32, 0x7F800000u, 0x7FFFFFFFu);
      break;
    case plan::F64: // one ulp either way
      move<uint64_t>(p, (r & 1) ? 1 : -1, 0x7FF0000000000000ull, 0x7FFFFFFFFFFFFFFFull);
      break;
    case plan::F16: // 1/256 of the values, one ulp either way
      if ((r >> 8) % 256 == 0)
        move<uint16_t>(p, (r & 1) ? 1 : -1, 0x7C00, 0x7FFF);
      break;
    case plan::BF16: // 1/2048 of the values
      if ((r >> 8) % 2048 == 0)
        move<uint16_t>(p, (r & 1) ? 1 : -1, 0x7F80, 0x7FFF);
      break;
    default:
      return;
    }
  }
}

} // namespace castor::cpu
