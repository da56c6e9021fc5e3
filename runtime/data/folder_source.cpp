#include "data/folder_source.h"

#include "data/epoch_order.h"
#include "data/image_augment.h"
#include "data/image_decode.h"
#include "host/parallel.h"
#include "data/random_streams.h"
#include "data/shape_text.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstring>
#include <dirent.h>
#include <cstdio>
#include <numeric>
#include <sys/stat.h>

namespace castor::data {
namespace {

constexpr uint32_t kFolderShuffleTag = 0x464F4C44, kAugmentTag = 0x41554721;

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Entries of `dir` other than "." and "..", sorted by name (byte order, as Python's sorted()).
Expected<std::vector<std::string>> listSorted(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return Status::error("cannot read the folder " + dir);
  std::vector<std::string> names;
  while (const dirent *e = ::readdir(d))
    if (std::string n = e->d_name; n != "." && n != "..")
      names.push_back(n);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool isImageName(const std::string &name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  for (const char *ext : {".jpg", ".jpeg", ".png"})
    if (lower.size() > std::strlen(ext) && lower.compare(lower.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return true;
  return false;
}

// One read of the whole file into `bytes` (kept by the calling thread, so no allocation per file).
Status readFile(const std::string &path, std::vector<uint8_t> &bytes) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return Status::error("cannot open " + path);
  struct stat st;
  const bool sized = ::fstat(::fileno(f), &st) == 0;
  bytes.resize(sized ? size_t(st.st_size) : 0);
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  if (!sized || got != bytes.size())
    return Status::error("cannot read " + path);
  return Status::ok();
}

// Uniform doubles for one sample's augmentation: Philox(counter {position, epoch, k}) for k = 0,
// 1, ..., two draws a block.
class SampleDraws {
public:
  SampleDraws(uint64_t seed, int64_t epoch, int64_t position)
      : key_(dataKey(seed, kAugmentTag)), epoch_(uint32_t(epoch)), position_(uint64_t(position)) {}
  double operator()() {
    if (next_ == 2) {
      block_ = weights::philox4x32_10({uint32_t(position_), uint32_t(position_ >> 32), epoch_, counter_++}, key_);
      next_ = 0;
    }
    const int i = next_++;
    return u53(block_[2 * i], block_[2 * i + 1]);
  }

private:
  weights::PhiloxKey key_;
  uint32_t epoch_;
  uint64_t position_;
  uint32_t counter_ = 0;
  int next_ = 2;
  weights::PhiloxCounter block_{};
};

} // namespace

Expected<std::unique_ptr<FolderSource>> FolderSource::open(const std::string &dir, const std::vector<int64_t> &planImages,
                                                           int64_t classes, FolderOptions options) {
  if (planImages.size() != 4 || (planImages[1] != 1 && planImages[1] != 3))
    return Status::error("an image folder feeds images [N, 3, H, W] or [N, 1, H, W], but the plan's input is " +
                         shapeText(planImages));
  if (!isDirectory(dir))
    return Status::error(dir + " is not a folder");
  auto entries = listSorted(dir);
  if (!entries)
    return entries.status();
  std::vector<std::string> files, classNames;
  std::vector<int64_t> labels;
  for (const std::string &name : *entries) {
    const std::string classDir = dir + "/" + name;
    if (!isDirectory(classDir))
      continue;
    auto images = listSorted(classDir);
    if (!images)
      return images.status();
    const size_t before = files.size();
    for (const std::string &f : *images)
      if (isImageName(f)) {
        files.push_back(classDir + "/" + f);
        labels.push_back(int64_t(classNames.size()));
      }
    // torchvision's ImageFolder refuses a class without images; so does this.
    if (files.size() == before)
      return Status::error("the class folder " + classDir + " holds no .jpg, .jpeg or .png file");
    classNames.push_back(name);
  }
  if (classNames.empty())
    return Status::error(dir + " holds no class folders (the layout is DIR/<class>/<image>.jpg)");
  if (classes > 0 && int64_t(classNames.size()) != classes)
    return Status::error(dir + " has " + std::to_string(classNames.size()) + " classes, but the plan's logits have " +
                         std::to_string(classes));
  if (options.train && int64_t(files.size()) < planImages[0])
    return Status::error(dir + " holds " + std::to_string(files.size()) + " images, fewer than one batch of " +
                         std::to_string(planImages[0]));
  const bool rgb = planImages[1] == 3;
  if (options.deviceDecode && !rgb)
    return Status::error("decoding on the device takes plans of 3-channel images; this plan's have 1 (use --decoder "
                         "host)");
  if (options.mean.empty())
    options.mean = rgb ? std::vector<double>{0.485, 0.456, 0.406} : std::vector<double>{0.2860};
  if (options.std.empty())
    options.std = rgb ? std::vector<double>{0.229, 0.224, 0.225} : std::vector<double>{0.3530};
  for (const std::vector<double> *v : {&options.mean, &options.std})
    if (v->size() != 1 && int64_t(v->size()) != planImages[1])
      return Status::error("--mean and --std take one value or one per channel (" + std::to_string(planImages[1]) + ")");
  return std::unique_ptr<FolderSource>(
      new FolderSource(std::move(files), std::move(labels), std::move(classNames), planImages, std::move(options)));
}

FolderSource::FolderSource(std::vector<std::string> files, std::vector<int64_t> labels,
                           std::vector<std::string> classNames, std::vector<int64_t> planImages, FolderOptions options)
    : files_(std::move(files)), labels_(std::move(labels)), classNames_(std::move(classNames)), n_(planImages[0]),
      c_(planImages[1]), h_(planImages[2]), w_(planImages[3]), options_(std::move(options)) {
  transform_ = castor::pixelTransform(options_.mean, options_.std, int(c_));
  hostShare_ = std::clamp(options_.hostShare, 0.0, 1.0);
}

bool FolderSource::setHostShare(double share) {
  if (!options_.deviceDecode)
    return false;
  hostShare_ = std::clamp(share, 0.0, 1.0);
  return true;
}

FolderSource::~FolderSource() { stop(); }

std::shared_ptr<const std::vector<int64_t>> FolderSource::order(int64_t epoch) {
  std::lock_guard<std::mutex> lock(orderMutex_);
  if (orderEpoch_ != epoch || !order_) {
    std::vector<int64_t> ord;
    if (options_.train) {
      ord = shuffledOrder(options_.seed, kFolderShuffleTag, epoch, int64_t(files_.size()));
    } else {
      ord.resize(files_.size());
      std::iota(ord.begin(), ord.end(), 0);
    }
    // Shared: batches of the epoch before may still be in the making.
    order_ = std::make_shared<const std::vector<int64_t>>(std::move(ord));
    orderEpoch_ = epoch;
  }
  return order_;
}

ImageResize FolderSource::resizeFor(int64_t epoch, int64_t position, int width, int height) const {
  const int outW = int(w_), outH = int(h_);
  if (!options_.augment)
    return planResizedCrop(width, height, {0, 0, width, height}, outW, outH, false);
  if (!options_.train)
    return planResizeCenterCrop(width, height, int(h_ * 8 / 7), int(std::min(h_, w_)));
  SampleDraws draws(options_.seed, epoch, position);
  const CropBox box = randomResizedCropBox(width, height, std::ref(draws));
  const bool flip = draws() < 0.5;
  return planResizedCrop(width, height, box, outW, outH, flip);
}

Status FolderSource::sample(int64_t epoch, int64_t position, int64_t file, uint8_t *out) {
  const std::string &path = files_[size_t(file)];
  thread_local std::vector<uint8_t> bytes;
  CASTOR_RETURN_IF_ERROR(readFile(path, bytes));
  return sampleBytes(epoch, position, path, bytes, out);
}

Status FolderSource::sampleBytes(int64_t epoch, int64_t position, const std::string &path,
                                 const std::vector<uint8_t> &bytes, uint8_t *out) {
  const int outW = int(w_), outH = int(h_), channels = int(c_);
  if (!options_.train || !options_.augment || !options_.reducedDecode) {
    auto image = decodeImage(bytes.data(), bytes.size(), channels, path);
    if (!image)
      return image.status();
    runResize(*image, resizeFor(epoch, position, image->width, image->height), outW, outH, out);
    return Status::ok();
  }
  auto size = imageSize(bytes.data(), bytes.size(), path);
  if (!size)
    return size.status();
  SampleDraws draws(options_.seed, epoch, position);
  CropBox box = randomResizedCropBox(size->first, size->second, std::ref(draws));
  const bool flip = draws() < 0.5;
  // The smallest DCT scale at which the crop still has the output's resolution.
  int num = 1, denom = 1;
  const int minW = int((int64_t(size->first) * outW + box.width - 1) / box.width);
  const int minH = int((int64_t(size->second) * outH + box.height - 1) / box.height);
  auto image = decodeImageScaled(bytes.data(), bytes.size(), channels, minW, minH, path, &num, &denom);
  if (!image)
    return image.status();
  if (num != denom) {
    // The box in the reduced image's pixels, within it.
    const int left = box.left * num / denom, top = box.top * num / denom;
    box = {left, top, std::max(1, std::min(image->width - left, (box.width * num + denom - 1) / denom)),
           std::max(1, std::min(image->height - top, (box.height * num + denom - 1) / denom))};
  }
  resizedCrop(*image, box, outW, outH, flip, out);
  return Status::ok();
}

bool FolderSource::madeHere(int64_t i, double share) const {
  // Spread evenly over the batch: sample i when floor((i + 1) share) passes an integer.
  return std::floor(double(i + 1) * share) > std::floor(double(i) * share);
}

Status FolderSource::sampleEncoded(int64_t epoch, int64_t position, int64_t file, double hostShare,
                                   EncodedImage &out) {
  const std::string &path = files_[size_t(file)];
  out = EncodedImage{};
  out.name = path;
  // Decoded and resized here: the plan's image itself, copied as it is on the device.
  auto madeOnHost = [&](const std::vector<uint8_t> &bytes) {
    out.width = int(w_);
    out.height = int(h_);
    out.pixels.resize(size_t(h_ * w_ * c_));
    CASTOR_RETURN_IF_ERROR(sampleBytes(epoch, position, path, bytes, out.pixels.data()));
    out.resize = planResizedCrop(out.width, out.height, {0, 0, out.width, out.height}, out.width, out.height, false);
    return Status::ok();
  };
  std::vector<uint8_t> bytes;
  CASTOR_RETURN_IF_ERROR(readFile(path, bytes));
  if (madeHere(position - (position / n_) * n_, hostShare))
    return madeOnHost(bytes);
  // The device decodes baseline YCbCr and grayscale JPEGs (what a hardware JPEG decoder takes).
  // Everything else is made here, at the size the step reads, whatever the share: progressive
  // JPEGs would go through nvJPEG's CUDA decoder one by one on the decoding thread (its Huffman
  // decoding on the host, at full size), PNGs and CMYK JPEGs would be decoded here at full size
  // and copied up whole; here the pool's threads decode them reduced where the codec can
  // (DCT scaling) and send the step's pixels alone.
  if (!isYccOrGrayJpeg(bytes.data(), bytes.size()) || !isBaselineJpeg(bytes.data(), bytes.size()))
    return madeOnHost(bytes);
  auto size = imageSize(bytes.data(), bytes.size(), path);
  if (!size)
    return size.status();
  out.width = size->first;
  out.height = size->second;
  out.baseline = true;
  out.jpeg = std::move(bytes);
  out.resize = resizeFor(epoch, position, out.width, out.height);
  return Status::ok();
}

std::unique_ptr<FolderSource::Job> FolderSource::startBatch(int64_t epoch, int64_t cursor) {
  auto job = std::make_unique<Job>();
  Batch &b = job->batch;
  b.epoch = epoch;
  b.cursor = cursor;
  job->order = order(epoch);
  job->hostShare = hostShare_; // one share for the whole batch
  if (options_.deviceDecode) {
    b.encoded.images.assign(size_t(n_), EncodedImage{});
    for (EncodedImage &e : b.encoded.images)
      e.resize.empty = true; // padding until filled
    b.encoded.channels = int(c_);
    b.encoded.outWidth = int(w_);
    b.encoded.outHeight = int(h_);
  } else {
    b.pixels.assign(size_t(n_ * h_ * w_ * c_), 0);
  }
  b.labels.assign(size_t(n_), 0);
  job->errors.assign(size_t(n_), Status::ok());
  job->remaining = n_;
  return job;
}

void FolderSource::makeSample(Job &job, int64_t i) {
  Batch &b = job.batch;
  const std::vector<int64_t> &ord = *job.order;
  const int64_t position = job.first + i;
  if (position >= int64_t(ord.size()))
    return; // evaluation's last batch: padding
  int64_t file = ord[size_t(position)];
  auto one = [&](int64_t f) {
    return options_.deviceDecode
               ? sampleEncoded(b.epoch, position, f, job.hostShare, b.encoded.images[size_t(i)])
               : sample(b.epoch, position, f, b.pixels.data() + size_t(i) * size_t(h_ * w_ * c_));
  };
  Status st = one(file);
  // A file that does not decode, when skipped: the next ones in the epoch's order instead.
  for (int64_t k = 1; !st && options_.skipCorrupt && k < int64_t(ord.size()); ++k) {
    ++skipped_;
    {
      std::lock_guard<std::mutex> lock(skippedMutex_);
      if (std::find(skippedFiles_.begin(), skippedFiles_.end(), files_[size_t(file)]) == skippedFiles_.end())
        skippedFiles_.push_back(files_[size_t(file)]);
    }
    file = ord[size_t((position + k) % int64_t(ord.size()))];
    st = one(file);
  }
  b.labels[size_t(i)] = labels_[size_t(file)];
  job.errors[size_t(i)] = std::move(st);
}

// Batches in order from the position the producer started at, `ahead` at most in the making or
// waiting: the producer lays them out, the pool's threads make their samples, oldest batch first.
void FolderSource::produce() {
  int64_t epoch, cursor;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    epoch = epoch_, cursor = cursor_;
  }
  // Training: the replicas' batches of a step lie one after the other in the epoch's order.
  const int64_t group = options_.train ? n_ * shareCount_ : n_, offset = options_.train ? n_ * shareRank_ : 0;
  for (;;) {
    if (options_.train && cursor + group > files()) {
      ++epoch;
      cursor = 0;
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] {
        // `ahead` waiting and one more in the making, as many as when one batch was made at a time.
        return stopping_ || int64_t(ready_.size() + making_.size()) < std::max(1, options_.ahead) + 1;
      });
      if (stopping_)
        return;
    }
    std::unique_ptr<Job> job = startBatch(epoch, cursor); // the step's position, shared by every replica
    job->first = cursor + offset;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_)
        return;
      making_.push_back(std::move(job));
    }
    changed_.notify_all();
    cursor += group;
    if (!options_.train && cursor >= files()) {
      ++epoch;
      cursor = 0;
    }
  }
}

