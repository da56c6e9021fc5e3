// Shapes broadcast against an output, as the element-wise launchers (elementwise.h's Broadcast)
// and matmul's batch dims take them.
#pragma once

#include "cuda/base/device_context.h"
#include "cuda/kernels/elementwise.h"

#include <cstdint>
#include <vector>

namespace castor::cuda {

// Element strides of `in` right-aligned against `out` (0 where it broadcasts); the broadcast of
// two operands against an output (rank 0 when all three shapes are equal: flat indices); the
// flat index in `in` of every batch entry of `out` (matmul's batch dims).
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out);
Expected<Broadcast> makeBroadcast(const Shape &a, const Shape &b, const Shape &out);
std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out);

} // namespace castor::cuda
