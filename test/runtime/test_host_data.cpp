// Host-side batch preparation (runtime/data): threaded and prefetched synthetic batches and the
// threaded dtype conversion must give exactly the bits of the serial code they replace.
#include "data/image_encoding.h"
#include "data/parallel.h"
#include "data/synthetic.h"

#include "weights/init.h"
#include "weights/philox.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

using namespace castor;
using namespace castor::data;

namespace {

// The serial definition of a synthetic batch, written out independently of runtime/data/synthetic.cpp.
void serialBatch(uint64_t seed, int64_t step, int64_t batch, int64_t perImage, int64_t classes,
                 std::vector<double> &images, std::vector<int64_t> &labels) {
  images.resize(size_t(batch * perImage));
  labels.resize(size_t(batch));
  const uint32_t s0 = uint32_t(uint64_t(step)), s1 = uint32_t(uint64_t(step) >> 32);
  const weights::PhiloxKey ik{uint32_t(seed), uint32_t(seed >> 32) ^ 0x53594E49u};
  const weights::PhiloxKey lk{uint32_t(seed), uint32_t(seed >> 32) ^ 0x53594E4Cu};
  auto unit = [](uint32_t a, uint32_t b) { return double((uint64_t(a) << 32 | b) >> 11) * 0x1.0p-53; };
  for (size_t i = 0; i < images.size(); ++i) {
    const uint64_t block = i / 4;
    auto w = weights::philox4x32_10({uint32_t(block), uint32_t(block >> 32), s0, s1}, ik);
    const size_t pair = (i % 4) / 2;
    const float u = (float(w[2 * pair] >> 8) + 0.5f) / 16777216.0f, t = float(w[2 * pair + 1] >> 8) / 16777216.0f;
    const float r = std::sqrt(-2.0f * std::log(u)), angle = 6.28318530717958647692f * t;
    images[i] = double(i % 2 == 0 ? r * std::cos(angle) : r * std::sin(angle));
  }
  for (size_t n = 0; n < labels.size(); ++n) {
    auto w = weights::philox4x32_10({uint32_t(n), uint32_t(uint64_t(n) >> 32), s0, s1}, lk);
    labels[n] = std::min(int64_t(unit(w[0], w[1]) * double(classes)), classes - 1);
  }
}

// Bit equality (== would pass -0 for 0 and fail NaN for NaN).
bool sameBits(const std::vector<double> &a, const std::vector<double> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

} // namespace

TEST_CASE("parallelChunks covers every index exactly once", "[host-data]") {
  for (size_t count : {size_t(0), size_t(1), size_t(10), size_t(100003)})
    for (int threads : {1, 2, 3, 7, 64}) {
      INFO(count << " values, " << threads << " threads");
      // Counted on the workers, checked afterwards: Catch's assertions are not thread-safe.
      std::vector<std::atomic<int>> hits(count);
      std::atomic<int> chunks{0}, reversed{0};
      parallelChunks(
          count, 1000,
          [&](size_t begin, size_t end) {
            reversed += begin > end ? 1 : 0;
            for (size_t i = begin; i < end; ++i)
              ++hits[i];
            ++chunks;
          },
          threads);
      CHECK(reversed == 0);
      CHECK(std::count_if(hits.begin(), hits.end(), [](const std::atomic<int> &h) { return h == 1; }) ==
            std::ptrdiff_t(count));
      // At least 1000 values a chunk, and no more chunks than threads.
      CHECK(chunks == std::clamp<int>(int(count / 1000), 1, threads));
    }
}

TEST_CASE("threaded synthetic batches equal the serial definition", "[host-data]") {
  struct Case {
    uint64_t seed;
    int64_t step, batch, perImage, classes;
  };
  // 150055 and 150003 values: not multiples of 2, 3 or 7, and large enough to be split.
  for (Case c : {Case{9, 0, 5, 30011, 10}, Case{0xdeadbeef12345678ull, (int64_t(1) << 32) + 3, 3, 50001, 1000}}) {
    std::vector<double> want;
    std::vector<int64_t> wantLabels;
    serialBatch(c.seed, c.step, c.batch, c.perImage, c.classes, want, wantLabels);
    for (int threads : {1, 2, 3, 7, dataThreads()}) {
      INFO("seed " << c.seed << " step " << c.step << ", " << threads << " threads");
      std::vector<double> got;
      std::vector<int64_t> labels;
      syntheticBatch(c.seed, c.step, c.batch, c.perImage, c.classes, got, labels, threads);
      CHECK(sameBits(got, want));
      CHECK(labels == wantLabels);
    }
  }
}

TEST_CASE("synthetic images are standard normal", "[host-data]") {
  std::vector<double> images;
  std::vector<int64_t> labels;
  syntheticBatch(7, 3, 4, 250000, 10, images, labels); // 1e6 values: standard errors ~1e-3
  double sum = 0, squares = 0, cross = 0;
  size_t tails = 0, finite = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const double v = images[i];
    finite += std::isfinite(v) ? 1 : 0;
    sum += v;
    squares += v * v;
    tails += std::abs(v) > 3 ? 1 : 0;
    if (i % 2 == 1)
      cross += v * images[i - 1]; // the two outputs of one Box-Muller pair
  }
  const double n = double(images.size()), mean = sum / n;
  CHECK(finite == images.size());
  CHECK(std::abs(mean) < 5e-3);
  CHECK(std::abs(squares / n - mean * mean - 1) < 1e-2);
  CHECK(std::abs(cross / (n / 2)) < 1e-2);
  CHECK(double(tails) / n > 0.0020); // P(|z| > 3) = 0.0027
  CHECK(double(tails) / n < 0.0034);
}

