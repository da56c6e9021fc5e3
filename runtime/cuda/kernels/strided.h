// Strided element moves (strided.cu): transpose, slice and slice_backward, in storage order.
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

// A walk over `dims` (row-major over the logical result) reading and writing through element
// strides: element (i0, i1, ...) moves between src[srcOffset + sum(i_d srcStrides[d])] and
// dst[dstOffset + sum(i_d dstStrides[d])]. Strides are in elements of the storage order
// (channels-last tensors give their physical strides), so one kernel serves every layout.
struct StridedMove {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t srcStrides[kMaxRank] = {}, dstStrides[kMaxRank] = {};
  int64_t srcOffset = 0, dstOffset = 0;
};

// Copies every element of the walk, elemBytes (1, 2, 4 or 8) at a time; src and dst must not overlap.
cudaError_t stridedMove(const void *src, void *dst, const StridedMove &m, int elemBytes, cudaStream_t s);

} // namespace castor::cuda
