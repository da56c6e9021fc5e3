// ONNX Resize with scales or sizes known at import (see ComposedConverters.h): nearest mode by
// integer factors as repeated elements, linear mode as products with constant interpolation
// matrices.
#include "ComposedConverters.h"
#include "Composition.h"
#include "ResizeCoordinates.h"

#include <cmath>
#include <numeric>

using namespace mlir;

namespace castor::onnx_import {
namespace {

// Interpolation matrices above this many elements are refused (4M: 16 MiB in f32).
constexpr int64_t kMaxInterpolationElements = int64_t(1) << 22;
// Output axes above this are refused (no tensor of Castor's has one; it bounds the checks' loops).
constexpr int64_t kMaxAxisSize = int64_t(1) << 31;

// What a Resize node asks for: the axes its scales or sizes name and, per axis of x, the output
// size and the scale its coordinate transformation reads.
struct ResizeRequest {
  std::vector<int64_t> named;
  std::vector<ResizeAxis> axes;
  bool fromScales = false;
  std::vector<double> givenScales; // per named axis, when fromScales
};

// The axes of opset 18's `axes` attribute, or all of them, in [0, rank).
FailureOr<std::vector<int64_t>> namedAxes(NodeImporter &n, int64_t rank) {
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  std::iota(axes.begin(), axes.end(), 0);
  if (!n.hasAttr("axes"))
    return axes;
  auto given = n.attrInts("axes", {});
  if (failed(given))
    return failure();
  for (int64_t &a : *given) {
    if (a < -rank || a >= rank)
      return n.fail("axis " + std::to_string(a) + " is out of range for an input of rank " + std::to_string(rank));
    a = a < 0 ? a + rank : a;
  }
  return *given;
}

// Output sizes from the scales (floor(in * scale), as ONNX defines them) or from the sizes (with
// scale out / in), with keep_aspect_ratio_policy stretch.
FailureOr<ResizeRequest> readRequest(NodeImporter &n, RankedTensorType type, const std::string &policy) {
  ResizeRequest r;
  auto named = namedAxes(n, type.getRank());
  if (failed(named))
    return failure();
  r.named = *named;
  for (int64_t d = 0; d < type.getRank(); ++d)
    r.axes.push_back({type.getDimSize(d), type.getDimSize(d), 1.0});
  for (int64_t d : r.named)
    if (type.getDimSize(d) < 1)
      return n.fail("axis " + std::to_string(d) + " of the input has no static positive size");
  if (n.hasInput(2)) {
    auto given = n.constDoubles(2);
    if (failed(given))
      return failure();
    r.givenScales = *given;
  }
  r.fromScales = !r.givenScales.empty();
  if (r.fromScales) {
    if (n.hasInput(3))
      return n.fail("both scales and sizes are given");
    if (r.givenScales.size() != r.named.size())
      return n.fail("it has " + std::to_string(r.givenScales.size()) + " scales for " + std::to_string(r.named.size()) +
                    " axes");
    for (size_t i = 0; i < r.named.size(); ++i) {
      ResizeAxis &a = r.axes[size_t(r.named[i])];
      a.scale = r.givenScales[i];
      if (!(a.scale > 0) || double(a.in) * a.scale > double(kMaxAxisSize))
        return n.fail("scale " + std::to_string(a.scale) + " on axis " + std::to_string(r.named[i]) +
                      " is not supported (positive, finite)");
      a.out = int64_t(std::floor(double(a.in) * a.scale));
    }
    return r;
  }
  if (!n.hasInput(3))
    return n.fail("neither scales nor sizes are given");
  if (policy != "stretch")
    return n.fail("keep_aspect_ratio_policy '" + policy + "' is not supported (stretch only)");
  auto sizes = n.constInts(3);
  if (failed(sizes))
    return failure();
  if (sizes->size() != r.named.size())
    return n.fail("it has " + std::to_string(sizes->size()) + " sizes for " + std::to_string(r.named.size()) + " axes");
  for (size_t i = 0; i < r.named.size(); ++i) {
    ResizeAxis &a = r.axes[size_t(r.named[i])];
    a.out = (*sizes)[i];
    if (a.out < 0 || a.out > kMaxAxisSize)
      return n.fail("size " + std::to_string(a.out) + " on axis " + std::to_string(r.named[i]) + " is not supported");
    a.scale = double(a.out) / double(a.in);
  }
  return r;
}

// Nearest mode: each element repeated `factor` times along each axis, where the factors are
// integers and the coordinate transformation and rounding read input o / factor for output o
// (checked on the actual sizes); else refused.
LogicalResult resizeNearest(NodeImporter &n, Value x, const ResizeRequest &r, const std::string &transform,
                            const std::string &rounding) {
  RankedTensorType type = typeOf(x);
  std::vector<int64_t> factors(r.axes.size(), 1);
  for (size_t i = 0; i < r.named.size(); ++i) {
    const int64_t d = r.named[i];
    const ResizeAxis &a = r.axes[size_t(d)];
    if (r.fromScales) {
      const double s = r.givenScales[i];
      if (s < 1 || s != std::floor(s))
        return n.fail("scale " + std::to_string(s) + " on axis " + std::to_string(d) +
                      " is not supported (integer upsampling factors only)");
    } else if (a.out < a.in || a.out % a.in != 0) {
      return n.fail("size " + std::to_string(a.out) + " on axis " + std::to_string(d) + " is not a multiple of " +
                    std::to_string(a.in) + " (integer upsampling factors only)");
    }
    factors[size_t(d)] = a.out / a.in;
  }
  for (int64_t d = 0; d < type.getRank(); ++d) {
    const int64_t f = factors[size_t(d)];
    const ResizeAxis axis{type.getDimSize(d), type.getDimSize(d) * f, double(f)};
    for (int64_t o = 0; f != 1 && o < axis.out; ++o) {
      auto x = sourceCoordinate(transform, axis, o);
      auto source = x ? nearestIndex(rounding, *x, axis.in) : std::nullopt;
      if (!source)
        return n.fail("coordinate_transformation_mode '" + transform + "' with nearest_mode '" + rounding +
                      "' is not supported");
      if (*source != o / f)
        return n.fail("coordinate_transformation_mode '" + transform + "' with nearest_mode '" + rounding +
                      "' does not repeat each element " + std::to_string(f) + " times along axis " +
                      std::to_string(d) + " (output " + std::to_string(o) + " reads input " + std::to_string(*source) +
                      "); only such resizing is supported");
    }
  }
  auto y = repeatAxes(n, x, factors, /*repeatOuter=*/false);
  return failed(y) ? failure() : n.setOutput(0, *y);
}

// x interpolated along axis d by the [in, out] matrix w: the axis moved last, a product with w
// (matmul against a rank-2 operand: a linear layer), moved back.
FailureOr<Value> interpolateAxis(NodeImporter &n, Value x, int64_t d, const std::vector<double> &w, int64_t out) {
  RankedTensorType type = typeOf(x);
  const int64_t last = type.getRank() - 1, in = type.getDimSize(d);
  SmallVector<int64_t> swap(size_t(type.getRank()));
  std::iota(swap.begin(), swap.end(), 0);
  std::swap(swap[size_t(d)], swap[size_t(last)]);
  auto moved = transposeBy(n, x, swap);
  auto matrix = n.constantOf(RankedTensorType::get({in, out}, type.getElementType()), w);
  if (failed(moved) || failed(matrix))
    return failure();
  auto product = resultOf(n.create<MatmulOp>({*moved, *matrix}));
  return failed(product) ? product : transposeBy(n, *product, swap);
}

// Linear mode: one interpolation per resized axis. The last axis needs no transposes; when it
// shrinks it goes first, so that the others' transposes move the smaller tensor.
LogicalResult resizeLinear(NodeImporter &n, Value x, const ResizeRequest &r, const std::string &transform,
                           int64_t antialias) {
  const int64_t rank = int64_t(r.axes.size());
  std::vector<int64_t> order;
  for (int64_t d = 0; d < rank; ++d) {
    const ResizeAxis &a = r.axes[size_t(d)];
    if (a.out < 1)
      return n.fail("output size " + std::to_string(a.out) + " on axis " + std::to_string(d) + " is not supported");
    if (a.out == a.in && a.scale == 1.0)
      continue; // every mode reads input o for output o
    if (antialias != 0 && a.scale < 1)
      return n.fail("antialias with downsampling (scale " + std::to_string(a.scale) + " on axis " + std::to_string(d) +
                    ") is not supported");
    if (a.out > kMaxInterpolationElements / a.in)
      return n.fail("resizing axis " + std::to_string(d) + " from " + std::to_string(a.in) + " to " +
                    std::to_string(a.out) + " is not supported (its interpolation matrix would exceed " +
                    std::to_string(kMaxInterpolationElements) + " elements)");
    order.push_back(d);
  }
  if (order.size() > 1 && order.back() == rank - 1 && r.axes.back().out < r.axes.back().in)
    std::rotate(order.begin(), order.end() - 1, order.end());
  Value y = x;
  for (int64_t d : order) {
    const ResizeAxis &a = r.axes[size_t(d)];
    auto w = linearInterpolationMatrix(transform, a);
    if (!w)
      return n.fail("coordinate_transformation_mode '" + transform + "' is not supported in mode 'linear'");
    auto next = interpolateAxis(n, y, d, *w, a.out);
    if (failed(next))
      return failure();
    y = *next;
  }
  return n.setOutput(0, y);
}

} // namespace

// Resize (timm's HRNet upsamples by nearest; segmentation and FPN heads bilinearly): the scales or
// sizes must be known at import; mode nearest by integer factors, or linear.
LogicalResult convertResize(NodeImporter &n) {
  if (failed(n.checkArity(1, 4)) ||
      failed(n.checkAttrs({"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                           "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"})))
    return failure();
  auto x = n.input(0);
  auto mode = n.attrString("mode", "nearest");
  auto transform = n.attrString("coordinate_transformation_mode", "half_pixel");
  auto rounding = n.attrString("nearest_mode", "round_prefer_floor");
  auto policy = n.attrString("keep_aspect_ratio_policy", "stretch");
  auto antialias = n.attrInt("antialias", 0);
  if (failed(x) || failed(mode) || failed(transform) || failed(rounding) || failed(policy) || failed(antialias))
    return failure();
  if (*mode != "nearest" && *mode != "linear")
    return n.fail("mode '" + *mode + "' is not supported (nearest and linear only)");
  auto request = readRequest(n, typeOf(*x), *policy);
  if (failed(request))
    return failure();
  // exclude_outside changes nothing in these modes: ONNX pads the edges with their own values.
  return *mode == "nearest" ? resizeNearest(n, *x, *request, *transform, *rounding)
                            : resizeLinear(n, *x, *request, *transform, *antialias);
}

} // namespace castor::onnx_import
