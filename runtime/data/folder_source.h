// An image folder as a BatchSource: the ImageNet layout DIR/<class>/<file>.{jpg,jpeg,png} (any
// case), classes sorted by name as torchvision's ImageFolder sorts them (label = rank), decoded
// and augmented on a pool of host threads a few batches ahead of the step.
//
// Training: each epoch is a Fisher-Yates permutation of the files (the IDX source's, with
// its own domain tag); an epoch's last partial batch is dropped; each sample gets
// RandomResizedCrop(scale 0.08..1, ratio 3/4..4/3) to the plan's H x W and a horizontal flip
// with probability 1/2, its draws from Philox keyed by the seed and counted by (epoch, position
// in the epoch), so a resumed run sees the same crops. Evaluation (`train = false`): files in
// order, Resize(H * 8 / 7) + CenterCrop(H) (256 and 224 for a 224 plan), the last batch padded.
// Without `augment`, every image is resized whole to H x W instead. The position (epoch, cursor) is
// saved with a training state.
//
// Decoding: TurboJPEG and libpng on the host (image_decode.h). With `reducedDecode`, a JPEG whose
// crop is much larger than the output is decoded at a reduced DCT scale (1/2, 1/4, 1/8) that
// still covers the output's resolution, the crop box scaled alike: the same crops and flips at a
// fraction of the decode time, pixels close to but not equal to a full decode's.
#pragma once

#include "data/batch_source.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace castor::data {

struct FolderOptions {
  uint64_t seed = 0;
  bool train = true;
  bool reducedDecode = false;
  // false: every image resized whole to the plan's H x W (Pillow's BILINEAR), no crop, no flip,
  // in training and evaluation alike (images already at the plan's size pass unchanged).
  bool augment = true;
  bool skipCorrupt = false; // else a file that does not decode stops training, naming it
  int threads = 0;          // decoding threads (0: the host's cores)
  int ahead = 3;            // batches made ahead of the one handed out
  // Hand out files and resizes (EncodedImages) instead of pixels: the threads read the files and
  // headers and draw the crops; YCbCr and grayscale JPEGs go as files (to the backend's decoder),
  // other images as pixels decoded here. reducedDecode does not apply. Three channels only.
  bool deviceDecode = false;
  // With deviceDecode: the share of each batch the threads decode and resize here (handed out as
  // pixels at the output size) while the device decodes the rest, both at once.
  double hostShare = 0;
  // Empty: ImageNet's for three channels, Fashion-MNIST's for one.
  std::vector<double> mean, std;
};

class FolderSource final : public BatchSource {
public:
  // The folder `dir` for the plan's images [N, C, H, W] (C 1 or 3) and `classes` logits (0: not
  // checked).
  static Expected<std::unique_ptr<FolderSource>> open(const std::string &dir, const std::vector<int64_t> &planImages,
                                                      int64_t classes, FolderOptions options);
  ~FolderSource() override;

  std::string kind() const override { return "folder"; }
  int64_t epoch() const override { return epoch_; }
  ImageForm imageForm() const override {
    return options_.deviceDecode ? ImageForm::EncodedImages : ImageForm::Pixels;
  }
  PixelTransform pixelTransform() const override { return transform_; }
  Status nextPixels(int64_t step, std::vector<uint8_t> &pixels, std::vector<int64_t> &labels) override;
  Status nextEncoded(int64_t step, EncodedImageBatch &batch, std::vector<int64_t> &labels) override;
  Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) override;
  void savePosition(DataPosition &position) const override;
  Status restorePosition(const DataPosition &position) override;
  Status shareAmong(int rank, int count) override;
  bool setHostShare(double share) override;

  int64_t files() const { return int64_t(files_.size()); }
  const std::vector<std::string> &classNames() const { return classNames_; }
  // Files that did not decode and were replaced (skipCorrupt).
  int64_t skipped() const { return skipped_; }
  std::vector<std::string> skippedFiles() const override;

private:
  struct Batch {
    int64_t epoch = 0, cursor = 0; // of the batch's first sample
    std::vector<uint8_t> pixels;
    EncodedImageBatch encoded; // deviceDecode
    std::vector<int64_t> labels;
    Status status = Status::ok();
  };
  FolderSource(std::vector<std::string> files, std::vector<int64_t> labels, std::vector<std::string> classNames,
               std::vector<int64_t> planImages, FolderOptions options);
  // A batch in the making: its samples are handed to the pool's threads one at a time.
  struct Job {
    Batch batch;
    std::shared_ptr<const std::vector<int64_t>> order; // of the batch's epoch
    int64_t first = 0;      // the epoch position of sample 0 (the step's, plus the replica's offset)
    double hostShare = 0;   // one share for the whole batch
    int64_t next = 0, remaining = 0; // samples not yet taken, not yet made (under mutex_)
    std::vector<Status> errors;
  };
  // The batch at (epoch, cursor) laid out for the pool; makeSample makes its sample i.
  std::unique_ptr<Job> startBatch(int64_t epoch, int64_t cursor);
  void makeSample(Job &job, int64_t i);
  Status sample(int64_t epoch, int64_t position, int64_t file, uint8_t *out);
  // sample() of a file already read.
  Status sampleBytes(int64_t epoch, int64_t position, const std::string &path, const std::vector<uint8_t> &bytes,
                     uint8_t *out);
  Status sampleEncoded(int64_t epoch, int64_t position, int64_t file, double hostShare, EncodedImage &out);
  // Sample i of a batch: made here, as pixels of the output size, at this host share.
  bool madeHere(int64_t i, double share) const;
  // The resize of sample `position` of `epoch`, a width x height image (its draws in training).
  ImageResize resizeFor(int64_t epoch, int64_t position, int width, int height) const;
  // Takes the next batch from the producer.
  Status take(Batch &batch);
  std::shared_ptr<const std::vector<int64_t>> order(int64_t epoch);
  void produce();
  void work();
  void start();
  void stop();

  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  std::vector<std::string> classNames_;
  int64_t n_, c_, h_, w_;
  FolderOptions options_;
  std::atomic<double> hostShare_{0}; // options_.hostShare until setHostShare
  PixelTransform transform_;
  int64_t epoch_ = 0, cursor_ = 0; // the next batch to hand out
  int shareRank_ = 0, shareCount_ = 1; // shareAmong: a training cursor moves by the replicas' batches
  std::atomic<int64_t> skipped_{0};
  mutable std::mutex skippedMutex_; // the pool's threads add to skippedFiles_
  std::vector<std::string> skippedFiles_;

  // The producer lays batches out in order from (epoch_, cursor_) into making_, the pool's threads
  // make them, and they move to ready_ in order: `ahead` at most in both.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Job>> making_;
  std::deque<Batch> ready_;
  bool stopping_ = false;
  std::thread producer_;
  std::vector<std::thread> pool_;
  std::mutex orderMutex_;
  int64_t orderEpoch_ = -1;
  std::shared_ptr<const std::vector<int64_t>> order_;
};

} // namespace castor::data
