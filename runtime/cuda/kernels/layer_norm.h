// Layer normalisation: rows of `length` contiguous elements, each result rounded once into its
// dtype. f32/f16/bf16 data with parameters and statistics of f32 (or of the data's dtype) run the
// register-resident kernels of layer_norm_rows.cu (fp32 arithmetic); anything else, and rows too
// long for them, the fp64 kernels of layer_norm.cu.
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

// y = (x - mean) inv_std scale + bias per row; mean and inv_std = 1/sqrt(var + eps) per row.
cudaError_t layerNormForward(Ref x, Ref scale, Ref bias, Ref y, Ref mean, Ref invStd, int64_t rows, int64_t length,
                             double eps, cudaStream_t s);

// Scratch bytes layerNormBackward needs for rows x length with operands of these dtypes (their
// pointers are not read).
size_t layerNormBackwardScratch(Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, Ref dscale, Ref dbias,
                                int64_t rows, int64_t length);

// dx per row; dscale and dbias summed over the rows in a fixed order (partial sums over chunks
// of rows in `scratch`, then over the chunks; no atomics): deterministic. cudaErrorInvalidValue
// when scratchBytes is below layerNormBackwardScratch.
cudaError_t layerNormBackward(Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, Ref dscale, Ref dbias,
                              int64_t rows, int64_t length, void *scratch, size_t scratchBytes, cudaStream_t s);

} // namespace castor::cuda
