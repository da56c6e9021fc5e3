// The choice of fp16/bf16 run conversions for this CPU (convert16.h).
#include "cpu/convert16.h"

#include "castor/float_convert.h"

#include <cstring>

namespace castor::cpu {

#if CASTOR_CPU_AVX2
// convert16_avx2.cpp: call only on a CPU with AVX2. Each converts a multiple of 4 elements.
void decode16Avx2(const uint8_t *src, int64_t n, bool bf16, double *dst);
void encode16Avx2(const double *src, int64_t n, bool bf16, uint8_t *dst);
#endif

namespace {
#if CASTOR_CPU_AVX2
bool haveAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2"); // at first use, not static initialization
  return avx2;
}
#endif

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
  if (haveAvx2()) {
    done = n / 4 * 4;
    decode16Avx2(src, done, bf16, dst);
  }
#endif
  decodeScalar(src + 2 * done, n - done, bf16, dst + done);
}

void encode16(const double *src, int64_t n, bool bf16, uint8_t *dst) {
  int64_t done = 0;
#if CASTOR_CPU_AVX2
  if (haveAvx2()) {
    done = n / 4 * 4;
    encode16Avx2(src, done, bf16, dst);
  }
#endif
  encodeScalar(src + done, n - done, bf16, dst + 2 * done);
}

} // namespace castor::cpu
