// Synthetic batches: deterministic N(0, 1) images and uniform labels, a function of
// (seed, step) only, made on all host cores and one step ahead of the training loop.
#pragma once

#include "data/parallel.h"

#include <cstdint>
#include <future>
#include <vector>

namespace castor::data {

// Deterministic N(0, 1) images and uniform labels in [0, classes), a function of (seed, step) only:
// values 4b .. 4b+3 of step s are Box-Muller (in float, both outputs of each pair of words) of
// Philox(counter {b, s}, key (seed, images tag)): one Philox block and two logarithms per four
// values, so that a ResNet-50 batch takes less host time than the GPU's step.
void syntheticBatch(uint64_t seed, int64_t step, int64_t batch, int64_t perImage, int64_t classes,
                    std::vector<double> &images, std::vector<int64_t> &labels, int threads = dataThreads());

// syntheticBatch for steps asked one after another: after handing out step s it makes step s + 1
// in the background. Any step may be asked for; one that was not made ahead is made on the spot.
class SyntheticStream {
public:
  SyntheticStream(uint64_t seed, int64_t batch, int64_t perImage, int64_t classes)
      : seed_(seed), batch_(batch), perImage_(perImage), classes_(classes) {}
  ~SyntheticStream();
  SyntheticStream(const SyntheticStream &) = delete;
  SyntheticStream &operator=(const SyntheticStream &) = delete;

  // Exactly syntheticBatch(seed, step, batch, perImage, classes, ...).
  void next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels);
  // How many of the steps handed out so far had been made ahead.
  int64_t prefetched() const { return prefetched_; }

private:
  uint64_t seed_;
  int64_t batch_, perImage_, classes_;
  std::future<void> pending_; // making aheadImages_/aheadLabels_ for step aheadStep_
  int64_t aheadStep_ = -1, prefetched_ = 0;
  std::vector<double> aheadImages_;
  std::vector<int64_t> aheadLabels_;
};

} // namespace castor::data
