// The one normalisation of 8-bit pixels that training and evaluation share: scaled to [0, 1],
// then (x - mean) / std. Both must compute it identically, or a model is evaluated on inputs
// that differ from those it was trained on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace castor::data {

struct PixelNormalization {
  double mean = 0.2860, std = 0.3530; // Fashion-MNIST's training set

  double operator()(uint8_t pixel) const { return (double(pixel) / 255.0 - mean) / std; }
  // out[i] = (*this)(pixels[i]) for i < count.
  void apply(const uint8_t *pixels, size_t count, double *out) const {
    for (size_t i = 0; i < count; ++i)
      out[i] = (*this)(pixels[i]);
  }
};

} // namespace castor::data
