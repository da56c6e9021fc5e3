// Synthetic batches as a BatchSource: the synthetic pixels of castor/pixel_input.h, a function
// of (seed, step), which a device backend generates where the step runs (nothing crosses the
// bus but the labels), normalised to mean 0 and variance 1; labels uniform in [0, classes).
// The position to save is the step itself (kept by the training state).
#pragma once

#include "data/batch_source.h"

namespace castor::data {

class SyntheticSource final : public BatchSource {
public:
  // `images` is the plan's image input [N, C, H, W] (any other shape takes values only).
  SyntheticSource(uint64_t seed, std::vector<int64_t> images, int64_t classes);
  std::string kind() const override { return "synthetic"; }
  bool batchesFollowStep() const override { return true; }
  ImageForm imageForm() const override { return pixels_ ? ImageForm::SyntheticPixels : ImageForm::Values; }
  uint64_t syntheticSeed() const override { return seed_; }
  PixelTransform pixelTransform() const override { return transform_; }
  Status nextLabels(int64_t step, std::vector<int64_t> &labels) override;
  Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) override;

private:
  uint64_t seed_;
  std::vector<int64_t> images_;
  int64_t classes_;
  bool pixels_;
  PixelShape shape_;
  PixelTransform transform_;
};

} // namespace castor::data
