// Pillow's colour conversions of 8-bit pixels, shared by the JPEG and PNG decoders
// (image_jpeg.cpp, image_png.cpp), so that each converts as Pillow's convert("L") / convert("RGB").
#pragma once

#include <cstddef>
#include <cstdint>

namespace castor::data::detail {

// Pillow's rgb2l: L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16, its fixed-point form of
// R 299/1000 + G 587/1000 + B 114/1000 (ITU-R 601-2 luma).
inline uint8_t pillowLuma(uint8_t r, uint8_t g, uint8_t b) {
  return uint8_t((uint32_t(r) * 19595 + uint32_t(g) * 38470 + uint32_t(b) * 7471 + 0x8000) >> 16);
}

// `count` RGB pixels to gray; `gray` may alias `rgb` (it is written behind the read position).
void rgbToGray(const uint8_t *rgb, size_t count, uint8_t *gray);
// `count` gray pixels replicated into RGB.
void grayToRgb(const uint8_t *gray, size_t count, uint8_t *rgb);

} // namespace castor::data::detail
