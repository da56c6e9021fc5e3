// The launch of the depthwise row kernels (depthwise_rows.cu), for depthwise_conv.cu's forward and
// backwardData: the pass's input (x, or dy), weights, optional bias and added tensor, and output
// (y, or dx). cudaErrorInvalidValue where rowsUnsupported refuses the layer or an operand is not
// 4-byte aligned (rowsAligned): the caller then runs the tiles.
#pragma once

#include "cuda/kernels/depthwise_conv.h"

namespace castor::cuda::depthwise {

bool rowsAligned(const void *in, const void *out, const void *add);

cudaError_t launchRows(const Geometry &g, Pass pass, int dt, const void *in, const void *w, Ref bias,
                       const void *add, void *out, cudaStream_t s);

} // namespace castor::cuda::depthwise
