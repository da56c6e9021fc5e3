// What every launch function of the CUDA backend's own kernels (the .cu files of this folder) shares. The kernels are
// behind plain C++ launch functions, one header per .cu file, so that the host code never includes device code and the
// .cu files never include the plan's protobuf headers.
//
// Every operand is a Ref (base/device_ref.h): a device pointer and its dtype (the plan's DType values). The dtype is
// dispatched once on the host into a template instantiation: operands of one dtype f32/f16/bf16
// compute in fp32, f64 in fp64; operands of mixed dtypes run a slower instantiation that computes
// in fp64. Each result is rounded once into its output's dtype. Sums accumulate in fp32 within a
// thread and combine in fp64 (per block, per chunk). Contiguous element-wise kernels use 16-byte
// loads and stores when the pointers allow (arena offsets are 256-aligned).
//
// Layouts: the launch functions see physical (storage-order) indices. Rank-4 tensors that the
// backend stores channels-last are described by the builders (builders.cpp and the builder beside each .cu) with physical
// strides, a channel geometry [A, C, B] (element (a, c, b) at (a*C + c)*B + b: [N*H*W, C, 1]
// channels-last, [N, C, H*W] row-major), or an explicit channels-last flag.
//
// Scalars that change during training (learning rate, step, loss scale, found_inf, iteration)
// stay in device memory: a step never waits for the host, and every launch function only
// enqueues work on `s` (no allocation, no host synchronisation), so a step can be captured as a
// CUDA graph. Functions return the launch error (cudaSuccess when none).
#pragma once

#include "cuda/base/device_ref.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace castor::cuda {

// The number of multiprocessors the grids are sized for (the builders pass ctx.smCount).
void configureDevice(int smCount);

} // namespace castor::cuda
