// Host-side preparation of training batches for castor-run: the random streams of the data
// sources, synthetic batches, and the conversion of image values to a plan's dtype. A ResNet-50
// batch holds tens of millions of values, so the work is spread over the host's cores and
// synthetic batches are made one step ahead, while the device runs the current step.
#pragma once

#include "plan/plan.h"
#include "weights/philox.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <vector>

namespace castor::run {

// Domain tags that keep the data's random streams apart from each other (and from parameter
// initialization and dropout, which use other counter layouts).
constexpr uint32_t kImagesTag = 0x53594E49, kLabelsTag = 0x53594E4C, kShuffleTag = 0x5045524D;

inline weights::PhiloxKey dataKey(uint64_t seed, uint32_t tag) { return {uint32_t(seed), uint32_t(seed >> 32) ^ tag}; }
// 53 random bits as a double in [0, 1).
inline double u53(uint32_t a, uint32_t b) { return double((uint64_t(a) << 32 | b) >> 11) * 0x1.0p-53; }

// Threads for host-side data work: the host's cores, at least 1, at most 32 (beyond that the
// conversions are bound by memory bandwidth and a batch is split too finely to gain).
int dataThreads();

// Runs body(begin, end) over [0, count) cut into contiguous chunks, one per thread, on up to
// `threads` threads; a thread gets at least `minChunk` values, since below that starting it
// costs more than it saves. The caller's thread takes the first chunk.
void parallelChunks(size_t count, size_t minChunk, const std::function<void(size_t, size_t)> &body,
                    int threads = dataThreads());

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

// The images' dtype on the host: the plan's own when it is a float type (so the session uploads
// the bytes as they are), otherwise f64, which the session then refuses with its message.
plan::DType hostImageDType(plan::DType planDType);
// weights::encodeValues(dtype, values) into `out` (resized), on several threads.
void encodeValuesParallel(plan::DType dtype, const std::vector<double> &values, std::vector<uint8_t> &out,
                          int threads = dataThreads());

} // namespace castor::run