TEST_CASE("prefetched synthetic batches equal the serial definition, in any order", "[host-data]") {
  const uint64_t seed = 77;
  const int64_t batch = 3, perImage = 50001, classes = 7;
  SyntheticStream stream(seed, batch, perImage, classes);
  std::vector<double> got, want;
  std::vector<int64_t> labels, wantLabels;
  // In order (made ahead), repeated, skipping ahead, going back, then in order again.
  for (int64_t step : {0, 1, 2, 2, 5, 4, 5, 6}) {
    INFO("step " << step);
    stream.next(step, got, labels);
    serialBatch(seed, step, batch, perImage, classes, want, wantLabels);
    CHECK(sameBits(got, want));
    CHECK(labels == wantLabels);
  }
  CHECK(stream.prefetched() == 4); // steps 1, 2, 5 (the second time) and 6
  // Destroyed with step 7 in the making: it waits for it (no write into freed buffers).
}

TEST_CASE("threaded dtype conversion equals weights::encodeValues", "[host-data]") {
  std::vector<double> values;
  std::vector<int64_t> labels;
  syntheticBatch(5, 1, 3, 200001, 10, values, labels); // 600003 values: 3 chunks of 2^18 at most
  const double inf = std::numeric_limits<double>::infinity();
  for (double special : {0.0, -0.0, inf, -inf, std::nan(""), 1e-310, 65520.0, 1e300, -3.0e38, 5.9604644775390625e-8})
    values.push_back(special);
  for (plan::DType dtype : {plan::F16, plan::BF16, plan::F32, plan::F64})
    for (int threads : {1, 2, 3}) {
      INFO(plan::dtypeName(dtype) << ", " << threads << " threads");
      std::vector<uint8_t> got(3, 0xAB); // resized, whatever it held
      encodeValuesParallel(dtype, values, got, threads);
      CHECK(got == weights::encodeValues(dtype, values));
    }
  CHECK(hostImageDType(plan::F16) == plan::F16);
  CHECK(hostImageDType(plan::F32) == plan::F32);
  CHECK(hostImageDType(plan::I64) == plan::F64); // left to the session to refuse
}
