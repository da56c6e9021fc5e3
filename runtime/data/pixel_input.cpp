// 8-bit images as a plan's image input (castor/pixel_input.h): the host's conversion, the
// reference the device kernels match bit for bit.
#include "castor/pixel_input.h"

#include "castor/float_convert.h"
#include "weights/philox.h"

#include <cmath>
#include <cstring>
#include <string>

namespace castor {

PixelTransform pixelTransform(const std::vector<double> &mean, const std::vector<double> &std, int channels) {
  PixelTransform t;
  for (int c = 0; c < channels; ++c) {
    const double m = mean.size() == 1 ? mean[0] : mean[size_t(c)];
    const double s = std.size() == 1 ? std[0] : std[size_t(c)];
    t.scale.push_back(float(1.0 / (255.0 * s)));
    t.bias.push_back(float(-m / s));
  }
  return t;
}

void syntheticPixels(uint64_t seed, int64_t step, size_t count, uint8_t *out) {
  const weights::PhiloxKey key{uint32_t(seed), uint32_t(seed >> 32) ^ kSyntheticPixelsTag};
  const uint32_t s0 = uint32_t(uint64_t(step)), s1 = uint32_t(uint64_t(step) >> 32);
  for (size_t b = 0; 16 * b < count; ++b) {
    const weights::PhiloxCounter w = weights::philox4x32_10({uint32_t(b), uint32_t(uint64_t(b) >> 32), s0, s1}, key);
    for (size_t k = 0; k < 16 && 16 * b + k < count; ++k)
      out[16 * b + k] = uint8_t(w[k / 4] >> (8 * (k % 4)));
  }
}

Expected<PixelShape> pixelShapeOf(const plan::Tensor &t, const PixelTransform &transform) {
  const std::string what = "input '" + t.name() + "'";
  if (t.shape_size() != 4)
    return Status::error(what + " has rank " + std::to_string(t.shape_size()) + ": 8-bit images fill [N, C, H, W]");
  if (t.dtype() != plan::F32 && t.dtype() != plan::F16 && t.dtype() != plan::BF16)
    return Status::error(what + " is " + plan::dtypeName(t.dtype()) + ": 8-bit images fill f32, f16 or bf16");
  PixelShape s{t.shape(0), t.shape(1), t.shape(2), t.shape(3)};
  if (s.c != transform.channels())
    return Status::error(what + " has " + std::to_string(s.c) + " channels, the pixels' normalisation " +
                         std::to_string(transform.channels()));
  return s;
}

void pixelsToTensor(const uint8_t *pixels, const PixelShape &shape, const PixelTransform &transform, plan::DType dtype,
                    uint8_t *out) {
  // 256 values per channel: a table, each entry the arithmetic of the header.
  const size_t elem = plan::dtypeSize(dtype);
  std::vector<uint8_t> table(size_t(shape.c) * 256 * elem);
  for (int64_t c = 0; c < shape.c; ++c)
    for (int p = 0; p < 256; ++p) {
      const float v = std::fmaf(float(p), transform.scale[size_t(c)], transform.bias[size_t(c)]);
      uint8_t *e = &table[(size_t(c) * 256 + size_t(p)) * elem];
      if (dtype == plan::F32) {
        std::memcpy(e, &v, 4);
      } else {
        const uint16_t h = dtype == plan::F16 ? floatToHalf(v) : floatToBFloat16(v);
        std::memcpy(e, &h, 2);
      }
    }
  const size_t hw = size_t(shape.h * shape.w);
  for (int64_t n = 0; n < shape.n; ++n)
    for (int64_t c = 0; c < shape.c; ++c) {
      const uint8_t *src = pixels + size_t(n) * hw * size_t(shape.c) + size_t(c);
      uint8_t *dst = out + (size_t(n * shape.c + c) * hw) * elem;
      const uint8_t *row = &table[size_t(c) * 256 * elem];
      for (size_t i = 0; i < hw; ++i)
        std::memcpy(dst + i * elem, row + size_t(src[i * size_t(shape.c)]) * elem, elem);
    }
}

} // namespace castor