// A thread of the pool: the next sample of the oldest batch with one left, so that a thread done
// with a batch starts the next while others finish theirs (a slow file no longer idles the pool).
// A batch whose samples are all made joins ready_ once every batch before it has.
void FolderSource::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    Job *job = nullptr;
    changed_.wait(lock, [&] {
      if (stopping_)
        return true;
      for (const auto &j : making_)
        if (j->next < n_) {
          job = j.get();
          return true;
        }
      return false;
    });
    if (stopping_)
      return;
    const int64_t i = job->next++;
    lock.unlock();
    makeSample(*job, i);
    lock.lock();
    if (--job->remaining > 0)
      continue;
    while (!making_.empty() && making_.front()->remaining == 0) {
      Job &done = *making_.front();
      for (Status &e : done.errors)
        if (!e) {
          done.batch.status = std::move(e);
          break;
        }
      ready_.push_back(std::move(done.batch));
      making_.pop_front();
    }
    changed_.notify_all();
  }
}

void FolderSource::start() {
  if (producer_.joinable())
    return;
  producer_ = std::thread([this] { produce(); });
  const int threads = std::max(1, options_.threads > 0 ? options_.threads : host::hostThreads());
  for (int t = 0; t < std::min<int64_t>(threads, n_); ++t)
    pool_.emplace_back([this] { work(); });
}

