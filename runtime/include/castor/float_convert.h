// Exact conversions between double and the 16-bit float formats.
//
// doubleToHalf / doubleToBFloat16 round to nearest, ties to even, in one step from the double
// (so converting a float goes through its exact double value: no double rounding); values
// beyond the largest finite number round to infinity, tiny values to subnormals or zero, NaN
// stays NaN (quiet, sign kept). The reverse conversions are exact.
#pragma once

#include <algorithm>
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

// Without data-dependent branches but for infinity and NaN (zeros, signs, subnormals and
// round-ups come in any order in a tensor): masks where a compiler would branch on a condition.
inline uint16_t encode(double x, Format16 f) {
  const uint64_t u = bitsOf(x), a = u & ~(uint64_t(1) << 63);
  const uint16_t sign = uint16_t((u >> 48) & 0x8000);
  constexpr uint64_t kInf = uint64_t(0x7FF) << 52;
  if (__builtin_expect(a >= kInf, 0))
    return sign | (a > kInf ? f.quietNan : f.infBits);
  // |x| in [2^e, 2^(e+1)) is m53 * 2^(e - 52). The result counts units of 2^(e - mantBits) for a
  // normal, of the smallest subnormal 2^(1 - bias - mantBits) below the normals (`below` more
  // bits): m53 shifted right, rounded to nearest, ties to even. Zero and double subnormals
  // (exponent field 0) shift by more than 53 bits: 0, as everything below half the smallest
  // subnormal.
  const int e = int(a >> 52) - 1023;
  const uint64_t m53 = (a & ((uint64_t(1) << 52) - 1)) | (uint64_t(1) << 52);
  const int d = 1 - f.bias - e, below = d & ~(d >> 31); // max(d, 0)
  const int shift = std::min(63, 52 - f.mantBits + below);
  uint64_t q = m53 >> shift;
  const uint64_t rem = m53 & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
  q += uint64_t(rem > half) | (uint64_t(rem == half) & q & 1);
  // A normal's q includes the implicit bit, which the exponent field absorbs (a carry out of the
  // mantissa bumps the exponent; from the largest exponent on, and for e > bias, it is
  // infinity); a subnormal's q of 2^mantBits is the smallest normal, whose bits are that integer.
  const uint64_t normal = uint64_t(0) - uint64_t(below == 0);
  const uint64_t bits = ((uint64_t(int64_t(e + f.bias - 1)) << f.mantBits) & normal) + q;
  return sign | (bits >= f.infBits ? f.infBits : uint16_t(bits));
}

// Without data-dependent branches but for infinity and NaN, as encode: the significand (with the
// implicit bit of a normal) as an integer times a power of two, both exact.
inline double decode(uint16_t bits, Format16 f) {
  const uint32_t mag = bits & 0x7FFFu, exp = mag >> f.mantBits, mant = mag & ((1u << f.mantBits) - 1);
  const uint32_t sig = mant | (uint32_t(exp != 0) << f.mantBits), e1 = exp | uint32_t(exp == 0);
  double m = double(int32_t(sig)) * fromBits(uint64_t(int(e1) - f.bias - f.mantBits + 1023) << 52);
  if (__builtin_expect((mag & f.infBits) == f.infBits, 0))
    m = fromBits(mant ? uint64_t(0x7FF8) << 48 : uint64_t(0x7FF) << 52); // quiet NaN, infinity
  return fromBits(bitsOf(m) | (uint64_t(bits & 0x8000) << 48)); // the sign, as negation sets it
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
