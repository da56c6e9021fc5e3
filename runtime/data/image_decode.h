// Decoding of the JPEG and PNG files of an image-folder dataset into 8-bit pixels that equal what
// torchvision's loader gets from Pillow (Image.open(f).convert("RGB") or .convert("L")), so that a
// model sees the same input bytes whichever pipeline fed it.
//
// JPEG through TurboJPEG (libjpeg-turbo, the library Pillow links too; default ISLOW DCT and fancy
// upsampling, as Pillow decodes), PNG through libpng. Each thread keeps its own TurboJPEG handle,
// since callers decode on a pool of threads.
#pragma once

#include "castor/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace castor::data {

// Row-major HWC, 8 bits a channel.
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Decodes a JPEG or PNG (told apart by the file signature) into `channels` (1: grayscale, 3: RGB)
// channels, as Pillow's convert("L") / convert("RGB") of the opened file would:
//   - gray sources replicate into RGB; RGB becomes gray by Pillow's L = (19595 R + 38470 G +
//     7471 B + 0x8000) >> 16 (its fixed-point form of R 299/1000 + G 587/1000 + B 114/1000);
//   - palette, alpha and 16-bit PNGs become 8-bit RGB: alpha dropped, 16-bit samples keep their
//     high byte; a 16-bit grayscale PNG clamps to 255 instead, as Pillow's I;16 -> RGB does;
//   - CMYK/YCCK JPEGs are taken as Adobe-inverted CMYK and converted by Pillow's naive formula.
// `what` names the file in error messages. Corrupt, truncated and unknown data give an error,
// never a crash; libjpeg's warnings about slightly damaged data (extraneous bytes, a corrupt
// segment that it recovers from) are not errors, except a premature end of the file, which
// Pillow refuses too ("image file is truncated").
Expected<Image> decodeImage(const uint8_t *data, size_t size, int channels, const std::string &what);

// The same, but a JPEG may be decoded at a reduced DCT scale (TurboJPEG's factors num/denom <= 1):
// the smallest at which the image is still at least minWidth x minHeight, for speed when the
// caller downscales anyway. The scale used goes to *scaleNum / *scaleDenom (1/1 for PNG, always
// decoded at full size), so that a caller can map crop boxes; either pointer may be null.
Expected<Image> decodeImageScaled(const uint8_t *data, size_t size, int channels, int minWidth, int minHeight,
                                  const std::string &what, int *scaleNum, int *scaleDenom);

// Width and height from the header alone (for crop parameters before decoding).
Expected<std::pair<int, int>> imageSize(const uint8_t *data, size_t size, const std::string &what);

// Whether the data is a JPEG a device decoder takes as Pillow reads it: YCbCr and
// grayscale, not CMYK/YCCK (Pillow's own conversion, decoded on the host).
bool isYccOrGrayJpeg(const uint8_t *data, size_t size);
// Whether a JPEG's frame is baseline (SOF0): its markers up to the first scan, no decoding.
bool isBaselineJpeg(const uint8_t *data, size_t size);

} // namespace castor::data
