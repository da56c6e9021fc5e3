// IDX images (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]) in a seeded random
// order, reshuffled every epoch; an epoch's last partial batch is dropped. The position (epoch,
// cursor) is saved with a training state.
#pragma once

#include "data/batch_source.h"
#include "data/idx.h"

namespace castor::data {

// The plan's images must be [N, 1, rows, cols] for the set's rows x cols images.
Status checkIdxImageShape(const std::vector<int64_t> &planImages, const idx::LabelledImages &set,
                          const std::string &dir);

class IdxSource final : public BatchSource {
public:
  // The training set in `dir`, checked against the plan's images [N, 1, rows, cols].
  static Expected<std::unique_ptr<IdxSource>> open(const std::string &dir, const std::vector<int64_t> &planImages,
                                                   uint64_t seed, PixelTransform transform);
  IdxSource(idx::LabelledImages data, uint64_t seed, int64_t batch, PixelTransform transform)
      : data_(std::move(data)), seed_(seed), batch_(batch), transform_(std::move(transform)) {}

  std::string kind() const override { return "idx"; }
  int64_t epoch() const override { return epoch_; }
  ImageForm imageForm() const override { return ImageForm::Pixels; }
  PixelTransform pixelTransform() const override { return transform_; }
  // The batch after the last one handed out; `step` is not needed.
  Status nextPixels(int64_t step, std::vector<uint8_t> &pixels, std::vector<int64_t> &labels) override;
  Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) override;
  // "castor.data.epoch" and "castor.data.cursor" (the next sample of the epoch's order).
  void savePosition(DataPosition &position) const override;
  Status restorePosition(const DataPosition &position) override;
  Status shareAmong(int rank, int count) override;

private:
  idx::LabelledImages data_;
  uint64_t seed_;
  int64_t batch_;
  PixelTransform transform_;
  int64_t epoch_ = 0, cursor_ = 0, permEpoch_ = -1;
  int shareRank_ = 0, shareCount_ = 1; // shareAmong: cursor_ moves by the replicas' batches
  std::vector<int64_t> perm_;
};

} // namespace castor::data
