// The choice of fp16/bf16 run conversions for this CPU (convert16.h).
#include "cpu/convert16.h"
#include "cpu/vector_isa.h"

#include "castor/float_convert.h"

#include <cstring>

namespace castor::cpu {

#if CASTOR_CPU_AVX2
// convert16_avx2.cpp: call only on a CPU with AVX2 and F16C. Each converts a multiple of 4 elements.
void decode16Avx2(const uint8_t *src, int64_t n, bool bf16, double *dst);
void encode16Avx2(const double *src, int64_t n, bool bf16, uint8_t *dst);
// convert16_avx512fp16.cpp (AVX512-FP16) and convert16_avx512.cpp (AVX-512F and VL): call only on a
// CPU with those; a multiple of 8 elements.
void encodeHalfAvx512(const double *src, int64_t n, uint8_t *dst);
void encodeBFloat16Avx512(const double *src, int64_t n, uint8_t *dst);
#endif

namespace {
void decodeScalar(const uint8_t *src, int64_t n, bool bf16, double *dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = bf16 ? bfloat16ToDouble(h) : halfToDouble(h);
  }
}

void encodeScalar(const double *src, int64_t n, bool bf16, uint8_t *dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = bf16 ? doubleToBFloat16(src[i]) : doubleToHalf(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}
} // namespace

void decode16(const uint8_t *src, int64_t n, bool bf16, double *dst) {
  int64_t done = 0;
#if CASTOR_CPU_AVX2
  if (vectorIsa() != VectorIsa::Generic) {
    done = n / 4 * 4;
    decode16Avx2(src, done, bf16, dst);
  }
#endif
  decodeScalar(src + 2 * done, n - done, bf16, dst + done);
}

void encode16(const double *src, int64_t n, bool bf16, uint8_t *dst) {
  int64_t done = 0;
#if CASTOR_CPU_AVX2
  if (!bf16 && vectorHasFp16Conversion()) {
    done = n / 8 * 8;
    encodeHalfAvx512(src, done, dst);
  } else if (bf16 && vectorIsa() == VectorIsa::Avx512) {
    done = n / 8 * 8;
    encodeBFloat16Avx512(src, done, dst);
  } else if (vectorIsa() != VectorIsa::Generic) {
    done = n / 4 * 4;
    encode16Avx2(src, done, bf16, dst);
  }
#endif
  encodeScalar(src + done, n - done, bf16, dst + 2 * done);
}

} // namespace castor::cpu
