// fp16 run encoding 8 lanes at a time (convert16.h) with AVX512-FP16's conversion from fp64, one
// rounding to nearest even as castor/float_convert.h's encode (the default MXCSR: no flush of
// subnormals), compiled with -mavx512fp16 (runtime/CMakeLists.txt) and called only where the CPU
// has it. NaNs become the reference's one quiet NaN of their sign. Intrinsics only, so nothing
// here merges with code built for any x86-64 at link time.
#include <immintrin.h>

#include <cstdint>

namespace castor::cpu {

// n a multiple of 8.
void encodeHalfAvx512(const double *src, int64_t n, uint8_t *dst) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m512d x = _mm512_loadu_pd(src + i);
    const __m128i h = _mm_castph_si128(_mm512_cvtpd_ph(x));
    // The zero-masked forms: GCC 12's unmasked ones read an undefined register (a warning).
    const __m512i top = _mm512_maskz_srli_epi64(0xFF, _mm512_castpd_si512(x), 48);
    const __m128i sign = _mm512_maskz_cvtepi64_epi16(0xFF, _mm512_and_si512(top, _mm512_set1_epi64(0x8000)));
    const __mmask8 nan = _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q);
    const __m128i r = _mm_mask_blend_epi16(nan, h, _mm_or_si128(sign, _mm_set1_epi16(0x7E00)));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 2 * i), r);
  }
}

} // namespace castor::cpu
