// Where training batches come from, behind one interface: synthetic, IDX (MNIST-format) or .npy
// data. A source hands out the batch of a global step and saves and restores its position as
// metadata entries of a training state, so that a resumed run sees exactly the batches that an
// uninterrupted one would have seen.
#pragma once

#include "castor/encoded_images.h"
#include "castor/pixel_input.h"
#include "castor/status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace castor::data {

// Metadata entries of a training state ("castor.data.epoch" -> "3", ...).
using DataPosition = std::map<std::string, std::string>;

// How a source's images reach the plan.
enum class ImageForm {
  Values,          // next(): values as the plan takes them (npy: preprocessed arrays)
  Pixels,          // nextPixels(): 8-bit pixels [N, H, W, C], normalised where the step runs
  SyntheticPixels, // castor/pixel_input.h's synthetic pixels of (syntheticSeed(), step), made
                   // where the step runs; nextLabels() gives the labels
  EncodedImages,   // nextEncoded(): files and their resizes (castor/encoded_images.h), decoded and
                   // resized where the step runs
};

class BatchSource {
public:
  virtual ~BatchSource() = default;
  virtual ImageForm imageForm() const { return ImageForm::Values; }
  // Pixels: the batch of global step `step` as pixels[N][H][W][C] and its labels.
  virtual Status nextPixels(int64_t step, std::vector<uint8_t> &pixels, std::vector<int64_t> &labels) {
    return Status::error(kind() + " data has no 8-bit pixels");
  }
  // SyntheticPixels: the labels of step `step`.
  virtual Status nextLabels(int64_t step, std::vector<int64_t> &labels) {
    return Status::error(kind() + " data does not generate its images");
  }
  virtual uint64_t syntheticSeed() const { return 0; }
  // EncodedImages: the batch of global step `step` as files and resizes, and its labels.
  virtual Status nextEncoded(int64_t step, EncodedImageBatch &batch, std::vector<int64_t> &labels) {
    return Status::error(kind() + " data has no image files");
  }
  // Pixels and SyntheticPixels: the normalisation of the pixels, per channel.
  virtual PixelTransform pixelTransform() const { return {}; }
  // Whether the batch of step s is a function of s alone (synthetic, npy), not of a cursor that
  // each batch advances (idx, folder). Such a source serves the replicas of a data-parallel run:
  // replica r of W takes the batch of step s W + r, the same batches one replica with a W-fold
  // batch would take.
  virtual bool batchesFollowStep() const { return false; }
  // For a source whose batches follow a cursor: from now on this process is replica `rank` of
  // `count`, and each batch it hands out is its share of what one process with a batch `count`
  // times larger would take (the epoch's order is the same on every replica: same seed, disjoint
  // samples). Call before the first batch.
  virtual Status shareAmong(int rank, int count) {
    return Status::error(kind() + " data cannot be shared out among replicas");
  }
  // "synthetic", "idx" or "npy": saved with a training state, so a resume on other data is refused.
  virtual std::string kind() const = 0;
  // Images (batch x per-image values, row-major) and labels of global step `step` (0-based):
  // for a source of pixels, the values the device makes of them (castor/pixel_input.h).
  virtual Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) = 0;
  // Adds the entries needed to continue from here; none where a batch is a function of its step.
  virtual void savePosition(DataPosition &position) const {}
  // Continues from a position savePosition wrote (other entries are ignored).
  virtual Status restorePosition(const DataPosition &position) { return Status::ok(); }
  // The epoch of the batch handed out last.
  virtual int64_t epoch() const { return 0; }
  // EncodedImages: the share of each batch made from now on that the host decodes (the rest goes
  // to the device's decoder as files); false where the source has no such share.
  virtual bool setHostShare(double share) { return false; }
  // Files that did not decode and were replaced by others (image folders with skipCorrupt), each
  // once, in the order first met.
  virtual std::vector<std::string> skippedFiles() const { return {}; }
};

// What a training plan asks of its batches.
struct BatchShape {
  std::vector<int64_t> images; // the plan's images input [N, ...]
  int64_t classes = 0;         // the width of the loss's logits (0: not found)
};

struct SourceOptions {
  uint64_t seed = 0;             // of synthetic batches and of the IDX shuffle
  int64_t syntheticClasses = 0;  // labels of synthetic batches in [0, this); 0: the plan's, else 10
  // Of 8-bit pixels scaled to [0, 1]: one value for every channel, or one per channel; empty: the
  // source's default (idx: Fashion-MNIST's training set, 0.2860 and 0.3530; folder: ImageNet's).
  std::vector<double> mean, std;
  // Image folders (folder_source.h): augment (RandomResizedCrop and flip; Resize and CenterCrop
  // in evaluation) or resize whole images; decode JPEGs at a reduced DCT scale where the crop allows;
  // replace files that do not decode instead of failing; decoding threads (0: the host's cores).
  bool reducedDecode = false, skipCorrupt = false, augment = true;
  int threads = 0;
  // Image folders: hand out the files (EncodedImages) for a backend that decodes and resizes them
  // (castor-run train --decoder gpu), instead of decoding on the host.
  bool deviceDecode = false;
  double hostShare = 0; // with deviceDecode: the share of each batch still decoded on the host
};

// The values the plan takes for pixels[N][H][W][C] (castor/pixel_input.h, in f32), [N, C, H, W].
void pixelsToValues(const std::vector<uint8_t> &pixels, const PixelShape &shape, const PixelTransform &transform,
                    std::vector<double> &values);

// `spec` is "synthetic", "idx:DIR", "npy:DIR" or "folder:DIR" (castor-run's --data).
Expected<std::unique_ptr<BatchSource>> openBatchSource(const std::string &spec, const BatchShape &shape,
                                                       const SourceOptions &options);

} // namespace castor::data
