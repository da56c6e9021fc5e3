// PNG through libpng, converted as Pillow converts what its own PNG reader gives (Pillow does not
// use libpng): see _MODES in PngImagePlugin.py and Convert.c.
//
// libpng reports errors by longjmp. The function that calls setjmp (readRaw) therefore owns no
// C++ object with a destructor: everything it fills lives in the caller's RawPng, and a longjmp
// only unwinds libpng's C frames.
#include "data/image_codecs.h"
#include "data/pillow_color.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace castor::data::detail {
namespace {

struct Source {
  const uint8_t *data;
  size_t size, offset;
};

// The rows as libpng gives them after readRaw's transformations: 8 bits a sample except 16-bit
// grayscale (big-endian), palette indices one a byte.
struct RawPng {
  int width = 0, height = 0, colorType = 0, bitDepth = 0, samples = 0;
  std::vector<uint8_t> bytes;
  std::vector<png_bytep> rows;
  std::vector<uint8_t> palette; // RGB triplets of a palette image
  char message[200] = "";
};

void readFromMemory(png_structp png, png_bytep out, png_size_t count) {
  auto *source = static_cast<Source *>(png_get_io_ptr(png));
  if (count > source->size - source->offset)
    png_error(png, "unexpected end of data (the file is truncated)");
  std::memcpy(out, source->data + source->offset, count);
  source->offset += count;
}

void onError(png_structp png, png_const_charp message) {
  auto *raw = static_cast<RawPng *>(png_get_error_ptr(png));
  std::snprintf(raw->message, sizeof raw->message, "%s", message);
  png_longjmp(png, 1);
}

// Warnings are about ancillary chunks, which Pillow's conversion ignores as well.
void onWarning(png_structp, png_const_charp) {}

// Fills `raw`; false with raw.message on an error. No C++ object with a destructor lives in this
// frame (see the top of the file).
bool readRaw(Source &source, RawPng &raw) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &raw, onError, onWarning);
  if (!png) {
    std::snprintf(raw.message, sizeof raw.message, "cannot create a libpng reader");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(raw.message, sizeof raw.message, "cannot create a libpng reader");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &source, readFromMemory);
  png_read_info(png, info);
  png_uint_32 width = 0, height = 0;
  int bitDepth = 0, colorType = 0, interlace = 0;
  png_get_IHDR(png, info, &width, &height, &bitDepth, &colorType, &interlace, nullptr, nullptr);
  if (int64_t(width) * int64_t(height) > kMaxImagePixels)
    png_error(png, "more pixels than the 178956970 accepted");

  // Pillow: 1/2/4-bit gray scales to 0..255 (its "1", "L;2", "L;4"), 16-bit samples other than
  // plain gray keep their high byte ("RGB;16B" and the like), palette indices are looked up.
  if (colorType == PNG_COLOR_TYPE_PALETTE)
    png_set_packing(png);
  if (colorType == PNG_COLOR_TYPE_GRAY && bitDepth < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (bitDepth == 16 && colorType != PNG_COLOR_TYPE_GRAY)
    png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);

  raw.width = int(width);
  raw.height = int(height);
  raw.colorType = colorType;
  raw.bitDepth = png_get_bit_depth(png, info);
  raw.samples = png_get_channels(png, info);
  if (colorType == PNG_COLOR_TYPE_PALETTE) {
    png_colorp entries = nullptr;
    int count = 0;
    if (png_get_PLTE(png, info, &entries, &count) == 0)
      png_error(png, "palette image without a PLTE chunk");
    // Pillow's palette has 256 entries; those the file leaves out are black here.
    raw.palette.assign(256 * 3, 0);
    for (int i = 0; i < count && i < 256; ++i) {
      raw.palette[3 * i] = entries[i].red;
      raw.palette[3 * i + 1] = entries[i].green;
      raw.palette[3 * i + 2] = entries[i].blue;
    }
  }
  const size_t rowBytes = png_get_rowbytes(png, info);
  raw.bytes.resize(rowBytes * height);
  raw.rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y)
    raw.rows[y] = raw.bytes.data() + y * rowBytes;
  png_read_image(png, raw.rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// One row of `raw` into 8-bit RGB.
void rowToRgb(const RawPng &raw, const uint8_t *in, uint8_t *out) {
  const int n = raw.width;
  switch (raw.colorType) {
  case PNG_COLOR_TYPE_PALETTE:
    for (int x = 0; x < n; ++x)
      std::memcpy(out + 3 * x, raw.palette.data() + 3 * in[x], 3);
    break;
  case PNG_COLOR_TYPE_GRAY:
    if (raw.bitDepth == 16) {
      // Pillow opens 16-bit gray as "I;16" and its I;16 -> RGB/L conversion clamps to 255
      // rather than scaling.
      for (int x = 0; x < n; ++x)
        out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = in[2 * x] == 0 ? in[2 * x + 1] : 255;
    } else {
      grayToRgb(in, size_t(n), out);
    }
    break;
  default: // gray + alpha, RGB, RGBA: the colour samples, alpha dropped
    for (int x = 0; x < n; ++x) {
      const uint8_t *p = in + x * raw.samples;
      if (raw.samples <= 2)
        out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = p[0];
      else
        std::memcpy(out + 3 * x, p, 3);
    }
  }
}

} // namespace

Expected<std::pair<int, int>> pngSize(const uint8_t *data, size_t size, const std::string &what) {
  // The signature (8 bytes), then the IHDR chunk: length, "IHDR", width, height (big-endian).
  if (size < 24 || std::memcmp(data + 12, "IHDR", 4) != 0)
    return Status::error(what + ": corrupt PNG: no IHDR chunk after the signature");
  auto be32 = [&](size_t at) {
    return uint32_t(data[at]) << 24 | uint32_t(data[at + 1]) << 16 | uint32_t(data[at + 2]) << 8 | data[at + 3];
  };
  const uint32_t width = be32(16), height = be32(20);
  if (width == 0 || height == 0 || width > 0x7fffffffu || height > 0x7fffffffu)
    return Status::error(what + ": corrupt PNG: image size " + std::to_string(width) + " x " + std::to_string(height));
  return std::make_pair(int(width), int(height));
}

Expected<Image> decodePng(const uint8_t *data, size_t size, int channels, const std::string &what) {
  Source source{data, size, 0};
  RawPng raw;
  if (!readRaw(source, raw))
    return Status::error(what + ": corrupt PNG: " + raw.message);
  Image image;
  image.width = raw.width;
  image.height = raw.height;
  image.channels = channels;
  const size_t pixels = size_t(raw.width) * size_t(raw.height);
  image.pixels.resize(pixels * 3);
  for (int y = 0; y < raw.height; ++y)
    rowToRgb(raw, raw.rows[size_t(y)], image.pixels.data() + size_t(y) * size_t(raw.width) * 3);
  // Gray from RGB by Pillow's luma (exact for gray sources: its weights sum to 65536).
  if (channels == 1) {
    rgbToGray(image.pixels.data(), pixels, image.pixels.data());
    image.pixels.resize(pixels);
  }
  return image;
}

} // namespace castor::data::detail
