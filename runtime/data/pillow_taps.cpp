// Pillow's BILINEAR resampling taps (castor/image_resize.h): the host's resize plan, which the
// host resize (pillow_resample.cpp) and the device decoder's (cuda/data/image_decoder.cpp) both run.
#include "castor/image_resize.h"

#include <algorithm>
#include <cmath>

namespace castor {
namespace {

// Pillow's bilinear_filter (support 1).
double triangle(double x) {
  if (x < 0.0)
    x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

} // namespace

ResampleTaps pillowBilinearTaps(int inSize, int outSize, int outBegin, int outEnd) {
  // Pillow resizes a whole image, box (0, 0, inSize, ...), so in0 = 0 and in1 = inSize. Every
  // product below is exact or not followed by an addition, so FMA contraction cannot change it.
  const double scale = double(inSize) / outSize;
  const double filterScale = std::max(scale, 1.0);
  const double support = 1.0 * filterScale;
  const double invFilterScale = 1.0 / filterScale;
  ResampleTaps taps;
  taps.stride = int(std::ceil(support)) * 2 + 1;
  const size_t outputs = size_t(std::max(outEnd - outBegin, 0));
  taps.first.resize(outputs);
  taps.count.resize(outputs);
  taps.weights.assign(outputs * size_t(taps.stride), 0);
  std::vector<double> k(size_t(taps.stride));
  for (int xx = outBegin; xx < outEnd; ++xx) {
    const double center = 0.0 + (xx + 0.5) * scale;
    const int xmin = std::max(int(center - support + 0.5), 0);
    const int xmax = std::min(int(center + support + 0.5), inSize) - xmin;
    double sum = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[size_t(x)] = triangle((double(x + xmin) - center + 0.5) * invFilterScale);
      sum += k[size_t(x)];
    }
    if (sum != 0.0)
      for (int x = 0; x < xmax; ++x)
        k[size_t(x)] /= sum;
    const size_t i = size_t(xx - outBegin);
    taps.first[i] = xmin;
    taps.count[i] = xmax;
    int32_t *w = taps.weights.data() + i * size_t(taps.stride);
    // normalize_coeffs_8bpc: round half away from zero to 22 fractional bits.
    for (int x = 0; x < xmax; ++x) {
      const double v = k[size_t(x)] * (1 << kPillowPrecisionBits);
      w[x] = v < 0 ? int32_t(-0.5 + v) : int32_t(0.5 + v);
    }
  }
  return taps;
}

} // namespace castor
