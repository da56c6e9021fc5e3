#include "data/synthetic_source.h"

#include "data/random_streams.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace castor::data {

SyntheticSource::SyntheticSource(uint64_t seed, std::vector<int64_t> images, int64_t classes)
    : seed_(seed), images_(std::move(images)), classes_(classes) {
  // Pixels for [N, C, H, W] with C up to 4 (what a device kernel converts); values otherwise.
  pixels_ = images_.size() == 4 && images_[1] >= 1 && images_[1] <= 4;
  const int channels = images_.size() >= 2 ? int(std::min<int64_t>(images_[1], 4)) : 1;
  transform_ = castor::pixelTransform({kSyntheticMean}, {kSyntheticStd}, channels);
  if (pixels_)
    shape_ = {images_[0], images_[1], images_[2], images_[3]};
}

Status SyntheticSource::nextLabels(int64_t step, std::vector<int64_t> &labels) {
  labels.resize(size_t(images_.empty() ? 0 : images_[0]));
  const uint32_t s0 = uint32_t(uint64_t(step)), s1 = uint32_t(uint64_t(step) >> 32);
  const auto key = dataKey(seed_, kLabelsTag);
  for (size_t n = 0; n < labels.size(); ++n) {
    auto w = weights::philox4x32_10({uint32_t(n), uint32_t(uint64_t(n) >> 32), s0, s1}, key);
    labels[n] = std::min(int64_t(u53(w[0], w[1]) * double(classes_)), classes_ - 1);
  }
  return Status::ok();
}

Status SyntheticSource::next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) {
  CASTOR_RETURN_IF_ERROR(nextLabels(step, labels));
  const size_t count = size_t(std::accumulate(images_.begin(), images_.end(), int64_t(1), std::multiplies<int64_t>()));
  std::vector<uint8_t> pixels(count);
  syntheticPixels(seed_, step, count, pixels.data());
  if (pixels_) {
    pixelsToValues(pixels, shape_, transform_, images);
    return Status::ok();
  }
  // Not an image: the same bytes, normalised alike, in the plan's order.
  images.resize(count);
  for (size_t i = 0; i < count; ++i)
    images[i] = double(std::fmaf(float(pixels[i]), transform_.scale[0], transform_.bias[0]));
  return Status::ok();
}

} // namespace castor::data
