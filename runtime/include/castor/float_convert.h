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
// Rounds |x| to a binary format with `mantBits` stored mantissa bits and exponent bias `bias`
// (exponent field width implied by the 16-bit layout), returning the bits without the sign.
inline uint16_t roundMagnitude(double a, int mantBits, int bias, uint16_t infBits) {
  if (a == 0.0)
    return 0;
  if (std::isinf(a))
    return infBits;
  int exp2 = 0;
  std::frexp(a, &exp2); // a = f * 2^exp2, f in [0.5, 1)
  int e = exp2 - 1;     // a in [2^e, 2^(e+1))
  if (e > bias)
    return infBits;
  if (e < 1 - bias) {
    // Subnormal: units of 2^(1 - bias - mantBits). A result of 2^mantBits is the smallest normal,
    // whose bit pattern is exactly that integer.
    double q = std::nearbyint(std::ldexp(a, bias - 1 + mantBits));
    return uint16_t(q);
  }
  double q = std::nearbyint(std::ldexp(a, mantBits - e)); // in [2^m, 2^(m+1)]
  uint32_t bits = (uint32_t(e + bias) << mantBits) + (uint32_t(q) - (1u << mantBits));
  // A carry out of the mantissa bumps the exponent; past the largest exponent it is infinity.
  return bits >= infBits ? infBits : uint16_t(bits);
}

inline double expandMagnitude(uint16_t bits, int mantBits, int bias, uint16_t infBits) {
  uint32_t exp = bits >> mantBits;
  uint32_t mant = bits & ((1u << mantBits) - 1);
  if ((bits & infBits) == infBits)
    return mant ? std::nan("") : INFINITY;
  if (exp == 0)
    return std::ldexp(double(mant), 1 - bias - mantBits);
  return std::ldexp(double(mant | (1u << mantBits)), int(exp) - bias - mantBits);
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
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x))
    return sign | f.quietNan;
  return sign | roundMagnitude(std::fabs(x), f.mantBits, f.bias, f.infBits);
}

inline double decode(uint16_t bits, Format16 f) {
  double m = expandMagnitude(bits & 0x7FFF, f.mantBits, f.bias, f.infBits);
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
