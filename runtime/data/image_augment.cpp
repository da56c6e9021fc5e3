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

ImageResize planResizedCrop(int width, int height, const CropBox &box, int outWidth, int outHeight, bool flip) {
  ImageResize r;
  const int left = std::max(box.left, 0), top = std::max(box.top, 0);
  const int right = std::min(box.left + box.width, width), bottom = std::min(box.top + box.height, height);
  if (outWidth <= 0 || outHeight <= 0 || right <= left || bottom <= top) {
    r.empty = true;
    return r;
  }
  r.left = left;
  r.top = top;
  r.width = right - left;
  r.height = bottom - top;
  r.outWidth = r.colEnd = outWidth;
  r.outHeight = r.rowEnd = outHeight;
  r.flip = flip;
  return r;
}

ImageResize planResizeCenterCrop(int width, int height, int resize, int crop) {
  ImageResize r;
  if (crop <= 0 || width <= 0 || height <= 0 || resize <= 0) {
    r.empty = true;
    return r;
  }
  // torchvision's _compute_resized_output_size: int(resize * long / short) in double, as Python.
  const int w = width, h = height;
  const int resizedWidth = w <= h ? resize : int(double(resize) * w / h);
  const int resizedHeight = w <= h ? int(double(resize) * h / w) : resize;
  if (resizedWidth <= 0 || resizedHeight <= 0) { // Pillow refuses an empty size
    r.empty = true;
    return r;
  }
  const Span cols = centreSpan(resizedWidth, crop), rows = centreSpan(resizedHeight, crop);
  r.width = w;
  r.height = h;
  r.outWidth = resizedWidth;
  r.outHeight = resizedHeight;
  r.colBegin = cols.begin;
  r.colEnd = cols.end;
  r.rowBegin = rows.begin;
  r.rowEnd = rows.end;
  r.rowOffset = rows.offset;
  r.colOffset = cols.offset;
  return r;
}

void runResize(const Image &src, const ImageResize &r, int outWidth, int outHeight, uint8_t *out) {
  const size_t outRowBytes = size_t(outWidth) * size_t(src.channels);
  if (r.empty || r.rowOffset > 0 || r.colOffset > 0 || r.rowEnd - r.rowBegin < outHeight ||
      r.colEnd - r.colBegin < outWidth)
    std::memset(out, 0, outRowBytes * size_t(outHeight));
  if (r.empty)
    return;
  detail::ResampleRequest request;
  request.left = r.left;
  request.top = r.top;
  request.width = r.width;
  request.height = r.height;
  request.outWidth = r.outWidth;
  request.outHeight = r.outHeight;
  request.colBegin = r.colBegin;
  request.colEnd = r.colEnd;
  request.rowBegin = r.rowBegin;
  request.rowEnd = r.rowEnd;
  request.flip = r.flip;
  request.outRowBytes = outRowBytes;
  detail::pillowResample(src, request, out + size_t(r.rowOffset) * outRowBytes + size_t(r.colOffset) * size_t(src.channels));
}

void resizedCrop(const Image &src, const CropBox &box, int outWidth, int outHeight, bool flip, uint8_t *out) {
  if (outWidth <= 0 || outHeight <= 0)
    return;
  runResize(src, planResizedCrop(src.width, src.height, box, outWidth, outHeight, flip), outWidth, outHeight, out);
}

void resizeCenterCrop(const Image &src, int resize, int crop, uint8_t *out) {
  if (crop <= 0)
    return;
  runResize(src, planResizeCenterCrop(src.width, src.height, resize, crop), crop, crop, out);
}

} // namespace castor::data
