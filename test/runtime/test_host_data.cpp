// Host-side batch preparation (runtime/data): threaded and prefetched synthetic batches and the
// threaded dtype conversion must give exactly the bits of the serial code they replace.
#include "castor/pixel_input.h"
#include "data/image_encoding.h"
#include "host/parallel.h"
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
      host::parallelChunks(
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
    for (int threads : {1, 2, 3, 7, host::hostThreads()}) {
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

TEST_CASE("synthetic pixels are uniform bytes, normalised to mean 0 and variance 1", "[host-data]") {
  std::vector<uint8_t> pixels(size_t(1) << 20); // standard error of the mean ~0.07
  syntheticPixels(7, 3, pixels.size(), pixels.data());
  double sum = 0, squares = 0;
  std::vector<int64_t> counts(256, 0);
  for (uint8_t p : pixels) {
    sum += p;
    squares += double(p) * p;
    ++counts[p];
  }
  const double n = double(pixels.size()), mean = sum / n;
  CHECK(std::abs(mean - 127.5) < 0.5);
  CHECK(std::abs(std::sqrt(squares / n - mean * mean) - kSyntheticStd * 255.0) < 0.5);
  for (int64_t c : counts) // 4096 expected each, standard error 64
    CHECK((c > 3700 && c < 4500));
  // A prefix of a longer request is the shorter request; another step or seed differs.
  std::vector<uint8_t> shorter(1000), other(1000);
  syntheticPixels(7, 3, shorter.size(), shorter.data());
  CHECK(std::equal(shorter.begin(), shorter.end(), pixels.begin()));
  syntheticPixels(7, 4, other.size(), other.data());
  CHECK(other != shorter);
  const PixelTransform t = pixelTransform({kSyntheticMean}, {kSyntheticStd}, 1);
  CHECK(std::abs(std::fmaf(127.5f, t.scale[0], t.bias[0])) < 1e-6);
}

TEST_CASE("pixels become the tensor's dtype by one rounding of fmaf(p, scale, bias)", "[host-data]") {
  // [N=2, H=2, W=3, C=3] pixels covering 0 and 255.
  std::vector<uint8_t> pixels(36);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = uint8_t(i * 7 % 256);
  pixels[0] = 0;
  pixels[1] = 255;
  const PixelShape shape{2, 3, 2, 3};
  const PixelTransform t = pixelTransform({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}, 3);
  for (plan::DType dtype : {plan::F32, plan::F16, plan::BF16}) {
    INFO(plan::dtypeName(dtype));
    std::vector<uint8_t> out(shape.count() * plan::dtypeSize(dtype));
    pixelsToTensor(pixels.data(), shape, t, dtype, out.data());
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t s = 0; s < 6; ++s) {
          const float v = std::fmaf(float(pixels[size_t((n * 6 + s) * 3 + c)]), t.scale[size_t(c)], t.bias[size_t(c)]);
          const std::vector<uint8_t> want = weights::encodeValues(dtype, {double(v)});
          const size_t at = size_t((n * 3 + c) * 6 + s) * want.size();
          CHECK(std::equal(want.begin(), want.end(), out.begin() + long(at)));
        }
  }
}

TEST_CASE("threaded dtype conversion equals the serial one", "[host-data]") {
  std::vector<double> values;
  std::vector<int64_t> labels;
  syntheticBatch(5, 1, 3, 200001, 10, values, labels); // 600003 values: up to 3 threads' chunks
  const double inf = std::numeric_limits<double>::infinity();
  for (double special : {0.0, -0.0, inf, -inf, std::nan(""), 1e-310, 65520.0, 1e300, -3.0e38, 5.9604644775390625e-8})
    values.push_back(special);
  for (plan::DType dtype : {plan::F16, plan::BF16, plan::F32, plan::F64})
    for (int threads : {1, 2, 3}) {
      INFO(plan::dtypeName(dtype) << ", " << threads << " threads");
      std::vector<uint8_t> got(3, 0xAB); // resized, whatever it held
      weights::encodeValues(dtype, values, got, threads);
      std::vector<uint8_t> serial(values.size() * plan::dtypeSize(dtype));
      weights::encodeValues(dtype, values.data(), values.size(), serial.data());
      CHECK(got == serial);
    }
  CHECK(hostImageDType(plan::F16) == plan::F16);
  CHECK(hostImageDType(plan::F32) == plan::F32);
  CHECK(hostImageDType(plan::I64) == plan::F64); // left to the session to refuse
}
