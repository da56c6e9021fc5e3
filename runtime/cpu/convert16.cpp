// The choice of fp16/bf16 run conversions for this CPU (convert16.h).
#include "cpu/convert16.h"

#include "castor/float_convert.h"

#include <cstdlib>
#include <cstring>
#include <string>

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
#if CASTOR_CPU_AVX2
// The widest the CPU has, unless CASTOR_CPU_VECTOR asks for avx2 or generic (as tiled_kernels.cpp);
// asked at first use, not static initialization.
const std::string &vectorWanted() {
  static const std::string want = std::getenv("CASTOR_CPU_VECTOR") ? std::getenv("CASTOR_CPU_VECTOR") : "";
  return want;
}
bool haveAvx2() {
  static const bool avx2 =
      vectorWanted() != "generic" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return avx2;
}
bool haveAvx512() {
  static const bool avx512 =
      vectorWanted().empty() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return avx512;
}
bool haveAvx512Fp16() {
  static const bool fp16 = haveAvx512() && __builtin_cpu_supports("avx512fp16") && __builtin_cpu_supports("avx512bw");
  return fp16;
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
  if (!bf16 && haveAvx512Fp16()) {
    done = n / 8 * 8;
    encodeHalfAvx512(src, done, dst);
  } else if (bf16 && haveAvx512()) {
    done = n / 8 * 8;
    encodeBFloat16Avx512(src, done, dst);
  } else if (haveAvx2()) {
    done = n / 4 * 4;
    encode16Avx2(src, done, bf16, dst);
  }
#endif
  encodeScalar(src + done, n - done, bf16, dst + 2 * done);
}

} // namespace castor::cpu
