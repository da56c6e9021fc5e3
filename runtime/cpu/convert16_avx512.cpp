// bf16 run encoding 8 lanes at a time (convert16.h), compiled with -mavx512f -mavx512vl
// (runtime/CMakeLists.txt) and called only where the CPU has them. castor/float_convert.h's one
// rounding to nearest even, in two steps that give the same bits: fp64 to fp32 rounded to odd
// (toward zero, then the last bit set where that lost anything: 24 bits keep enough to round
// again), then fp32 to bf16 to nearest even on the integer bits (not AVX512-BF16's conversion,
// which flushes subnormals). The default MXCSR keeps subnormals. NaNs become the reference's one
// quiet NaN of their sign. Intrinsics only, so nothing here merges with code built for any
// x86-64 at link time.
#include <immintrin.h>

#include <cstdint>

namespace castor::cpu {

// n a multiple of 8.
void encodeBFloat16Avx512(const double *src, int64_t n, uint8_t *dst) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m512d x = _mm512_loadu_pd(src + i);
    // The zero-masked forms: GCC 12's unmasked ones read an undefined register (a warning).
    const __m256 toZero = _mm512_maskz_cvt_roundpd_ps(0xFF, x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_maskz_cvtps_pd(0xFF, toZero), x, _CMP_NEQ_OQ);
    __m256i bits = _mm256_castps_si256(toZero);
    bits = _mm256_mask_or_epi32(bits, inexact, bits, _mm256_set1_epi32(1));
    // To nearest even at bit 16: add 0x7FFF and the kept part's lowest bit.
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(toZero), 16), _mm256_set1_epi32(0x8000));
    const __mmask8 nan = _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q);
    const __m256i r = _mm256_mask_blend_epi32(nan, rounded, _mm256_or_si256(sign, _mm256_set1_epi32(0x7FC0)));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 2 * i), _mm256_cvtepi32_epi16(r));
  }
}

} // namespace castor::cpu
