// 8-bit images to an image input, on the device (pixels.cu): normalisation, the cast to the
// input's dtype and its storage layout in one kernel, from uploaded pixels or from the synthetic
// pixel stream, bit for bit as castor/pixel_input.h defines them on the host.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

constexpr int kMaxPixelChannels = 4;

struct PixelConversion {
  int64_t n = 0, c = 0, h = 0, w = 0;
  float scale[kMaxPixelChannels] = {}, bias[kMaxPixelChannels] = {};
  bool channelsLast = false; // the output stored [N, H, W, C], else [N, C, H, W]
};

// out (dtype kF32/kF16/kBF16) from pixels[N][H][W][C].
cudaError_t pixelsToTensor(const uint8_t *pixels, Ref out, const PixelConversion &conv, cudaStream_t s);
// out from the synthetic pixels of (seed, step).
cudaError_t syntheticPixelsToTensor(uint64_t seed, int64_t step, uint32_t tag, Ref out, const PixelConversion &conv,
                                    cudaStream_t s);

} // namespace castor::cuda
