#include "data/synthetic.h"

#include "data/random_streams.h"

#include <algorithm>
#include <cmath>

namespace castor::data {
namespace {

// Four N(0, 1) values from one Philox block: Box-Muller, in float, on each pair of its words (a
// uniform in (0, 1) for the radius, so its logarithm is finite, and one in [0, 1) for the angle).
void normalQuad(const weights::PhiloxCounter &w, float out[4]) {
  constexpr float twoPi = 6.28318530717958647692f;
  for (int p = 0; p < 2; ++p) {
    const float u = (float(w[2 * p] >> 8) + 0.5f) * 0x1.0p-24f, t = float(w[2 * p + 1] >> 8) * 0x1.0p-24f;
    const float r = std::sqrt(-2.0f * std::log(u));
    out[2 * p] = r * std::cos(twoPi * t);
    out[2 * p + 1] = r * std::sin(twoPi * t);
  }
}

} // namespace

void syntheticBatch(uint64_t seed, int64_t step, int64_t batch, int64_t perImage, int64_t classes,
                    std::vector<double> &images, std::vector<int64_t> &labels, int threads) {
  images.resize(size_t(batch * perImage));
  labels.resize(size_t(batch));
  const uint32_t s0 = uint32_t(uint64_t(step)), s1 = uint32_t(uint64_t(step) >> 32);
  const auto ik = dataKey(seed, kImagesTag), lk = dataKey(seed, kLabelsTag);
  // Values 4b .. 4b+3 come from Philox block b alone, so any split into chunks of blocks gives the
  // same bits.
  const size_t blocks = (images.size() + 3) / 4;
  host::parallelChunks(
      blocks, size_t(1) << 12,
      [&](size_t begin, size_t end) {
        float quad[4];
        for (size_t b = begin; b < end; ++b) {
          normalQuad(weights::philox4x32_10({uint32_t(b), uint32_t(uint64_t(b) >> 32), s0, s1}, ik), quad);
          for (size_t k = 0; k < 4 && 4 * b + k < images.size(); ++k)
            images[4 * b + k] = double(quad[k]);
        }
      },
      threads);
  for (size_t n = 0; n < labels.size(); ++n) {
    auto w = weights::philox4x32_10({uint32_t(n), uint32_t(uint64_t(n) >> 32), s0, s1}, lk);
    labels[n] = std::min(int64_t(u53(w[0], w[1]) * double(classes)), classes - 1);
  }
}

} // namespace castor::data
