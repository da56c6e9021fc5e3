#include "data/pillow_color.h"

namespace castor::data::detail {

void rgbToGray(const uint8_t *rgb, size_t count, uint8_t *gray) {
  for (size_t i = 0; i < count; ++i)
    gray[i] = pillowLuma(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
}

void grayToRgb(const uint8_t *gray, size_t count, uint8_t *rgb) {
  for (size_t i = 0; i < count; ++i)
    rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = gray[i];
}

} // namespace castor::data::detail
