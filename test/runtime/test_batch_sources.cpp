// runtime/data's batch sources behind their one interface: a restored position gives the same
// next batches as continuing, IDX pixels are normalised with the one helper eval uses too, .npy
// batches follow the step, synthetic batches are the serial definition's, and the refusals.
#include "test_helpers.h"
#include "training_fixtures.h"

#include "data/batch_source.h"
#include "data/idx.h"
#include "data/idx_source.h"
#include "data/normalization.h"
#include "data/npy.h"
#include "data/synthetic.h"
#include "weights/init.h"

#include <catch2/catch.hpp>

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

TEST_CASE("IDX pixels are normalised by the helper that eval uses", "[batch-sources]") {
  const std::string dir = tempDir("norm");
  castor::test::writeIdxSet(dir, "train", 4, true);
  auto set = idx::readLabelledImages(dir, "train");
  REQUIRE(set.isOk());
  const data::PixelNormalization norm{0.25, 0.5};
  CHECK(norm(0) == (0.0 / 255.0 - 0.25) / 0.5);
  CHECK(norm(255) == (255.0 / 255.0 - 0.25) / 0.5);
  data::IdxSource source(*set, 3, 4, norm);
  std::vector<double> images;
  std::vector<int64_t> labels;
  REQUIRE(source.next(0, images, labels).isOk());
  // One epoch of all 4 samples: each image of the batch is one of the file's, normalised.
  for (int64_t b = 0; b < 4; ++b) {
    bool found = false;
    for (int64_t i = 0; i < 4 && !found; ++i) {
      std::vector<double> expected(784);
      norm.apply(set->pixels.data() + i * 784, 784, expected.data());
      found = std::memcmp(expected.data(), images.data() + b * 784, 784 * sizeof(double)) == 0 &&
              labels[size_t(b)] == set->labels[size_t(i)];
    }
    CHECK(found);
  }
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

TEST_CASE("a synthetic source hands out syntheticBatch, whatever the order", "[batch-sources]") {
  auto source = open("synthetic", {3, 2, 2, 2}, 7, 11);
  CHECK(source->kind() == "synthetic");
  data::DataPosition position;
  source->savePosition(position);
  CHECK(position.empty()); // a function of (seed, step): the training state's step is the position
  for (int64_t step : {0, 1, 5, 2}) {
    Batch got, want;
    REQUIRE(source->next(step, got.images, got.labels).isOk());
    data::syntheticBatch(11, step, 3, 8, 7, want.images, want.labels);
    CHECK(got == want);
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
        "unknown --data 'imagenet' (synthetic, idx:DIR or npy:DIR)");
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
