// Pillow's BILINEAR resize of an 8-bit image (libImaging/Resample.c), as a plan the host makes and
// any backend runs to the bit: a region of the source resized as an image of its own (antialiased
// triangle filter widened by the downscale factor, weights in fixed point with 22 fractional
// bits), one pass per axis with an 8-bit image in between, of which a window is kept and
// optionally mirrored. torchvision's RandomResizedCrop and Resize + CenterCrop on PIL images are
// such resizes (data/image_augment.h plans them).
#pragma once

#include <cstdint>
#include <vector>

namespace castor {

struct ImageResize {
  // The region of the source (inside it), resized to outWidth x outHeight.
  int left = 0, top = 0, width = 0, height = 0;
  int outWidth = 0, outHeight = 0;
  // The kept window of the resized image, written at (rowOffset, colOffset) of the output image
  // (the rest of it zeros: CenterCrop's padding); mirrored left-right when `flip`.
  int colBegin = 0, colEnd = 0, rowBegin = 0, rowEnd = 0;
  int rowOffset = 0, colOffset = 0;
  bool flip = false;
  bool empty = false; // nothing to resize: the output image is all zeros

  bool resizesColumns() const { return outWidth != width; }
  bool resizesRows() const { return outHeight != height; }
  // Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many
  // pixels as the width does (python-pillow/Pillow#9549); the 8-bit intermediate makes the order
  // visible.
  bool verticalFirst() const {
    return resizesColumns() && outHeight < height && height - outHeight > 2 * (width - outWidth);
  }
};

// Pillow's fixed point: 8 bits of result and 2 of headroom in an int32 accumulator.
constexpr int kPillowPrecisionBits = 32 - 8 - 2;

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for resampling `inSize` samples onto
// `outSize`, for the outputs [outBegin, outEnd) only. Output i - outBegin reads inputs first[i] ..
// first[i] + count[i] - 1 with weights[(i - outBegin) * stride ...]; each output is
// clamp((2^21 + sum input * weight) >> 22, 0, 255).
struct ResampleTaps {
  int stride = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};
ResampleTaps pillowBilinearTaps(int inSize, int outSize, int outBegin, int outEnd);

} // namespace castor
