// 8-bit images as a plan's image input. Decoders and datasets give 8-bit pixels; the plan wants
// normalised values in its dtype and layout. Uploading the pixels and converting them where the
// step runs moves a quarter of fp32's bytes, and every backend converts by the same arithmetic:
// value = fmaf(p, scale[c], bias[c]) in float (scale = 1 / (255 std), bias = -mean / std, mean and
// std those of pixels scaled to [0, 1]), then rounded to the dtype (to nearest, ties to even).
//
// Synthetic pixels are a function of (seed, step) that a backend can generate where the step runs:
// byte i of a step's images is byte i mod 16 of Philox4x32-10(counter {lo32(i / 16), hi32(i / 16),
// lo32(step), hi32(step)}, key {lo32(seed), hi32(seed) ^ 0x53594E49}), the four words taken
// little-endian. Uniform over 0..255, they are normalised with kSyntheticMean / kSyntheticStd to
// mean 0 and variance 1.
#pragma once

#include "castor/status.h"
#include "plan/plan.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace castor {

// Per channel: value = fmaf(p, scale[c], bias[c]).
struct PixelTransform {
  std::vector<float> scale, bias;
  int channels() const { return int(scale.size()); }
};

// The transform of `channels` channels from the mean and std of pixels scaled to [0, 1]: one
// value for every channel, or one per channel.
PixelTransform pixelTransform(const std::vector<double> &mean, const std::vector<double> &std, int channels);

// Uniform bytes have mean 127.5 and std sqrt((256^2 - 1) / 12) = 73.9; scaled to [0, 1]:
constexpr double kSyntheticMean = 127.5 / 255.0, kSyntheticStd = 73.900270635 / 255.0;
constexpr uint32_t kSyntheticPixelsTag = 0x53594E49;

// The synthetic pixels of `step`: bytes [0, count) of the stream above.
void syntheticPixels(uint64_t seed, int64_t step, size_t count, uint8_t *out);

// An image input's shape as pixels: [N, C, H, W] in the plan, pixels[N][H][W][C].
struct PixelShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  size_t count() const { return size_t(n * c * h * w); }
};

// The shape of image input `t` (rank 4, a float dtype, C within the transform's channels), or why
// 8-bit pixels cannot fill it.
Expected<PixelShape> pixelShapeOf(const plan::Tensor &t, const PixelTransform &transform);

// pixels[N][H][W][C] to the tensor's bytes, [N, C, H, W] row-major in `dtype` (F32, F16, BF16).
void pixelsToTensor(const uint8_t *pixels, const PixelShape &shape, const PixelTransform &transform, plan::DType dtype,
                    uint8_t *out);

} // namespace castor
