// Preprocessed arrays from DIR/images.npy (float [M, C, H, W]) and DIR/labels.npy (integer [M]),
// fed in file order without shuffling: the batch of global step s holds samples
// (s * N + b) mod M, b = 0..N-1, so the position is a function of the step alone.
#pragma once

#include "data/batch_source.h"

namespace castor::data {

class NpySource final : public BatchSource {
public:
  // Checks the arrays against the plan's images [N, ...] and its class count (0: unknown; the
  // labels must then only be non-negative).
  static Expected<std::unique_ptr<NpySource>> open(const std::string &dir, const std::vector<int64_t> &planImages,
                                                   int64_t classes);
  NpySource(std::vector<double> images, std::vector<int64_t> labels, int64_t count, int64_t batch, int64_t perImage)
      : images_(std::move(images)), labels_(std::move(labels)), count_(count), batch_(batch), perImage_(perImage) {}

  std::string kind() const override { return "npy"; }
  bool batchesFollowStep() const override { return true; }
  int64_t epoch() const override { return epoch_; }
  Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) override;

private:
  std::vector<double> images_;
  std::vector<int64_t> labels_;
  int64_t count_, batch_, perImage_, epoch_ = 0;
};

} // namespace castor::data
