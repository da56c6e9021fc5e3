// Resize's coordinate arithmetic along one axis (see ResizeCoordinates.h).
#include "ResizeCoordinates.h"

#include <algorithm>
#include <cmath>

namespace castor::onnx_import {

std::optional<double> sourceCoordinate(const std::string &mode, const ResizeAxis &axis, int64_t o) {
  const double x = double(o), s = axis.scale;
  if (mode == "half_pixel")
    return (x + 0.5) / s - 0.5;
  if (mode == "half_pixel_symmetric") {
    // The output's centre on the input's: differs from half_pixel when out != in * scale.
    const double adjustment = double(axis.out) / (s * double(axis.in));
    return double(axis.in) / 2 * (1 - adjustment) + (x + 0.5) / s - 0.5;
  }
  if (mode == "pytorch_half_pixel")
    return axis.out > 1 ? (x + 0.5) / s - 0.5 : 0.0;
  if (mode == "asymmetric")
    return x / s;
  if (mode == "align_corners")
    // Over the integer output length, as onnxruntime and PyTorch's align_corners=True compute it
    // (ONNX's reference takes in * scale, which differs for a fractional scale).
    return axis.out == 1 ? 0.0 : x * double(axis.in - 1) / double(axis.out - 1);
  return std::nullopt;
}

std::optional<int64_t> nearestIndex(const std::string &rounding, double x, int64_t in) {
  const double lo = std::floor(x);
  double i;
  if (rounding == "floor")
    i = lo;
  else if (rounding == "ceil")
    i = std::ceil(x);
  else if (rounding == "round_prefer_floor")
    i = x == lo + 0.5 ? lo : std::round(x);
  else if (rounding == "round_prefer_ceil")
    i = x == lo + 0.5 ? std::ceil(x) : std::round(x);
  else
    return std::nullopt;
  return std::clamp<int64_t>(int64_t(i), 0, in - 1);
}

std::optional<std::vector<double>> linearInterpolationMatrix(const std::string &mode, const ResizeAxis &axis) {
  std::vector<double> m(size_t(axis.in * axis.out), 0.0);
  auto at = [&](int64_t i, int64_t o) -> double & {
    return m[size_t(std::clamp<int64_t>(i, 0, axis.in - 1) * axis.out + o)];
  };
  for (int64_t o = 0; o < axis.out; ++o) {
    auto x = sourceCoordinate(mode, axis, o);
    if (!x)
      return std::nullopt;
    const double lo = std::floor(*x), r = *x - lo;
    at(int64_t(lo), o) += 1 - r;
    if (r != 0)
      at(int64_t(lo) + 1, o) += r;
  }
  return m;
}

} // namespace castor::onnx_import
