// The public entry points: tell JPEG from PNG by the file signature (not the file name, which
// image folders do not always get right) and hand over to the codec.
#include "data/image_decode.h"

#include "data/image_codecs.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstring>

namespace castor::data {
namespace {

enum class Format { Jpeg, Png, Unknown };

Format sniff(const uint8_t *data, size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
    return Format::Jpeg;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0)
    return Format::Png;
  return Format::Unknown;
}

Status notAnImage(const std::string &what) { return Status::error(what + ": not a JPEG or PNG file"); }

Status badChannels(const std::string &what, int channels) {
  return Status::error(what + ": cannot decode into " + std::to_string(channels) +
                       " channels (1, grayscale, or 3, RGB)");
}

} // namespace

Expected<Image> decodeImage(const uint8_t *data, size_t size, int channels, const std::string &what) {
  if (channels != 1 && channels != 3)
    return badChannels(what, channels);
  switch (sniff(data, size)) {
  case Format::Jpeg:
    return detail::decodeJpeg(data, size, channels, 0, 0, what, nullptr, nullptr);
  case Format::Png:
    return detail::decodePng(data, size, channels, what);
  case Format::Unknown:
    break;
  }
  return notAnImage(what);
}

Expected<Image> decodeImageScaled(const uint8_t *data, size_t size, int channels, int minWidth, int minHeight,
                                  const std::string &what, int *scaleNum, int *scaleDenom) {
  if (channels != 1 && channels != 3)
    return badChannels(what, channels);
  switch (sniff(data, size)) {
  case Format::Jpeg:
    // At least 1 x 1, so that a request of 0 still asks for the smallest scale, not full size.
    return detail::decodeJpeg(data, size, channels, std::max(minWidth, 1), std::max(minHeight, 1), what, scaleNum,
                              scaleDenom);
  case Format::Png:
    if (scaleNum)
      *scaleNum = 1;
    if (scaleDenom)
      *scaleDenom = 1;
    return detail::decodePng(data, size, channels, what);
  case Format::Unknown:
    break;
  }
  return notAnImage(what);
}

Expected<std::pair<int, int>> imageSize(const uint8_t *data, size_t size, const std::string &what) {
  switch (sniff(data, size)) {
  case Format::Jpeg:
    return detail::jpegSize(data, size, what);
  case Format::Png:
    return detail::pngSize(data, size, what);
  case Format::Unknown:
    break;
  }
  return notAnImage(what);
}

bool isBaselineJpeg(const uint8_t *data, size_t size) {
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8)
    return false;
  size_t i = 2;
  while (i + 4 <= size) {
    if (data[i] != 0xFF)
      return false;
    while (i + 1 < size && data[i + 1] == 0xFF) // fill bytes
      ++i;
    if (i + 4 > size)
      return false;
    const uint8_t m = data[i + 1];
    if (m == 0xC0)
      return true;
    if ((m >= 0xC1 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) || m == 0xDA || m == 0xD9)
      return false; // another frame type, or a scan or the end before any frame
    if ((m >= 0xD0 && m <= 0xD7) || m == 0x01) { // no length
      i += 2;
      continue;
    }
    i += 2 + ((size_t(data[i + 2]) << 8) | data[i + 3]);
  }
  return false;
}

bool isYccOrGrayJpeg(const uint8_t *data, size_t size) {
  if (sniff(data, size) != Format::Jpeg)
    return false;
  const int cs = detail::jpegColorspace(data, size);
  return cs == TJCS_YCbCr || cs == TJCS_GRAY;
}

} // namespace castor::data
