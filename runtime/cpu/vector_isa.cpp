#include "cpu/vector_isa.h"

#include <cstdlib>
#include <string>

namespace castor::cpu {

VectorIsa vectorIsa() {
  static const VectorIsa isa = [] {
    const char *v = std::getenv("CASTOR_CPU_VECTOR");
    const std::string want = v ? v : "";
    if (want == "generic")
      return VectorIsa::Generic;
#if CASTOR_CPU_AVX2
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    if (avx2 && want != "avx2" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
      return VectorIsa::Avx512;
    if (avx2)
      return VectorIsa::Avx2;
#endif
    return VectorIsa::Generic;
  }();
  return isa;
}

bool vectorHasFp16Conversion() {
#if CASTOR_CPU_AVX2
  static const bool fp16 = vectorIsa() == VectorIsa::Avx512 && __builtin_cpu_supports("avx512fp16") &&
                           __builtin_cpu_supports("avx512bw");
  return fp16;
#else
  return false;
#endif
}

} // namespace castor::cpu
