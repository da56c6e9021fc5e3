// Pillow's BILINEAR resize (libImaging/Resample.c) re-implemented to the bit: an antialiased
// separable filter (the triangle filter widened by the downscale factor), its weights rounded to
// fixed point with 22 fractional bits, one pass per axis with an 8-bit image in between:
// horizontal first, except where Pillow 13 runs the vertical pass first (see pillowResample).
// Internal to image_augment.cpp.
#pragma once

#include "castor/image_resize.h"
#include "data/image_decode.h"

#include <cstdint>
#include <vector>

namespace castor::data::detail {

// The taps: castor/image_resize.h (shared with the backends that resize where the step runs).
using castor::pillowBilinearTaps;
using castor::ResampleTaps;

// Where a resize reads and what it keeps: the region (left, top, width x height) of the source is
// resized as an image of its own (Pillow's img.crop(region).resize((outWidth, outHeight))); of
// the result, columns [colBegin, colEnd) and rows [rowBegin, rowEnd) are written, mirrored
// left-right when `flip`. The region must lie inside the source, the kept columns and rows
// inside the result.
struct ResampleRequest {
  int left = 0, top = 0, width = 0, height = 0;
  int outWidth = 0, outHeight = 0;
  int colBegin = 0, colEnd = 0, rowBegin = 0, rowEnd = 0;
  bool flip = false;
  size_t outRowBytes = 0; // from one output row to the next; 0: packed
};

// Writes (rowEnd - rowBegin) x (colEnd - colBegin) x src.channels bytes, HWC, to `out`.
void pillowResample(const Image &src, const ResampleRequest &request, uint8_t *out);

} // namespace castor::data::detail
