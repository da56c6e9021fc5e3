#include "data/idx_source.h"

#include "data/epoch_order.h"
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

Status IdxSource::shareAmong(int rank, int count) {
  if (count < 1 || rank < 0 || rank >= count)
    return Status::error("replica " + std::to_string(rank) + " of " + std::to_string(count) + " does not exist");
  if (batch_ * count > data_.count)
    return Status::error("the IDX set holds " + std::to_string(data_.count) + " images, fewer than one batch of " +
                         std::to_string(batch_) + " for each of " + std::to_string(count) + " replicas");
  shareRank_ = rank;
  shareCount_ = count;
  return Status::ok();
}

Status IdxSource::nextPixels(int64_t, std::vector<uint8_t> &images, std::vector<int64_t> &labels) {
  // The replicas' batches of this step, one after the other in the epoch's order: this one's.
  const int64_t group = batch_ * shareCount_, offset = batch_ * shareRank_;
  if (cursor_ + group > data_.count) {
    ++epoch_;
    cursor_ = 0;
  }
  if (permEpoch_ != epoch_) {
    perm_ = shuffledOrder(seed_, kShuffleTag, epoch_, data_.count);
    permEpoch_ = epoch_;
  }
  const int64_t pixels = data_.rows * data_.cols;
  images.resize(size_t(batch_ * pixels));
  labels.resize(size_t(batch_));
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t i = perm_[size_t(cursor_ + offset + b)];
    std::copy_n(data_.pixels.data() + i * pixels, pixels, images.data() + b * pixels);
    labels[size_t(b)] = data_.labels[size_t(i)];
  }
  cursor_ += group;
  return Status::ok();
}

void IdxSource::savePosition(DataPosition &position) const { saveEpochPosition(position, epoch_, cursor_); }

Status IdxSource::restorePosition(const DataPosition &position) {
  return restoreEpochPosition(position, "IDX loader", epoch_, cursor_);
}

} // namespace castor::data
