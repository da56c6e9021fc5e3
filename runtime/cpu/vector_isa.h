// Which instruction-set copies of the CPU backend's loops (tile loops, fp16/bf16 conversions) may
// run: the widest this CPU has, unless CASTOR_CPU_VECTOR narrows it to avx2 or generic (any other
// value leaves the widest). Decided once, at first use, the same for every caller.
#pragma once

namespace castor::cpu {

enum class VectorIsa {
  Generic, // SSE2 on x86-64, NEON on AArch64, scalar elsewhere
  Avx2,    // AVX2 and F16C
  Avx512,  // AVX-512 F and VL (and everything Avx2 has)
};

VectorIsa vectorIsa();

// AVX512-FP16 and BW beside Avx512 (the fp16 encoder's conversion); false below Avx512.
bool vectorHasFp16Conversion();

} // namespace castor::cpu
