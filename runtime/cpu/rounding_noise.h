// Rounding noise: the values a kernel stores, moved as another implementation would have rounded
// them. The CPU reference computes in f64 and rounds once; a GPU kernel accumulates in f32 in
// another order, so before rounding into the stored dtype its value differs from the reference's
// by some f32 ulps. The model here: a relative difference of up to 2^-18 (64 f32 ulps, what an f32
// sum of about 4096 terms in another order typically differs by), then the stored dtype's
// rounding. An f32 value moves by a uniform whole number of ulps in [-32, 32]; a value of a
// coarser dtype (f16, bf16) lands on its other neighbour, one ulp away, with probability
// 2^-18 / eps(dtype) (1/256 for f16, 1/2048 for bf16); f64 values move by one ulp. Running the
// reference with this noise measures how far the reference itself moves under such differences:
// the yardstick of the CPU/CUDA agreement test (test/cuda/cuda_agreement.cpp).
#pragma once

#include "plan/plan.h"

#include <cstdint>

namespace castor::cpu {

// Applies the noise to the float tensor stored at `data` (f32, f16, bf16 or f64; others are left
// alone); element e's draw is a function of (seed, salt, e). Zeros (ReLU outputs, overflow
// flags), infinities and NaNs stay as they are, and no finite value becomes infinite.
void addRoundingNoise(const plan::Tensor &t, uint8_t *data, uint64_t seed, uint64_t salt);

} // namespace castor::cpu
