// Whole runs of fp16/bf16 elements to and from double, with the bits of castor/float_convert.h's
// element conversions: 4 lanes at a time where the CPU has AVX2 (convert16_avx2.cpp), else those
// conversions one by one. The CPU backend's 16-bit tensors go through these on every read and
// write.
#pragma once

#include <cstdint>

namespace castor::cpu {

// src: n 16-bit values (unaligned), fp16 or, with bf16, bfloat16.
void decode16(const uint8_t *src, int64_t n, bool bf16, double *dst);
void encode16(const double *src, int64_t n, bool bf16, uint8_t *dst);

} // namespace castor::cpu
