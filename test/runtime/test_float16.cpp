// Exact fp16/bf16 rounding: ties to even, overflow to infinity, subnormals.
#include "castor/float_convert.h"
#include "cpu/convert16.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace castor;

namespace {
uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
} // namespace

TEST_CASE("fp16 rounding cases", "[float16]") {
  CHECK(doubleToHalf(1.0) == 0x3C00);
  CHECK(doubleToHalf(-2.0) == 0xC000);
  CHECK(doubleToHalf(0.0) == 0x0000);
  CHECK(doubleToHalf(-0.0) == 0x8000);
  CHECK(floatToHalf(0.1f) == 0x2E66);
  CHECK(doubleToHalf(65504.0) == 0x7BFF); // largest finite
  // Ties to even.
  CHECK(doubleToHalf(1 + std::ldexp(1.0, -11)) == 0x3C00);      // tie, 0x3C00 is even
  CHECK(doubleToHalf(1 + 3 * std::ldexp(1.0, -11)) == 0x3C02);  // tie, 0x3C02 is even
  CHECK(doubleToHalf(1 + std::ldexp(1.0, -11) + 1e-12) == 0x3C01); // just above the tie
  CHECK(doubleToHalf(2049.0) == 0x6800);                        // 2048 (even), not 2050
  CHECK(doubleToHalf(2051.0) == 0x6802);                        // 2052 (even)
  // Overflow: 65520 is the tie between 65504 and 2^16, and goes to infinity.
  CHECK(doubleToHalf(65519.99) == 0x7BFF);
  CHECK(doubleToHalf(65520.0) == 0x7C00);
  CHECK(doubleToHalf(1e9) == 0x7C00);
  CHECK(doubleToHalf(-1e9) == 0xFC00);
  CHECK(doubleToHalf(INFINITY) == 0x7C00);
  CHECK(doubleToHalf(-INFINITY) == 0xFC00);
  CHECK(std::isnan(halfToDouble(doubleToHalf(NAN))));
  CHECK((doubleToHalf(NAN) & 0x7C00) == 0x7C00);
  // Subnormals.
  CHECK(doubleToHalf(std::ldexp(1.0, -24)) == 0x0001); // smallest subnormal
  CHECK(doubleToHalf(std::ldexp(1.0, -25)) == 0x0000); // tie with zero: to even (zero)
  CHECK(doubleToHalf(std::ldexp(3.0, -26)) == 0x0001); // 0.75 of the smallest: up
  CHECK(doubleToHalf(std::ldexp(3.0, -25)) == 0x0002); // 1.5: tie, to even 2
  CHECK(doubleToHalf(std::ldexp(1023.0, -24)) == 0x03FF); // largest subnormal
  CHECK(doubleToHalf(std::ldexp(1023.5, -24)) == 0x0400); // tie: to the smallest normal (even)
  CHECK(doubleToHalf(std::ldexp(1.0, -14)) == 0x0400);
  CHECK(doubleToHalf(-std::ldexp(1.0, -24)) == 0x8001);
  CHECK(doubleToHalf(std::ldexp(1.0, -30)) == 0x0000);
  CHECK(halfToDouble(0x0001) == std::ldexp(1.0, -24));
  CHECK(halfToDouble(0x03FF) == std::ldexp(1023.0, -24));
  CHECK(halfToDouble(0x7BFF) == 65504.0);
  CHECK(std::isinf(halfToDouble(0x7C00)));
}

TEST_CASE("fp16: every value round-trips and every midpoint rounds to even", "[float16]") {
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    double v = halfToDouble(uint16_t(h));
    REQUIRE(doubleToHalf(v) == h);
    REQUIRE(doubleToHalf(-v) == (h | 0x8000));
    double next = h + 1 < 0x7C00 ? halfToDouble(uint16_t(h + 1)) : 65536.0;
    double mid = (v + next) / 2; // exact in double
    uint16_t even = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
    REQUIRE(doubleToHalf(mid) == even);
    REQUIRE(doubleToHalf(std::nextafter(mid, 0.0)) == h);
    REQUIRE(doubleToHalf(std::nextafter(mid, INFINITY)) == h + 1);
  }
}

