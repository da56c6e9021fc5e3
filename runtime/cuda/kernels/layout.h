// Storage-order conversions between the plan's row-major layout and channels-last (layout.cu).
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {
// Reorders a rank-4 tensor of elemBytes-sized elements between row-major [N,C,H,W] storage and
// channels-last [N,H,W,C] storage (HW = H*W).
cudaError_t toChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                           cudaStream_t s);
cudaError_t fromChannelsLast(const void *src, void *dst, int64_t N, int64_t C, int64_t HW, int elemBytes,
                             cudaStream_t s);
} // namespace castor::cuda
