// Internal to image_decode.cpp: the JPEG (image_jpeg.cpp) and PNG (image_png.cpp) decoders and
// the Pillow colour conversions they share.
#pragma once

#include "data/image_decode.h"

namespace castor::data::detail {

// Pillow refuses images of more than twice Image.MAX_IMAGE_PIXELS (its DecompressionBombError);
// the same bound keeps a corrupt header from making us allocate gigabytes.
constexpr int64_t kMaxImagePixels = 2 * 89478485LL;

// Pillow's rgb2l: L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16, its fixed-point form of
// R 299/1000 + G 587/1000 + B 114/1000 (ITU-R 601-2 luma).
inline uint8_t pillowLuma(uint8_t r, uint8_t g, uint8_t b) {
  return uint8_t((uint32_t(r) * 19595 + uint32_t(g) * 38470 + uint32_t(b) * 7471 + 0x8000) >> 16);
}

// `count` RGB pixels to gray; `gray` may alias `rgb` (it is written behind the read position).
void rgbToGray(const uint8_t *rgb, size_t count, uint8_t *gray);
// `count` gray pixels replicated into RGB.
void grayToRgb(const uint8_t *gray, size_t count, uint8_t *rgb);

// `scaleNum`/`scaleDenom`: the DCT scale, <= 1 (1/1 decodes at full size).
Expected<Image> decodeJpeg(const uint8_t *data, size_t size, int channels, int minWidth, int minHeight,
                           const std::string &what, int *scaleNum, int *scaleDenom);
Expected<std::pair<int, int>> jpegSize(const uint8_t *data, size_t size, const std::string &what);
// TurboJPEG's colourspace of the header (TJCS_*), -1 when it does not read.
int jpegColorspace(const uint8_t *data, size_t size);

Expected<Image> decodePng(const uint8_t *data, size_t size, int channels, const std::string &what);
Expected<std::pair<int, int>> pngSize(const uint8_t *data, size_t size, const std::string &what);

} // namespace castor::data::detail
