// Synthetic batches as a BatchSource: a function of (seed, step) only, so the position to save
// is the step itself (kept by the training state), and each step's batch is made in the
// background while the previous one runs.
#pragma once

#include "data/batch_source.h"
#include "data/synthetic.h"

namespace castor::data {

class SyntheticSource final : public BatchSource {
public:
  SyntheticSource(uint64_t seed, int64_t batch, int64_t perImage, int64_t classes)
      : stream_(seed, batch, perImage, classes) {}
  std::string kind() const override { return "synthetic"; }
  Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) override {
    stream_.next(step, images, labels);
    return Status::ok();
  }
  int64_t prefetched() const { return stream_.prefetched(); }

private:
  SyntheticStream stream_;
};

} // namespace castor::data
