// Where ONNX Resize reads its input along one axis: the coordinate transformations, nearest
// rounding and linear interpolation weights, as ONNX defines them (and onnxruntime and PyTorch
// compute them). Plain arithmetic, shared by Resize's nearest and linear forms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castor::onnx_import {

// One resized axis: `in` input elements to `out` output elements, at `scale`, the factor the
// coordinate transformation divides by (the given scale, or out / in when sizes are given).
struct ResizeAxis {
  int64_t in = 1, out = 1;
  double scale = 1.0;
};

// The input coordinate that output index o reads under coordinate_transformation_mode `mode`
// (half_pixel, half_pixel_symmetric, pytorch_half_pixel, asymmetric, align_corners), or nullopt
// for another mode (tf_crop_and_resize).
std::optional<double> sourceCoordinate(const std::string &mode, const ResizeAxis &axis, int64_t o);

// The input index that nearest_mode `rounding` picks at coordinate x, clamped to [0, in), or
// nullopt for an unknown rounding.
std::optional<int64_t> nearestIndex(const std::string &rounding, double x, int64_t in);

// Linear interpolation along the axis as an [in, out] matrix, row-major: column o holds output o's
// weights, 1 - r and r on the inputs floor(x) and floor(x) + 1 around its source coordinate x
// (r = x - floor(x)), each index clamped to [0, in) as ONNX pads the edges. nullopt for a mode that
// sourceCoordinate does not handle.
std::optional<std::vector<double>> linearInterpolationMatrix(const std::string &mode, const ResizeAxis &axis);

} // namespace castor::onnx_import
