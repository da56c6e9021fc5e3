// Layer normalisation (layer_norm.cu): rows of `length` contiguous elements, statistics and
// arithmetic in fp64 accumulators, each result rounded once into its dtype.
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

// y = (x - mean) inv_std scale + bias per row; mean and inv_std = 1/sqrt(var + eps) per row.
cudaError_t layerNormForward(Ref x, Ref scale, Ref bias, Ref y, Ref mean, Ref invStd, int64_t rows, int64_t length,
                             double eps, cudaStream_t s);

// Scratch doubles layerNormBackward needs for rows x length.
size_t layerNormBackwardScratch(int64_t rows, int64_t length);

// dx per row; dscale and dbias summed over the rows in a fixed order (partial sums over chunks
// of rows in `scratch`, then over the chunks): deterministic.
cudaError_t layerNormBackward(Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, Ref dscale, Ref dbias,
                              int64_t rows, int64_t length, double *scratch, cudaStream_t s);

} // namespace castor::cuda
