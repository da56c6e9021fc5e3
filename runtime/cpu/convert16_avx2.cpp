// fp16/bf16 run conversions 4 lanes at a time (convert16.h), compiled with -mavx2 -mf16c -mno-fma
// (runtime/CMakeLists.txt) and called only where the CPU has AVX2 and F16C. Each lane gives
// castor/float_convert.h's bits. Decoding is exact in hardware: fp16 through F16C's conversion to
// fp32, bf16 as the upper half of an fp32, then fp32 to fp64; NaNs then become the reference's
// one quiet NaN of their sign. Encoding runs the reference's integer steps and its exact product,
// with masks for its selects. Intrinsics and no library code, so nothing here merges with code
// built for any x86-64 at link time.
#include <immintrin.h>

#include <cstdint>

namespace castor::cpu {
namespace {
typedef int64_t i64x4 __attribute__((vector_size(32)));
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

// float_convert.h's decode of 4 values: exact widenings, NaNs made the reference's.
template <bool BF16> inline __m256d decode4(const uint8_t *src) {
  const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(src));
  const __m128 f = BF16 ? _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16)) : _mm_cvtph_ps(h);
  const __m256d d = _mm256_cvtps_pd(f);
  const __m256d sign = _mm256_and_pd(d, _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MIN)));
  const __m256d quiet = _mm256_or_pd(sign, _mm256_castsi256_pd(_mm256_set1_epi64x(int64_t(0x7FF8) << 48)));
  return _mm256_blendv_pd(d, quiet, _mm256_cmp_pd(d, d, _CMP_UNORD_Q));
}

template <bool BF16> void decodeRun(const uint8_t *src, int64_t n, double *dst) {
  for (int64_t i = 0; i < n; i += 4)
    _mm256_storeu_pd(dst + i, decode4<BF16>(src + 2 * i));
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
