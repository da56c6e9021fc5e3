#include "data/image_augment.h"

#include "data/pillow_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace castor::data {
namespace {

// Python's round() of a float: to nearest, ties to even (the default floating-point rounding).
int pythonRound(double x) { return int(std::nearbyint(x)); }

// torch.randint(lo, hi) (hi excluded) from one uniform draw.
int randint(int lo, int hi, double u) { return lo + int(std::floor(u * double(hi - lo))); }

// Which part of a resized dimension of `size` CenterCrop(crop) keeps, and where it lands in the
// output: a centred window when crop <= size, else all of it, padded with zeros on both sides as
// torchvision pads ((crop - size) / 2 before).
struct Span {
  int begin, end, offset;
};
Span centreSpan(int size, int crop) {
  if (crop > size)
    return {0, size, (crop - size) / 2};
  const int begin = pythonRound((size - crop) / 2.0);
  return {begin, begin + crop, 0};
}

} // namespace

CropBox randomResizedCropBox(int width, int height, const std::function<double()> &uniform, double scaleMin,
                             double scaleMax, double ratioMin, double ratioMax) {
  const double area = double(height) * double(width);
  const double logRatioMin = std::log(ratioMin), logRatioMax = std::log(ratioMax);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double targetArea = area * (scaleMin + (scaleMax - scaleMin) * uniform());
    const double aspect = std::exp(logRatioMin + (logRatioMax - logRatioMin) * uniform());
    const int w = pythonRound(std::sqrt(targetArea * aspect));
    const int h = pythonRound(std::sqrt(targetArea / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      CropBox box;
      box.width = w;
      box.height = h;
      box.top = randint(0, height - h + 1, uniform()); // torchvision draws the row first
      box.left = randint(0, width - w + 1, uniform());
      return box;
    }
  }
  // Fallback: the whole image, cut to the nearest allowed aspect ratio, centred.
  const double inRatio = double(width) / double(height);
  const double lowest = std::min(ratioMin, ratioMax), highest = std::max(ratioMin, ratioMax);
  CropBox box;
  box.width = width;
  box.height = height;
  if (inRatio < lowest)
    box.height = pythonRound(box.width / lowest);
  else if (inRatio > highest)
    box.width = pythonRound(box.height * highest);
  box.top = (height - box.height) / 2;
  box.left = (width - box.width) / 2;
  return box;
}

void resizedCrop(const Image &src, const CropBox &box, int outWidth, int outHeight, bool flip, uint8_t *out) {
  if (outWidth <= 0 || outHeight <= 0)
    return;
  const int left = std::max(box.left, 0), top = std::max(box.top, 0);
  const int right = std::min(box.left + box.width, src.width), bottom = std::min(box.top + box.height, src.height);
  if (right <= left || bottom <= top) {
    std::memset(out, 0, size_t(outWidth) * size_t(outHeight) * size_t(src.channels));
    return;
  }
  detail::ResampleRequest request;
  request.left = left;
  request.top = top;
  request.width = right - left;
  request.height = bottom - top;
  request.outWidth = request.colEnd = outWidth;
  request.outHeight = request.rowEnd = outHeight;
  request.flip = flip;
  detail::pillowResample(src, request, out);
}

void resizeCenterCrop(const Image &src, int resize, int crop, uint8_t *out) {
  if (crop <= 0)
    return;
  const size_t outRowBytes = size_t(crop) * size_t(src.channels);
  if (src.width <= 0 || src.height <= 0 || resize <= 0) {
    std::memset(out, 0, outRowBytes * size_t(crop));
    return;
  }
  // torchvision's _compute_resized_output_size: int(resize * long / short) in double, as Python.
  const int w = src.width, h = src.height;
  const int resizedWidth = w <= h ? resize : int(double(resize) * w / h);
  const int resizedHeight = w <= h ? int(double(resize) * h / w) : resize;
  if (resizedWidth <= 0 || resizedHeight <= 0) { // Pillow refuses an empty size
    std::memset(out, 0, outRowBytes * size_t(crop));
    return;
  }
  const Span cols = centreSpan(resizedWidth, crop), rows = centreSpan(resizedHeight, crop);
  if (cols.offset > 0 || rows.offset > 0)
    std::memset(out, 0, outRowBytes * size_t(crop));
  detail::ResampleRequest request;
  request.width = w;
  request.height = h;
  request.outWidth = resizedWidth;
  request.outHeight = resizedHeight;
  request.colBegin = cols.begin;
  request.colEnd = cols.end;
  request.rowBegin = rows.begin;
  request.rowEnd = rows.end;
  request.outRowBytes = outRowBytes;
  detail::pillowResample(src, request,
                         out + size_t(rows.offset) * outRowBytes + size_t(cols.offset) * size_t(src.channels));
}

} // namespace castor::data
