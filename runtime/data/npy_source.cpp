#include "data/npy_source.h"

#include "data/npy.h"
#include "data/shape_text.h"
#include "weights/init.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

namespace castor::data {

Expected<std::unique_ptr<NpySource>> NpySource::open(const std::string &dir, const std::vector<int64_t> &planImages,
                                                     int64_t classes) {
  const std::string imagesPath = dir + "/images.npy", labelsPath = dir + "/labels.npy";
  auto images = npy::readNpy(imagesPath);
  if (!images)
    return images.status();
  auto labels = npy::readNpy(labelsPath);
  if (!labels)
    return labels.status();
  if (images->dtype == plan::I64)
    return Status::error(imagesPath + " holds integers; images must be floating point [M, C, H, W]");
  if (labels->dtype != plan::I64)
    return Status::error(labelsPath + " must hold integer labels (int64 or int32) [M]");
  std::vector<int64_t> want(planImages);
  want[0] = images->shape.empty() ? 0 : images->shape[0];
  if (images->shape != want) {
    std::string perSample;
    for (size_t i = 1; i < planImages.size(); ++i)
      perSample += ", " + std::to_string(planImages[i]);
    return Status::error("the plan's images input is " + shapeText(planImages) + ", so " + imagesPath +
                         " must be [M" + perSample + "], but it is " + shapeText(images->shape));
  }
  const int64_t count = images->shape[0];
  if (labels->shape.size() != 1 || labels->shape[0] != count)
    return Status::error(labelsPath + " must be [" + std::to_string(count) + "] (one label per image in " +
                         imagesPath + "), but it is " + shapeText(labels->shape));
  if (count <= 0)
    return Status::error(imagesPath + " holds no images");
  std::vector<int64_t> labelValues(static_cast<size_t>(count));
  std::memcpy(labelValues.data(), labels->data.data(), labelValues.size() * 8);
  for (int64_t i = 0; i < count; ++i)
    if (labelValues[size_t(i)] < 0 || (classes > 0 && labelValues[size_t(i)] >= classes))
      return Status::error(labelsPath + ": label " + std::to_string(labelValues[size_t(i)]) + " of sample " +
                           std::to_string(i) + " is outside [0, " + std::to_string(classes) + ")");
  const int64_t batch = planImages[0], perImage = std::accumulate(planImages.begin() + 1, planImages.end(),
                                                                  int64_t(1), std::multiplies<int64_t>());
  return std::make_unique<NpySource>(weights::decodeValues(images->dtype, images->data), std::move(labelValues), count,
                                     batch, perImage);
}

Status NpySource::next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) {
  images.resize(size_t(batch_ * perImage_));
  labels.resize(size_t(batch_));
  const int64_t first = int64_t((uint64_t(step) * uint64_t(batch_)) % uint64_t(count_));
  epoch_ = int64_t((uint64_t(step) * uint64_t(batch_)) / uint64_t(count_));
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t i = (first + b) % count_;
    std::copy_n(images_.begin() + i * perImage_, perImage_, images.begin() + b * perImage_);
    labels[size_t(b)] = labels_[size_t(i)];
  }
  return Status::ok();
}

} // namespace castor::data
