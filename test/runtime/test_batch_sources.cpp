// runtime/data's batch sources behind their one interface: a restored position gives the same
// next batches as continuing, IDX pixels are normalised with the one helper eval uses too, .npy
// batches follow the step, synthetic batches are the serial definition's, and the refusals.
#include "test_helpers.h"
#include "training_fixtures.h"

#include "data/encoded_batch.h"
#include "data/folder_source.h"
#include "data/image_decode.h"

#include "data/batch_source.h"
#include "data/idx.h"
#include "data/idx_source.h"
#include "data/npy.h"
#include "data/synthetic.h"
#include "weights/init.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace castor;
using Catch::Matchers::Contains;

namespace {

std::string tempDir(const std::string &name) {
  std::string d = "/tmp/castor_sources_test_" + std::to_string(::getpid()) + "_" + name;
  ::mkdir(d.c_str(), 0755);
  return d;
}

struct Batch {
  std::vector<double> images;
  std::vector<int64_t> labels;
  int64_t epoch = 0;
  bool operator==(const Batch &o) const {
    return labels == o.labels && epoch == o.epoch && images.size() == o.images.size() &&
           std::memcmp(images.data(), o.images.data(), images.size() * sizeof(double)) == 0;
  }
};

// The batches of steps first .. first + count - 1.
std::vector<Batch> take(data::BatchSource &source, int64_t first, int64_t count) {
  std::vector<Batch> out;
  for (int64_t s = first; s < first + count; ++s) {
    Batch b;
    REQUIRE(source.next(s, b.images, b.labels).isOk());
    b.epoch = source.epoch();
    out.push_back(std::move(b));
  }
  return out;
}

std::unique_ptr<data::BatchSource> open(const std::string &spec, std::vector<int64_t> images, int64_t classes,
                                        uint64_t seed = 5) {
  data::SourceOptions options;
  options.seed = seed;
  auto source = data::openBatchSource(spec, {std::move(images), classes}, options);
  INFO(source.message());
  REQUIRE(source.isOk());
  return std::move(*source);
}

} // namespace

