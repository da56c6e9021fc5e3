// Max and average pooling, forward and backward (pooling.cu).
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

struct PoolGeometry {
  int64_t N, C, H, W, P, Q;
  int64_t kh, kw, sh, sw, padTop, padLeft, padBottom, padRight, dh, dw;
  bool includePad;
  bool channelsLast; // x, y, dy, dx stored [N,H,W,C] (else [N,C,H,W])
};
cudaError_t pool2d(bool isMax, Ref x, Ref y, const PoolGeometry &g, cudaStream_t s);
cudaError_t pool2dBackward(bool isMax, Ref dy, Ref x, Ref dx, const PoolGeometry &g, cudaStream_t s);
// Max pooling's backward through a record of each window's winning tap: `taps` holds one byte per
// output (N*C*P*Q). Only for windows of fewer than 255 taps (maxPoolTapsFit).
bool maxPoolTapsFit(const PoolGeometry &g);
cudaError_t maxPool2dBackward(Ref dy, Ref x, Ref dx, uint8_t *taps, const PoolGeometry &g, cudaStream_t s);
// The same in two halves: the forward y that also records the taps, and the backward that reads
// them (a training step's pair; the taps come out as maxPool2dBackward's own, bit for bit).
cudaError_t maxPool2dRecordingTaps(Ref x, Ref y, uint8_t *taps, const PoolGeometry &g, cudaStream_t s);
cudaError_t maxPool2dBackwardFromTaps(Ref dy, const uint8_t *taps, Ref dx, const PoolGeometry &g, cudaStream_t s);

} // namespace castor::cuda
