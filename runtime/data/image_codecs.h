// Internal to image_decode.cpp: the JPEG (image_jpeg.cpp) and PNG (image_png.cpp) decoders it
// hands each file to. The Pillow colour conversions both use are in pillow_color.h.
#pragma once

#include "data/image_decode.h"

namespace castor::data::detail {

// Pillow refuses images of more than twice Image.MAX_IMAGE_PIXELS (its DecompressionBombError);
// the same bound keeps a corrupt header from making us allocate gigabytes.
constexpr int64_t kMaxImagePixels = 2 * 89478485LL;

// `scaleNum`/`scaleDenom`: the DCT scale, <= 1 (1/1 decodes at full size).
Expected<Image> decodeJpeg(const uint8_t *data, size_t size, int channels, int minWidth, int minHeight,
                           const std::string &what, int *scaleNum, int *scaleDenom);
Expected<std::pair<int, int>> jpegSize(const uint8_t *data, size_t size, const std::string &what);
// TurboJPEG's colourspace of the header (TJCS_*), -1 when it does not read.
int jpegColorspace(const uint8_t *data, size_t size);

Expected<Image> decodePng(const uint8_t *data, size_t size, int channels, const std::string &what);
Expected<std::pair<int, int>> pngSize(const uint8_t *data, size_t size, const std::string &what);

} // namespace castor::data::detail