TEST_CASE("an IDX source restored to a saved position continues with the same batches", "[batch-sources]") {
  const std::string dir = tempDir("idx");
  castor::test::writeIdxSet(dir, "train", 10, false); // 2 batches of 4 per epoch, 2 samples dropped
  auto source = open("idx:" + dir, {4, 1, 28, 28}, 10);
  CHECK(source->kind() == "idx");
  const std::vector<Batch> first = take(*source, 0, 3);
  CHECK(first[0].epoch == 0);
  CHECK(first[1].epoch == 0);
  CHECK(first[2].epoch == 1);
  data::DataPosition position;
  source->savePosition(position);
  CHECK(position.at("castor.data.epoch") == "1");
  CHECK(position.at("castor.data.cursor") == "4");
  const std::vector<Batch> continued = take(*source, 3, 4);

  auto restored = open("idx:" + dir, {4, 1, 28, 28}, 10);
  REQUIRE(restored->restorePosition(position).isOk());
  CHECK(take(*restored, 3, 4) == continued);

  // Each epoch is a permutation: its two batches hold 8 different samples, labelled as written.
  for (const Batch &b : first)
    for (int64_t l : b.labels)
      CHECK((l >= 0 && l < 10));
  // Another seed shuffles otherwise.
  auto other = open("idx:" + dir, {4, 1, 28, 28}, 10, 6);
  CHECK_FALSE(take(*other, 0, 3) == first);

  CHECK_THAT(open("idx:" + dir, {4, 1, 28, 28}, 10)->restorePosition({}).message(),
             Contains("no IDX loader position"));
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("IDX pixels reach the plan as 8-bit pixels with their normalisation", "[batch-sources]") {
  const std::string dir = tempDir("norm");
  castor::test::writeIdxSet(dir, "train", 4, true);
  auto set = idx::readLabelledImages(dir, "train");
  REQUIRE(set.isOk());
  const PixelTransform transform = pixelTransform({0.25}, {0.5}, 1);
  CHECK(transform.scale[0] == float(1.0 / (255.0 * 0.5)));
  CHECK(transform.bias[0] == -0.5f);
  data::IdxSource source(*set, 3, 4, transform);
  CHECK(source.imageForm() == data::ImageForm::Pixels);
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  REQUIRE(source.nextPixels(0, pixels, labels).isOk());
  REQUIRE(pixels.size() == 4 * 784);
  // One epoch of all 4 samples: each image of the batch is one of the file's, as stored.
  for (int64_t b = 0; b < 4; ++b) {
    bool found = false;
    for (int64_t i = 0; i < 4 && !found; ++i)
      found = std::memcmp(set->pixels.data() + i * 784, pixels.data() + b * 784, 784) == 0 &&
              labels[size_t(b)] == set->labels[size_t(i)];
    CHECK(found);
  }
  // The values path gives what the device makes of the pixels: fmaf(p, scale, bias) in float.
  data::IdxSource again(*set, 3, 4, transform);
  std::vector<double> values;
  REQUIRE(again.next(0, values, labels).isOk());
  for (size_t i = 0; i < values.size(); ++i)
    REQUIRE(values[i] == double(std::fmaf(float(pixels[i]), transform.scale[0], transform.bias[0])));
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("an .npy source feeds samples in file order, as a function of the step", "[batch-sources]") {
  const std::string dir = tempDir("npy");
  const int64_t M = 5, N = 2;
  std::vector<double> images(static_cast<size_t>(M * 3));
  std::vector<int64_t> labels(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t k = 0; k < 3; ++k)
      images[size_t(i * 3 + k)] = double(i) + 0.25 * double(k);
    labels[size_t(i)] = i % 3;
  }
  std::vector<uint8_t> labelBytes(labels.size() * 8);
  std::memcpy(labelBytes.data(), labels.data(), labelBytes.size());
  REQUIRE(npy::writeNpy({"", plan::F32, {M, 3, 1, 1}, weights::encodeValues(plan::F32, images)}, dir + "/images.npy")
              .isOk());
  REQUIRE(npy::writeNpy({"", plan::I64, {M}, labelBytes}, dir + "/labels.npy").isOk());

  auto source = open("npy:" + dir, {N, 3, 1, 1}, 3);
  CHECK(source->kind() == "npy");
  const std::vector<Batch> batches = take(*source, 0, 4);
  // Step 2 holds samples 4 and 0 (wrapping around), in epoch 0; step 3 samples 1, 2 in epoch 1.
  CHECK(batches[2].labels == std::vector<int64_t>{4 % 3, 0});
  CHECK(batches[2].images[0] == 4.0);
  CHECK(batches[2].images[3] == 0.0);
  CHECK(batches[2].epoch == 0);
  CHECK(batches[3].epoch == 1);
  // No position to save: another source continues at any step with the same batches.
  data::DataPosition position;
  source->savePosition(position);
  CHECK(position.empty());
  auto again = open("npy:" + dir, {N, 3, 1, 1}, 3);
  CHECK(take(*again, 2, 2) == std::vector<Batch>(batches.begin() + 2, batches.end()));

  // Labels outside the plan's classes, and images of the wrong shape, are refused.
  auto refused = data::openBatchSource("npy:" + dir, {{N, 3, 1, 1}, 2}, {});
  CHECK_THAT(refused.message(), Contains("label 2 of sample 2 is outside [0, 2)"));
  auto wrong = data::openBatchSource("npy:" + dir, {{N, 1, 3, 1}, 3}, {});
  CHECK_THAT(wrong.message(), Contains("must be [M, 1, 3, 1], but it is [5, 3, 1, 1]"));
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("a synthetic source hands out the synthetic pixels of its seed and step", "[batch-sources]") {
  auto source = open("synthetic", {3, 2, 2, 2}, 7, 11);
  CHECK(source->kind() == "synthetic");
  CHECK(source->imageForm() == data::ImageForm::SyntheticPixels);
  CHECK(source->syntheticSeed() == 11);
  data::DataPosition position;
  source->savePosition(position);
  CHECK(position.empty()); // a function of (seed, step): the training state's step is the position
  const PixelTransform t = source->pixelTransform();
  REQUIRE(t.channels() == 2);
  for (int64_t step : {0, 1, 5, 2}) {
    Batch got;
    REQUIRE(source->next(step, got.images, got.labels).isOk());
    std::vector<uint8_t> pixels(24);
    syntheticPixels(11, step, pixels.size(), pixels.data());
    // [N, H, W, C] pixels to [N, C, H, W] values.
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t s = 0; s < 4; ++s)
          CHECK(got.images[size_t((n * 2 + c) * 4 + s)] ==
                double(std::fmaf(float(pixels[size_t((n * 4 + s) * 2 + c)]), t.scale[size_t(c)], t.bias[size_t(c)])));
    std::vector<int64_t> labels;
    REQUIRE(source->nextLabels(step, labels).isOk());
    CHECK(labels == got.labels);
    for (int64_t l : labels)
      CHECK((l >= 0 && l < 7));
  }
  // --classes overrides the plan's class count; without either, 10.
  data::SourceOptions options;
  options.syntheticClasses = 1000;
  auto wide = data::openBatchSource("synthetic", {{64, 1}, 7}, options);
  REQUIRE(wide.isOk());
  std::vector<double> images;
  std::vector<int64_t> labels;
  REQUIRE((*wide)->next(0, images, labels).isOk());
  CHECK(*std::max_element(labels.begin(), labels.end()) >= 7);
}

TEST_CASE("batch source refusals", "[batch-sources]") {
  CHECK(data::openBatchSource("imagenet", {{4, 1, 28, 28}, 10}, {}).message() ==
        "unknown --data 'imagenet' (synthetic, idx:DIR, npy:DIR or folder:DIR)");
  const std::string dir = tempDir("few");
  castor::test::writeIdxSet(dir, "train", 3, false);
  CHECK_THAT(data::openBatchSource("idx:" + dir, {{4, 1, 28, 28}, 10}, {}).message(),
             Contains("holds 3 training images, fewer than one batch of 4"));
  CHECK_THAT(data::openBatchSource("idx:" + dir, {{4, 1, 8, 8}, 10}, {}).message(),
             Contains("the plan's images input is [4, 1, 8, 8]") && Contains("28x28"));
  CHECK_THAT(data::openBatchSource("idx:" + dir + "/none", {{4, 1, 28, 28}, 10}, {}).message(),
             Contains("no train-images-idx3-ubyte"));
  castor::test::shell("rm -rf " + dir);
}

namespace {
// An image folder of the fixtures: 3 classes ("a", "b", "c"), 8 images in all.
std::string makeImageFolder(const std::string &name) {
  const std::string dir = tempDir(name), fx = CASTOR_IMAGE_FIXTURES;
  castor::test::shell("mkdir -p " + dir + "/b " + dir + "/a " + dir + "/c");
  castor::test::shell("cp " + fx + "/rgb.jpg " + fx + "/gray.jpg " + fx + "/palette.png " + dir + "/a/");
  castor::test::shell("cp " + fx + "/rgb.png " + fx + "/progressive444.jpg " + dir + "/b/");
  castor::test::shell("cp " + fx + "/tall.png " + fx + "/rgba.png " + fx + "/cmyk.jpg " + dir + "/c/");
  castor::test::shell("cp " + fx + "/not_an_image.txt " + dir + "/c/"); // not an image name: ignored
  return dir;
}

// An image folder of baseline JPEGs alone (what a device decoder takes): 3 classes, 6 images.
std::string makeBaselineJpegFolder(const std::string &name) {
  const std::string dir = tempDir(name), fx = CASTOR_IMAGE_FIXTURES;
  for (const char *c : {"a", "b", "c"})
    castor::test::shell("mkdir -p " + dir + "/" + c + " && cp " + fx + "/rgb.jpg " + fx + "/gray.jpg " + dir + "/" + c +
                        "/");
  return dir;
}
} // namespace

TEST_CASE("an image folder: classes by name, seeded epochs, resume mid-epoch", "[batch-sources]") {
  const std::string dir = makeImageFolder("folder");
  data::SourceOptions options;
  options.seed = 5;
  options.threads = 3;
  auto source = data::openBatchSource("folder:" + dir, {{3, 3, 16, 16}, 3}, options);
  REQUIRE(source.isOk());
  data::BatchSource &s = **source;
  CHECK(s.kind() == "folder");
  CHECK(s.imageForm() == data::ImageForm::Pixels);
  CHECK(s.pixelTransform().channels() == 3);
  // Two epochs of two batches (8 files, batch 3: the last partial batch dropped).
  std::vector<std::vector<uint8_t>> pixels(5);
  std::vector<std::vector<int64_t>> labels(5);
  data::DataPosition afterTwo;
  for (int step = 0; step < 5; ++step) {
    REQUIRE(s.nextPixels(step, pixels[size_t(step)], labels[size_t(step)]).isOk());
    CHECK(pixels[size_t(step)].size() == 3 * 16 * 16 * 3);
    if (step == 1)
      s.savePosition(afterTwo);
  }
  CHECK(s.epoch() == 2);
  std::multiset<int64_t> epoch0(labels[0].begin(), labels[0].end());
  epoch0.insert(labels[1].begin(), labels[1].end());
  for (int64_t l : epoch0)
    CHECK((l >= 0 && l <= 2)); // a, b, c
  CHECK(labels[0] != labels[2]); // epochs reshuffle (and crop anew)
  // Another source of the same seed resumes at step 2 with the same batches, pixel for pixel.
  auto resumed = data::openBatchSource("folder:" + dir, {{3, 3, 16, 16}, 3}, options);
  REQUIRE(resumed.isOk());
  REQUIRE((*resumed)->restorePosition(afterTwo).isOk());
  for (int step = 2; step < 5; ++step) {
    std::vector<uint8_t> p;
    std::vector<int64_t> l;
    REQUIRE((*resumed)->nextPixels(step, p, l).isOk());
    CHECK(p == pixels[size_t(step)]);
    CHECK(l == labels[size_t(step)]);
  }
  // Another seed, other crops.
  options.seed = 6;
  auto other = data::openBatchSource("folder:" + dir, {{3, 3, 16, 16}, 3}, options);
  REQUIRE(other.isOk());
  std::vector<uint8_t> p;
  std::vector<int64_t> l;
  REQUIRE((*other)->nextPixels(0, p, l).isOk());
  CHECK(p != pixels[0]);
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("an image folder's batches are the same bytes whatever its threads and read-ahead", "[batch-sources]") {
  // The pool's threads take samples across the batches in the making: the batches still come
  // out in order, each sample where it belongs, over epoch boundaries (8 files, batch 3: a new
  // epoch every two batches), for pixels and for files handed to a device decoder alike.
  const std::string dir = makeImageFolder("folder-threads");
  for (bool encoded : {false, true}) {
    std::vector<std::vector<uint8_t>> reference;
    std::vector<std::vector<int64_t>> referenceLabels;
    for (auto [threads, ahead] : {std::pair{1, 1}, std::pair{4, 1}, std::pair{3, 4}, std::pair{8, 2}}) {
      data::FolderOptions options;
      options.seed = 9;
      options.threads = threads;
      options.ahead = ahead;
      options.deviceDecode = encoded;
      options.hostShare = 0.5;
      auto source = data::FolderSource::open(dir, {3, 3, 20, 20}, 3, options);
      REQUIRE(source.isOk());
      for (int step = 0; step < 7; ++step) {
        std::vector<uint8_t> pixels;
        std::vector<int64_t> labels;
        if (encoded) {
          EncodedImageBatch batch;
          REQUIRE((*source)->nextEncoded(step, batch, labels).isOk());
          REQUIRE(data::decodeEncodedBatch(batch, pixels).isOk());
        } else {
          REQUIRE((*source)->nextPixels(step, pixels, labels).isOk());
        }
        if (threads == 1) {
          reference.push_back(pixels);
          referenceLabels.push_back(labels);
          continue;
        }
        INFO("threads " << threads << ", ahead " << ahead << ", step " << step << (encoded ? ", files" : ", pixels"));
        CHECK(pixels == reference[size_t(step)]);
        CHECK(labels == referenceLabels[size_t(step)]);
      }
    }
  }
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("an image folder for device decoding hands out files and resizes that make its pixels",
          "[batch-sources]") {
  // The same folder, seed and plan shape, in pixels and as files: the files decoded on the host
  // and resized by their plans (the reference of a device decoder) are the pixels, byte for byte,
  // in training (RandomResizedCrop, flip) and in evaluation (Resize + CenterCrop, padding).
  // With a host share, part of each batch comes as pixels of the output size (copied on the
  // device): the same bytes again.
  const std::string dir = makeImageFolder("folder-encoded");
  for (auto [train, share] : {std::pair{true, 0.0}, std::pair{false, 0.0}, std::pair{true, 0.5}}) {
    data::FolderOptions options;
    options.seed = 11;
    options.train = train;
    options.threads = 2;
    options.hostShare = share;
    auto pixelsSource = data::FolderSource::open(dir, {3, 3, 24, 24}, 3, options);
    options.deviceDecode = true;
    auto filesSource = data::FolderSource::open(dir, {3, 3, 24, 24}, 3, options);
    REQUIRE(pixelsSource.isOk());
    REQUIRE(filesSource.isOk());
    CHECK((*filesSource)->imageForm() == data::ImageForm::EncodedImages);
    int jpegs = 0, decodedHere = 0, padding = 0;
    for (int step = 0; step < 5; ++step) {
      std::vector<uint8_t> pixels, fromFiles;
      std::vector<int64_t> labels, fileLabels;
      EncodedImageBatch batch;
      REQUIRE((*pixelsSource)->nextPixels(step, pixels, labels).isOk());
      REQUIRE((*filesSource)->nextEncoded(step, batch, fileLabels).isOk());
      REQUIRE(batch.images.size() == 3);
      CHECK((batch.outWidth == 24 && batch.outHeight == 24 && batch.channels == 3));
      for (const EncodedImage &e : batch.images) {
        // Files go to the device as baseline JPEGs alone; anything made here is the step's image.
        CHECK((e.jpeg.empty() || (e.baseline && data::isBaselineJpeg(e.jpeg.data(), e.jpeg.size()))));
        CHECK((e.pixels.empty() || (e.width == 24 && e.height == 24)));
        jpegs += !e.jpeg.empty();
        decodedHere += !e.pixels.empty();
        padding += e.resize.empty;
      }
      REQUIRE(data::decodeEncodedBatch(batch, fromFiles).isOk());
      CHECK(fromFiles == pixels);
      CHECK(fileLabels == labels);
    }
    CHECK(jpegs > 0);       // baseline YCbCr and gray JPEGs go as files
    CHECK(decodedHere > 0); // PNGs, the CMYK and the progressive JPEG are made here
    if (!train)
      CHECK(padding > 0); // the last evaluation batch of 8 files in 3s
  }
  data::FolderOptions gray;
  gray.deviceDecode = true;
  CHECK_THAT(data::FolderSource::open(dir, {3, 1, 24, 24}, 3, gray).message(), Contains("3-channel images"));
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("an image folder's host share can change between batches", "[batch-sources]") {
  // Batches made after setHostShare split at the new share: images decoded here come at the
  // output's size (21 x 23, no fixture's), the rest as files. The batches already made keep their
  // split. A source of pixels has no share. (Baseline JPEGs alone: other files are made here at
  // any share.)
  const std::string dir = makeBaselineJpegFolder("folder-share");
  data::FolderOptions options;
  options.seed = 3;
  options.threads = 2;
  options.deviceDecode = true;
  options.ahead = 1;
  options.hostShare = 0.5;
  auto source = data::FolderSource::open(dir, {4, 3, 21, 23}, 3, options);
  REQUIRE(source.isOk());
  int64_t step = 0;
  auto madeHere = [&] {
    EncodedImageBatch b;
    std::vector<int64_t> labels;
    REQUIRE((*source)->nextEncoded(step++, b, labels).isOk());
    int n = 0;
    for (const EncodedImage &e : b.images)
      n += e.jpeg.empty() && e.width == 23 && e.height == 21;
    return n;
  };
  CHECK(madeHere() == 2);
  REQUIRE((*source)->setHostShare(1.0));
  int here = madeHere();
  for (int k = 0; k < 3 && here != 4; ++k) // those made ahead at 0.5 first
    here = madeHere();
  CHECK(here == 4);
  REQUIRE((*source)->setHostShare(0.0));
  for (int k = 0; k < 4 && here != 0; ++k)
    here = madeHere();
  CHECK(here == 0);
  data::FolderOptions pixelsOnly;
  pixelsOnly.threads = 2;
  auto pixels = data::FolderSource::open(dir, {4, 3, 21, 23}, 3, pixelsOnly);
  REQUIRE(pixels.isOk());
  CHECK_FALSE((*pixels)->setHostShare(0.5));
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("image folder refusals name the folder, the class or the file", "[batch-sources]") {
  const std::string dir = makeImageFolder("folder-bad");
  CHECK_THAT(data::openBatchSource("folder:" + dir, {{3, 3, 16, 16}, 10}, {}).message(),
             Contains("has 3 classes, but the plan's logits have 10"));
  CHECK_THAT(data::openBatchSource("folder:" + dir, {{9, 3, 16, 16}, 3}, {}).message(),
             Contains("holds 8 images, fewer than one batch of 9"));
  CHECK_THAT(data::openBatchSource("folder:" + dir + "/missing", {{3, 3, 16, 16}, 3}, {}).message(),
             Contains("is not a folder"));
  castor::test::shell("mkdir -p " + dir + "/d");
  CHECK_THAT(data::openBatchSource("folder:" + dir, {{3, 3, 16, 16}, 4}, {}).message(),
             Contains(dir + "/d holds no .jpg, .jpeg or .png file"));
  // A corrupt file stops training naming it, or is replaced and counted with skipCorrupt.
  castor::test::shell("rmdir " + dir + "/d && cp " + std::string(CASTOR_IMAGE_FIXTURES) + "/truncated.jpg " + dir +
                      "/a/zz_truncated.jpg");
  data::SourceOptions options;
  options.threads = 2;
  bool failed = false;
  {
    auto strict = data::openBatchSource("folder:" + dir, {{9, 3, 16, 16}, 3}, options);
    REQUIRE(strict.isOk());
    std::vector<uint8_t> p;
    std::vector<int64_t> l;
    Status st = (*strict)->nextPixels(0, p, l);
    failed = !st;
    CHECK_THAT(st.message(), Contains("zz_truncated.jpg"));
  }
  CHECK(failed);
  options.skipCorrupt = true;
  auto lenient = data::openBatchSource("folder:" + dir, {{9, 3, 16, 16}, 3}, options);
  REQUIRE(lenient.isOk());
  std::vector<uint8_t> p;
  std::vector<int64_t> l;
  CHECK((*lenient)->nextPixels(0, p, l).isOk());
  castor::test::shell("rm -rf " + dir);
}