void FolderSource::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (producer_.joinable())
    producer_.join();
  for (std::thread &t : pool_)
    t.join();
  pool_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = false;
  making_.clear();
  ready_.clear();
}

Status FolderSource::take(Batch &b) {
  start();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty(); });
    b = std::move(ready_.front());
    ready_.pop_front();
    epoch_ = b.epoch;
    cursor_ = b.cursor + (options_.train ? n_ * shareCount_ : n_);
    if (!options_.train && cursor_ >= files())
      epoch_ = b.epoch + 1, cursor_ = 0;
  }
  changed_.notify_all();
  return b.status;
}

Status FolderSource::nextPixels(int64_t, std::vector<uint8_t> &pixels, std::vector<int64_t> &labels) {
  if (options_.deviceDecode)
    return Status::error("this image folder hands out files for the device to decode, not pixels");
  Batch b;
  CASTOR_RETURN_IF_ERROR(take(b));
  pixels.swap(b.pixels);
  labels.swap(b.labels);
  return Status::ok();
}

Status FolderSource::nextEncoded(int64_t, EncodedImageBatch &batch, std::vector<int64_t> &labels) {
  if (!options_.deviceDecode)
    return Status::error("this image folder decodes on the host: it hands out pixels");
  Batch b;
  CASTOR_RETURN_IF_ERROR(take(b));
  std::swap(batch, b.encoded);
  labels.swap(b.labels);
  return Status::ok();
}

