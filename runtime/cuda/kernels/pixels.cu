// 8-bit images to an image input (pixels.h). One thread per pixel (n, h, w): its C bytes in,
// C values out, stored channels-last or planar.
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/philox.cuh"
#include "cuda/kernels/pixels.h"

namespace castor::cuda {
namespace {

using detail::fromAcc;

// Byte i of the synthetic stream of one step (castor/pixel_input.h): byte i mod 16 of the Philox
// block i / 16, its words little-endian. A pixel's bytes lie in at most two blocks.
struct SyntheticBytes {
  uint32_t k0, k1, s0, s1;
  __device__ __forceinline__ void block(uint64_t b, uint32_t w[4]) const {
    w[0] = uint32_t(b), w[1] = uint32_t(b >> 32), w[2] = s0, w[3] = s1;
    philox(w, k0, k1);
  }
};

template <typename T, bool Synthetic>
__global__ void pixelsKernel(const uint8_t *pixels, SyntheticBytes syn, T *out, PixelConversion conv) {
  const int64_t hw = conv.h * conv.w, count = conv.n * hw;
  CASTOR_GRID_LOOP(p, count) {
    uint8_t bytes[kMaxPixelChannels];
    const uint64_t first = uint64_t(p) * uint64_t(conv.c);
    if (Synthetic) {
      uint32_t w[4];
      uint64_t loaded = ~uint64_t(0);
      for (int c = 0; c < conv.c; ++c) {
        const uint64_t i = first + uint64_t(c);
        if (i / 16 != loaded) {
          loaded = i / 16;
          syn.block(loaded, w);
        }
        bytes[c] = uint8_t(w[(i % 16) / 4] >> (8 * (i % 4)));
      }
    } else {
      for (int c = 0; c < conv.c; ++c)
        bytes[c] = pixels[first + uint64_t(c)];
    }
    const int64_t n = p / hw, s = p % hw;
    for (int c = 0; c < conv.c; ++c) {
      const float v = fmaf(float(bytes[c]), conv.scale[c], conv.bias[c]);
      const int64_t o = conv.channelsLast ? p * conv.c + c : (n * conv.c + c) * hw + s;
      out[o] = fromAcc<T>(v);
    }
  }
}

template <bool Synthetic>
cudaError_t launch(const uint8_t *pixels, SyntheticBytes syn, Ref out, const PixelConversion &conv, cudaStream_t s) {
  if (conv.c < 1 || conv.c > kMaxPixelChannels)
    return cudaErrorInvalidValue;
  const int64_t count = conv.n * conv.h * conv.w;
  const int grid = detail::gridFor(count);
  switch (out.dt) {
  case kF32:
    pixelsKernel<float, Synthetic><<<grid, detail::kThreads, 0, s>>>(pixels, syn, static_cast<float *>(out.p), conv);
    break;
  case kF16:
    pixelsKernel<__half, Synthetic><<<grid, detail::kThreads, 0, s>>>(pixels, syn, static_cast<__half *>(out.p), conv);
    break;
  case kBF16:
    pixelsKernel<__nv_bfloat16, Synthetic>
        <<<grid, detail::kThreads, 0, s>>>(pixels, syn, static_cast<__nv_bfloat16 *>(out.p), conv);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

} // namespace

cudaError_t pixelsToTensor(const uint8_t *pixels, Ref out, const PixelConversion &conv, cudaStream_t s) {
  return launch<false>(pixels, SyntheticBytes{}, out, conv, s);
}

cudaError_t syntheticPixelsToTensor(uint64_t seed, int64_t step, uint32_t tag, Ref out, const PixelConversion &conv,
                                    cudaStream_t s) {
  const SyntheticBytes syn{uint32_t(seed), uint32_t(seed >> 32) ^ tag, uint32_t(uint64_t(step)),
                           uint32_t(uint64_t(step) >> 32)};
  return launch<true>(nullptr, syn, out, conv, s);
}

} // namespace castor::cuda
