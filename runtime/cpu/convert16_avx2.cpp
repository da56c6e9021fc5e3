// fp16/bf16 run conversions 4 lanes at a time (convert16.h), compiled with -mavx2 -mno-fma
// (runtime/CMakeLists.txt) and called only where the CPU has AVX2. Each lane computes
// castor/float_convert.h's encode/decode: the same integer steps and the same exact product,
// with masks for its selects. No library code, so nothing here merges with code built for any
// x86-64 at link time.
#include <cstdint>

namespace castor::cpu {
namespace {
typedef int64_t i64x4 __attribute__((vector_size(32)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef uint16_t u16x4 __attribute__((vector_size(8)));
typedef double f64x4 __attribute__((vector_size(32)));

template <typename V> V load(const void *p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <typename V> void store(void *p, V v) { __builtin_memcpy(p, &v, sizeof v); }

struct Format16 {
  int mantBits, bias;
  int64_t infBits, quietNan;
};
constexpr Format16 kHalf{10, 15, 0x7C00, 0x7E00};
constexpr Format16 kBFloat16{7, 127, 0x7F80, 0x7FC0};

// float_convert.h's encode, lane by lane; lanes are non-negative below 2^63 where compared.
inline u16x4 encode4(f64x4 x, Format16 f) {
  const i64x4 u = (i64x4)x;
  const i64x4 a = u & INT64_MAX;
  const i64x4 sign = (u >> 48) & 0x8000; // arithmetic shift: the mask keeps the sign bit only
  constexpr int64_t kInf = int64_t(0x7FF) << 52;
  const i64x4 e = (a >> 52) - 1023;
  const i64x4 m53 = (a & ((int64_t(1) << 52) - 1)) | (int64_t(1) << 52);
  const i64x4 d = (1 - f.bias) - e, below = d & ~(d >> 63);
  i64x4 shift = (52 - f.mantBits) + below;
  shift = shift > 63 ? i64x4{} + 63 : shift;
  i64x4 q = (i64x4)((uint64_t __attribute__((vector_size(32))))m53 >> shift);
  const i64x4 one = i64x4{} + 1;
  const i64x4 rem = m53 & ((one << shift) - 1), half = one << (shift - 1);
  q += ((rem > half) | ((rem == half) & q)) & 1;
  const i64x4 normal = below == 0; // -1 where normal
  const i64x4 bits = (((e + (f.bias - 1)) << f.mantBits) & normal) + q;
  i64x4 r = bits >= f.infBits ? i64x4{} + f.infBits : bits;
  r = a >= kInf ? (a > kInf ? i64x4{} + f.quietNan : i64x4{} + f.infBits) : r;
  return __builtin_convertvector(r | sign, u16x4);
}

// float_convert.h's decode, lane by lane.
inline f64x4 decode4(u16x4 h, Format16 f) {
  const i32x4 b = __builtin_convertvector(h, i32x4);
  const i32x4 mag = b & 0x7FFF, exp = mag >> f.mantBits, mant = mag & ((1 << f.mantBits) - 1);
  const i32x4 sig = mant | ((exp != 0) & (1 << f.mantBits)), e1 = exp | ((exp == 0) & 1);
  const i64x4 scaleBits = (__builtin_convertvector(e1, i64x4) + (1023 - f.bias - f.mantBits)) << 52;
  const f64x4 m = __builtin_convertvector(sig, f64x4) * (f64x4)scaleBits;
  const i64x4 special = __builtin_convertvector((mag & int32_t(f.infBits)) == int32_t(f.infBits), i64x4);
  const i64x4 specialBits =
      __builtin_convertvector(mant != 0, i64x4) ? i64x4{} + (int64_t(0x7FF8) << 48) : i64x4{} + (int64_t(0x7FF) << 52);
  const i64x4 r = special ? specialBits : (i64x4)m;
  return (f64x4)(r | (__builtin_convertvector(b & 0x8000, i64x4) << 48));
}

template <bool BF16> void decodeRun(const uint8_t *src, int64_t n, double *dst) {
  for (int64_t i = 0; i < n; i += 4)
    store(dst + i, decode4(load<u16x4>(src + 2 * i), BF16 ? kBFloat16 : kHalf));
}

template <bool BF16> void encodeRun(const double *src, int64_t n, uint8_t *dst) {
  for (int64_t i = 0; i < n; i += 4)
    store(dst + 2 * i, encode4(load<f64x4>(src + i), BF16 ? kBFloat16 : kHalf));
}
} // namespace

void decode16Avx2(const uint8_t *src, int64_t n, bool bf16, double *dst) {
  bf16 ? decodeRun<true>(src, n, dst) : decodeRun<false>(src, n, dst);
}

void encode16Avx2(const double *src, int64_t n, bool bf16, uint8_t *dst) {
  bf16 ? encodeRun<true>(src, n, dst) : encodeRun<false>(src, n, dst);
}

} // namespace castor::cpu