Status FolderSource::next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) {
  std::vector<uint8_t> pixels;
  CASTOR_RETURN_IF_ERROR(nextPixels(step, pixels, labels));
  pixelsToValues(pixels, {n_, c_, h_, w_}, transform_, images);
  return Status::ok();
}

Status FolderSource::shareAmong(int rank, int count) {
  if (count < 1 || rank < 0 || rank >= count)
    return Status::error("replica " + std::to_string(rank) + " of " + std::to_string(count) + " does not exist");
  if (!options_.train)
    return Status::error("an evaluation folder is read whole by one process");
  if (producer_.joinable())
    return Status::error("the folder's batches are already being made: share it out before the first");
  if (n_ * count > files())
    return Status::error("the folder holds " + std::to_string(files()) + " images, fewer than one batch of " +
                         std::to_string(n_) + " for each of " + std::to_string(count) + " replicas");
  shareRank_ = rank;
  shareCount_ = count;
  return Status::ok();
}

void FolderSource::savePosition(DataPosition &position) const { saveEpochPosition(position, epoch_, cursor_); }

Status FolderSource::restorePosition(const DataPosition &position) {
  int64_t epoch = 0, cursor = 0;
  CASTOR_RETURN_IF_ERROR(restoreEpochPosition(position, "image-folder", epoch, cursor));
  stop();
  std::lock_guard<std::mutex> lock(mutex_);
  epoch_ = epoch;
  cursor_ = cursor;
  return Status::ok();
}

std::vector<std::string> FolderSource::skippedFiles() const {
  std::lock_guard<std::mutex> lock(skippedMutex_);
  return skippedFiles_;
}

} // namespace castor::data
