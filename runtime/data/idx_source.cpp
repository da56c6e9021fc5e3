#include "data/idx_source.h"

#include "data/random_streams.h"
#include "data/shape_text.h"

#include <algorithm>
#include <numeric>

namespace castor::data {

Status checkIdxImageShape(const std::vector<int64_t> &planImages, const idx::LabelledImages &set,
                          const std::string &dir) {
  std::vector<int64_t> want{planImages.empty() ? 0 : planImages[0], 1, set.rows, set.cols};
  if (planImages != want)
    return Status::error("the plan's images input is " + shapeText(planImages) + ", but the images in " + dir +
                         " are " + std::to_string(set.rows) + "x" + std::to_string(set.cols) +
                         " with one channel (the plan needs " + shapeText(want) + ")");
  return Status::ok();
}

Expected<std::unique_ptr<IdxSource>> IdxSource::open(const std::string &dir, const std::vector<int64_t> &planImages,
                                                     uint64_t seed, PixelTransform transform) {
  auto set = idx::readLabelledImages(dir, "train");
  if (!set)
    return set.status();
  CASTOR_RETURN_IF_ERROR(checkIdxImageShape(planImages, *set, dir));
  const int64_t batch = planImages[0];
  if (set->count < batch)
    return Status::error(dir + " holds " + std::to_string(set->count) + " training images, fewer than one batch of " +
                         std::to_string(batch));
  return std::make_unique<IdxSource>(std::move(*set), seed, batch, std::move(transform));
}

Status IdxSource::next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) {
  std::vector<uint8_t> pixels;
  CASTOR_RETURN_IF_ERROR(nextPixels(step, pixels, labels));
  pixelsToValues(pixels, {batch_, 1, data_.rows, data_.cols}, transform_, images);
  return Status::ok();
}

Status IdxSource::nextPixels(int64_t, std::vector<uint8_t> &images, std::vector<int64_t> &labels) {
  if (cursor_ + batch_ > data_.count) {
    ++epoch_;
    cursor_ = 0;
  }
  if (permEpoch_ != epoch_)
    shuffle();
  const int64_t pixels = data_.rows * data_.cols;
  images.resize(size_t(batch_ * pixels));
  labels.resize(size_t(batch_));
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t i = perm_[size_t(cursor_ + b)];
    std::copy_n(data_.pixels.data() + i * pixels, pixels, images.data() + b * pixels);
    labels[size_t(b)] = data_.labels[size_t(i)];
  }
  cursor_ += batch_;
  return Status::ok();
}

void IdxSource::savePosition(DataPosition &position) const {
  position["castor.data.epoch"] = std::to_string(epoch_);
  position["castor.data.cursor"] = std::to_string(cursor_);
}

Status IdxSource::restorePosition(const DataPosition &position) {
  auto e = position.find("castor.data.epoch"), c = position.find("castor.data.cursor");
  if (e == position.end() || c == position.end())
    return Status::error("the state file holds no IDX loader position (castor.data.epoch, castor.data.cursor)");
  epoch_ = std::stoll(e->second);
  cursor_ = std::stoll(c->second);
  return Status::ok();
}

// Fisher-Yates with j = floor(u * (i + 1)), u from Philox(counter {i, 0, epoch, 0}).
void IdxSource::shuffle() {
  perm_.resize(size_t(data_.count));
  std::iota(perm_.begin(), perm_.end(), 0);
  const auto key = dataKey(seed_, kShuffleTag);
  for (int64_t i = data_.count - 1; i > 0; --i) {
    auto w = weights::philox4x32_10({uint32_t(i), uint32_t(uint64_t(i) >> 32), uint32_t(epoch_), 0}, key);
    int64_t j = std::min(int64_t(u53(w[0], w[1]) * double(i + 1)), i);
    std::swap(perm_[size_t(i)], perm_[size_t(j)]);
  }
  permEpoch_ = epoch_;
}

} // namespace castor::data
