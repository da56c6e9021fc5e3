// Exact conversions between double and the 16-bit float formats.
//
// doubleToHalf / doubleToBFloat16 round to nearest, ties to even, in one step from the double
// (so converting a float goes through its exact double value: no double rounding); values
// beyond the largest finite number round to infinity, tiny values to subnormals or zero, NaN
// stays NaN (quiet, sign kept). The reverse conversions are exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace castor {

namespace detail {
// On the bits of the double: the conversions run per element of every fp16/bf16 tensor on the CPU
// backend, where frexp/ldexp/nearbyint calls cost more than the kernels.
inline uint64_t bitsOf(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}
inline double fromBits(uint64_t u) {
  double x;
  std::memcpy(&x, &u, 8);
  return x;
}

// A 16-bit float format: stored mantissa bits, exponent bias, the bits of infinity and of the
// quiet NaN (without the sign).
struct Format16 {
  int mantBits, bias;
  uint16_t infBits, quietNan;
};
constexpr Format16 kHalf{10, 15, 0x7C00, 0x7E00};
constexpr Format16 kBFloat16{7, 127, 0x7F80, 0x7FC0};

inline uint16_t encode(double x, Format16 f) {
  const uint64_t u = bitsOf(x), a = u & ~(uint64_t(1) << 63);
  const uint16_t sign = (u >> 63) ? 0x8000 : 0;
  constexpr uint64_t kInf = uint64_t(0x7FF) << 52;
  if (a > kInf)
    return sign | f.quietNan;
  const int dexp = int(a >> 52);
  // Zero and double subnormals (far below the smallest 16-bit subnormal) round to zero.
  if (dexp == 0)
    return sign;
  const int e = dexp - 1023; // |x| in [2^e, 2^(e+1)); infinity lands above the largest exponent
  if (e > f.bias)
    return sign | f.infBits;
  // |x| = m53 * 2^(e - 52); the result counts units of 2^(e - mantBits) for a normal, of the
  // smallest subnormal 2^(1 - bias - mantBits) below the normals: m53 shifted right, rounded to
  // nearest, ties to even.
  const uint64_t m53 = (a & ((uint64_t(1) << 52) - 1)) | (uint64_t(1) << 52);
  const bool normal = e >= 1 - f.bias;
  const int shift = 52 - f.mantBits + (normal ? 0 : 1 - f.bias - e);
  if (shift > 53) // below half the smallest subnormal
    return sign;
  uint64_t q = m53 >> shift;
  const uint64_t rem = m53 & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
  if (rem > half || (rem == half && (q & 1)))
    ++q;
  // A normal's q includes the implicit bit, which the exponent field absorbs (a carry out of the
  // mantissa bumps the exponent; past the largest exponent it is infinity); a subnormal's q of
  // 2^mantBits is the smallest normal, whose bit pattern is exactly that integer.
  const uint64_t bits = normal ? (uint64_t(e + f.bias - 1) << f.mantBits) + q : q;
  return sign | (bits >= f.infBits ? f.infBits : uint16_t(bits));
}

inline double decode(uint16_t bits, Format16 f) {
  const uint32_t mag = bits & 0x7FFFu, exp = mag >> f.mantBits, mant = mag & ((1u << f.mantBits) - 1);
  double m;
  if ((mag & f.infBits) == f.infBits)
    m = mant ? fromBits(uint64_t(0x7FF8) << 48) : fromBits(uint64_t(0x7FF) << 52); // quiet NaN, infinity
  else if (exp == 0)
    m = double(mant) * fromBits(uint64_t(1023 + 1 - f.bias - f.mantBits) << 52); // exact: a power of two
  else
    m = fromBits((uint64_t(int(exp) - f.bias + 1023) << 52) | (uint64_t(mant) << (52 - f.mantBits)));
  return (bits & 0x8000) ? -m : m;
}
} // namespace detail

inline uint16_t doubleToHalf(double x) { return detail::encode(x, detail::kHalf); }
inline double halfToDouble(uint16_t h) { return detail::decode(h, detail::kHalf); }
inline uint16_t doubleToBFloat16(double x) { return detail::encode(x, detail::kBFloat16); }
inline double bfloat16ToDouble(uint16_t b) { return detail::decode(b, detail::kBFloat16); }

inline uint16_t floatToHalf(float x) { return doubleToHalf(double(x)); }
inline float halfToFloat(uint16_t h) { return float(halfToDouble(h)); }
inline uint16_t floatToBFloat16(float x) { return doubleToBFloat16(double(x)); }
inline float bfloat16ToFloat(uint16_t b) { return float(bfloat16ToDouble(b)); }

} // namespace castor
