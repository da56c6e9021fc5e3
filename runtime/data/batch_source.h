// Where training batches come from, behind one interface: synthetic, IDX (MNIST-format) or .npy
// data. A source hands out the batch of a global step and saves and restores its position as
// metadata entries of a training state, so that a resumed run sees exactly the batches that an
// uninterrupted one would have seen.
#pragma once

#include "castor/status.h"
#include "data/normalization.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace castor::data {

// Metadata entries of a training state ("castor.data.epoch" -> "3", ...).
using DataPosition = std::map<std::string, std::string>;

class BatchSource {
public:
  virtual ~BatchSource() = default;
  // "synthetic", "idx" or "npy": saved with a training state, so a resume on other data is refused.
  virtual std::string kind() const = 0;
  // Images (batch x per-image values, row-major) and labels of global step `step` (0-based).
  virtual Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) = 0;
  // Adds the entries needed to continue from here; none where a batch is a function of its step.
  virtual void savePosition(DataPosition &position) const {}
  // Continues from a position savePosition wrote (other entries are ignored).
  virtual Status restorePosition(const DataPosition &position) { return Status::ok(); }
  // The epoch of the batch handed out last.
  virtual int64_t epoch() const { return 0; }
};

// What a training plan asks of its batches.
struct BatchShape {
  std::vector<int64_t> images; // the plan's images input [N, ...]
  int64_t classes = 0;         // the width of the loss's logits (0: not found)
};

struct SourceOptions {
  uint64_t seed = 0;             // of synthetic batches and of the IDX shuffle
  int64_t syntheticClasses = 0;  // labels of synthetic batches in [0, this); 0: the plan's, else 10
  PixelNormalization normalization; // of IDX pixels
};

// `spec` is "synthetic", "idx:DIR" or "npy:DIR" (castor-run's --data).
Expected<std::unique_ptr<BatchSource>> openBatchSource(const std::string &spec, const BatchShape &shape,
                                                       const SourceOptions &options);

} // namespace castor::data
