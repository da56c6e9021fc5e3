// Rounding noise: every element of a kernel's float outputs moved by one unit in the last place
// of its dtype, up or down at random. What another implementation that rounds differently (other
// summation orders, fused operations, fp32 instead of f64 arithmetic) does to each value it
// stores; running the reference with it measures how far the reference itself moves under such
// differences, the yardstick of the CPU/CUDA agreement test (test/cuda/cuda_agreement.cpp).
#pragma once

#include "plan/plan.h"

#include <cstdint>

namespace castor::cpu {

// Moves each element of the float tensor stored at `data` (f32, f16, bf16 or f64; others are left
// alone) by one ulp; the direction of element e is a function of (seed, salt, e). Zeros (ReLU
// outputs, overflow flags), the largest finite value, infinities and NaNs stay as they are.
void addRoundingNoise(const plan::Tensor &t, uint8_t *data, uint64_t seed, uint64_t salt);

} // namespace castor::cpu