TEST_CASE("bf16 rounding cases", "[float16]") {
  CHECK(doubleToBFloat16(1.0) == 0x3F80);
  CHECK(doubleToBFloat16(-0.0) == 0x8000);
  CHECK(doubleToBFloat16(1 + std::ldexp(1.0, -8)) == 0x3F80);     // tie, to even
  CHECK(doubleToBFloat16(1 + 3 * std::ldexp(1.0, -8)) == 0x3F82); // tie, to even
  CHECK(floatToBFloat16(bitsFloat(0x7F7F7FFF)) == 0x7F7F);        // just below the overflow tie
  CHECK(floatToBFloat16(bitsFloat(0x7F7F8000)) == 0x7F80);        // the tie: to infinity (even)
  CHECK(floatToBFloat16(bitsFloat(0x7F7FFFFF)) == 0x7F80);        // FLT_MAX overflows bf16
  CHECK(doubleToBFloat16(1e39) == 0x7F80);
  CHECK(doubleToBFloat16(std::ldexp(1.0, -133)) == 0x0001); // smallest bf16 subnormal
  CHECK(doubleToBFloat16(std::ldexp(1.0, -134)) == 0x0000); // tie with zero
  CHECK(floatToBFloat16(bitsFloat(0x00000001)) == 0x0000);  // float's smallest subnormal
  CHECK(floatToBFloat16(bitsFloat(0x00008000)) == 0x0000);  // tie at 2^-134 -> even (zero)
  CHECK(floatToBFloat16(bitsFloat(0x00018000)) == 0x0002);  // tie -> even
  CHECK(std::isnan(bfloat16ToDouble(doubleToBFloat16(NAN))));
  CHECK(bfloat16ToDouble(0x7F7F) == std::ldexp(255.0, 120));
}

TEST_CASE("bf16 from f32 agrees with the round-to-nearest-even bit formula", "[float16]") {
  // For a non-NaN float, bf16 = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16.
  for (uint64_t i = 0; i < (uint64_t(1) << 32); i += 4093) {
    for (uint32_t delta : {0u, 0x7FFFu, 0x8000u, 0x8001u, 0x18000u}) {
      uint32_t bits = uint32_t(i) + delta;
      float f = bitsFloat(bits);
      if (std::isnan(f))
        continue;
      uint16_t want = uint16_t((uint64_t(bits) + 0x7FFF + ((bits >> 16) & 1)) >> 16);
      INFO("bits " << std::hex << bits);
      REQUIRE(floatToBFloat16(f) == want);
      REQUIRE(floatBits(bfloat16ToFloat(want)) == uint32_t(want) << 16);
    }
  }
}

TEST_CASE("the CPU arena's fp16/bf16 runs convert as the element conversions", "[float16]") {
  // cpu/convert16.h: 4 lanes at a time where the CPU has AVX2, the rest one by one. Every 16-bit
  // value decodes alike; every value, midpoint and their neighbours and random doubles encode alike.
  auto bits = [](double x) {
    uint64_t u;
    std::memcpy(&u, &x, 8);
    return u;
  };
  for (bool bf16 : {false, true}) {
    std::vector<uint16_t> all(65536 + 3);
    for (uint32_t i = 0; i < 65536; ++i)
      all[i] = uint16_t(i);
    std::vector<double> decoded(all.size());
    castor::cpu::decode16(reinterpret_cast<const uint8_t *>(all.data()), 65535, bf16, decoded.data());
    std::vector<double> xs;
    for (uint32_t i = 0; i < 65535; ++i) {
      const double want = bf16 ? bfloat16ToDouble(uint16_t(i)) : halfToDouble(uint16_t(i));
      INFO("bits " << std::hex << i);
      REQUIRE(bits(decoded[i]) == bits(want));
      const double next = bf16 ? bfloat16ToDouble(uint16_t(i + 1)) : halfToDouble(uint16_t(i + 1));
      for (double c : {want, std::isfinite(want) && std::isfinite(next) ? want + (next - want) / 2 : want})
        for (double x : {c, std::nextafter(c, INFINITY), std::nextafter(c, -INFINITY)})
          xs.push_back(x);
    }
    std::mt19937_64 rng(7);
    for (int i = 0; i < 100003; ++i) {
      const uint64_t u = rng();
      double x;
      std::memcpy(&x, &u, 8);
      xs.push_back(x);
    }
    std::vector<uint16_t> encoded(xs.size());
    castor::cpu::encode16(xs.data(), int64_t(xs.size()), bf16, reinterpret_cast<uint8_t *>(encoded.data()));
    for (size_t i = 0; i < xs.size(); ++i) {
      INFO("x " << xs[i]);
      REQUIRE(encoded[i] == (bf16 ? doubleToBFloat16(xs[i]) : doubleToHalf(xs[i])));
    }
  }
}
