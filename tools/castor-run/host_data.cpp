#include "host_data.h"

#include "weights/init.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace castor::run {

int dataThreads() {
  static const int n = std::clamp(int(std::thread::hardware_concurrency()), 1, 32);
  return n;
}

void parallelChunks(size_t count, size_t minChunk, const std::function<void(size_t, size_t)> &body, int threads) {
  const size_t n = std::clamp<size_t>(count / std::max<size_t>(minChunk, 1), 1, size_t(std::max(threads, 1)));
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (size_t t = 1; t < n; ++t)
    pool.emplace_back(body, count * t / n, count * (t + 1) / n);
  body(0, count / n);
  for (std::thread &t : pool)
    t.join();
}

void syntheticBatch(uint64_t seed, int64_t step, int64_t batch, int64_t perImage, int64_t classes,
                    std::vector<double> &images, std::vector<int64_t> &labels, int threads) {
  images.resize(size_t(batch * perImage));
  labels.resize(size_t(batch));
  const uint32_t s0 = uint32_t(uint64_t(step)), s1 = uint32_t(uint64_t(step) >> 32);
  const auto ik = dataKey(seed, kImagesTag), lk = dataKey(seed, kLabelsTag);
  const double twoPi = 6.283185307179586476925286766559;
  // Each value depends on its index alone, so any split into chunks gives the same bits.
  parallelChunks(
      images.size(), size_t(1) << 14,
      [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          auto w = weights::philox4x32_10({uint32_t(i), uint32_t(uint64_t(i) >> 32), s0, s1}, ik);
          images[i] = std::sqrt(-2.0 * std::log(u53(w[0], w[1]) + 0x1.0p-54)) * std::cos(twoPi * u53(w[2], w[3]));
        }
      },
      threads);
  for (size_t n = 0; n < labels.size(); ++n) {
    auto w = weights::philox4x32_10({uint32_t(n), uint32_t(uint64_t(n) >> 32), s0, s1}, lk);
    labels[n] = std::min(int64_t(u53(w[0], w[1]) * double(classes)), classes - 1);
  }
}

SyntheticStream::~SyntheticStream() {
  // The background job writes into members: it must end before they are destroyed.
  if (pending_.valid())
    pending_.wait();
}

void SyntheticStream::next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) {
  const bool made = pending_.valid();
  if (made)
    pending_.get(); // rethrows what the background job threw
  if (made && step == aheadStep_) {
    images.swap(aheadImages_);
    labels.swap(aheadLabels_);
    ++prefetched_;
  } else {
    syntheticBatch(seed_, step, batch_, perImage_, classes_, images, labels);
  }
  // The next step goes into the buffers the caller handed back, already of the batch's size.
  aheadStep_ = step + 1;
  pending_ = std::async(std::launch::async, [this, s = aheadStep_] {
    syntheticBatch(seed_, s, batch_, perImage_, classes_, aheadImages_, aheadLabels_);
  });
}

plan::DType hostImageDType(plan::DType planDType) {
  const bool isFloat =
      planDType == plan::F16 || planDType == plan::BF16 || planDType == plan::F32 || planDType == plan::F64;
  return isFloat ? planDType : plan::F64;
}

void encodeValuesParallel(plan::DType dtype, const std::vector<double> &values, std::vector<uint8_t> &out,
                          int threads) {
  const size_t size = plan::dtypeSize(dtype);
  out.resize(values.size() * size);
  // A conversion is a few instructions per value: only large chunks pay for a thread.
  parallelChunks(
      values.size(), size_t(1) << 18,
      [&](size_t begin, size_t end) {
        weights::encodeValues(dtype, values.data() + begin, end - begin, out.data() + begin * size);
      },
      threads);
}

} // namespace castor::run
