// The launch of the depthwise row kernels (depthwise_rows.cu), for depthwise_conv.cu's forward and
// backwardData: the pass's input (x, or dy), weights, optional bias and added tensor, and output
// (y, or dx).
#pragma once

#include "cuda/kernels/depthwise_conv.h"

namespace castor::cuda::depthwise {

// Whether the row kernels take this launch: rowsUnsupported allows the layer and every operand
// is 4-byte aligned (else the caller runs the tiles).
bool rowsTake(const Geometry &g, Pass pass, int dt, const void *in, const void *out, const void *add);

// Launches the row kernels where rowsTake holds (the caller's check, not repeated here).
cudaError_t launchRows(const Geometry &g, Pass pass, int dt, const void *in, const void *w, Ref bias,
                       const void *add, void *out, cudaStream_t s);

} // namespace castor::cuda::depthwise
