// JPEG through TurboJPEG: the same libjpeg-turbo decoder Pillow links, with the same defaults
// (ISLOW DCT, fancy upsampling), so the RGB bytes are Pillow's.
#include "data/image_codecs.h"
#include "data/pillow_color.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstring>

namespace castor::data::detail {
namespace {

// One decompressor per thread: a handle holds libjpeg's state and must not be used by two
// threads at once, and making one per image would cost an allocation of that state each time.
class ThreadDecompressor {
public:
  ThreadDecompressor() : handle_(tjInitDecompress()) {}
  ~ThreadDecompressor() {
    if (handle_)
      tjDestroy(handle_);
  }
  ThreadDecompressor(const ThreadDecompressor &) = delete;
  ThreadDecompressor &operator=(const ThreadDecompressor &) = delete;
  tjhandle get() const { return handle_; }
  // A fresh handle after a failure: TurboJPEG 2.1's tjDecompressHeader3 leaves libjpeg mid-header
  // when it fails, and every later call on that handle would then fail too.
  void reset() {
    if (handle_)
      tjDestroy(handle_);
    handle_ = tjInitDecompress();
  }

private:
  tjhandle handle_;
};

ThreadDecompressor &threadDecompressor() {
  thread_local ThreadDecompressor decompressor;
  return decompressor;
}

bool startsWith(const std::string &s, const char *prefix) { return s.compare(0, std::strlen(prefix), prefix) == 0; }

// libjpeg's warnings (jerror.h's JWRN_* texts, up to their first parameter). TurboJPEG reports
// TJERR_WARNING when any was raised, also when a fatal error followed one; its message then is
// the fatal error's (libjpeg keeps only the first warning's text), which this tells apart.
bool isLibjpegWarning(const std::string &message) {
  static const char *const kWarnings[] = {
      "Unknown Adobe color transform code ",
      "Corrupt JPEG data: ",
      "Inconsistent progression sequence for component ",
      "Warning: unknown JFIF revision number ",
      "Premature end of JPEG file",
      "Invalid SOS parameters for sequential JPEG",
      "Application transferred too many scanlines",
  };
  for (const char *warning : kWarnings)
    if (startsWith(message, warning))
      return true;
  return false;
}

// The outcome of a TurboJPEG call that returned -1: fine when it only warned about data that
// libjpeg recovered from (Pillow ignores those too), an error otherwise. A premature end of the
// file is an error: Pillow refuses truncated JPEGs ("image file is truncated"), where libjpeg
// would fill the missing rows with gray.
Status failedCallOutcome(tjhandle handle, const std::string &what) {
  const std::string message = tjGetErrorStr2(handle);
  if (tjGetErrorCode(handle) == TJERR_WARNING && isLibjpegWarning(message)) {
    if (startsWith(message, "Premature end of JPEG file"))
      return Status::error(what + ": corrupt JPEG: " + message + " (the file is truncated)");
    return Status::ok();
  }
  return Status::error(what + ": corrupt JPEG: " + message);
}

struct Header {
  int width = 0, height = 0, colorspace = -1;
};

Expected<Header> readHeader(ThreadDecompressor &decompressor, const uint8_t *data, size_t size,
                            const std::string &what) {
  if (!decompressor.get()) // tjInitDecompress failed before (out of memory): try again
    decompressor.reset();
  tjhandle handle = decompressor.get();
  if (!handle)
    return Status::error(what + ": cannot create a TurboJPEG decompressor: " + tjGetErrorStr2(nullptr));
  Header h;
  int subsampling = -1;
  if (tjDecompressHeader3(handle, data, static_cast<unsigned long>(size), &h.width, &h.height, &subsampling,
                          &h.colorspace) != 0) {
    // TurboJPEG 2.1 refuses sampling factors outside its TJSAMP list after having read the
    // header; libjpeg (and Pillow) decode those, and decompressing does not need the type.
    const bool unknownSubsampling =
        std::strstr(tjGetErrorStr2(handle), "Could not determine subsampling type") != nullptr;
    if (!unknownSubsampling || h.width <= 0 || h.height <= 0 || h.colorspace < 0) {
      Status outcome = failedCallOutcome(handle, what);
      if (!outcome) {
        decompressor.reset();
        return outcome;
      }
    }
  }
  if (h.width <= 0 || h.height <= 0) { // tables only, no frame: libjpeg stopped mid-stream
    decompressor.reset();
    return Status::error(what + ": corrupt JPEG: no image size in the header");
  }
  if (int64_t(h.width) * h.height > kMaxImagePixels)
    return Status::error(what + ": JPEG of " + std::to_string(h.width) + " x " + std::to_string(h.height) +
                         " pixels, more than the " + std::to_string(kMaxImagePixels) + " accepted");
  return h;
}

// Pillow reads every 4-channel JPEG as Adobe-inverted CMYK ("CMYK;I": v -> 255 - v) and converts
// it with cmyk2rgb: channel = nk - nk * ink / 255 with nk = 255 - K, in its MULDIV255 rounding.
void invertedCmykToRgb(const uint8_t *cmyk, size_t count, uint8_t *rgb) {
  auto mulDiv255 = [](int a, int b) {
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (size_t i = 0; i < count; ++i) {
    const uint8_t *p = cmyk + 4 * i;
    int nk = p[3]; // 255 - (255 - K)
    for (int c = 0; c < 3; ++c)
      rgb[3 * i + c] = uint8_t(nk - mulDiv255(255 - p[c], nk));
  }
}

} // namespace

Expected<std::pair<int, int>> jpegSize(const uint8_t *data, size_t size, const std::string &what) {
  auto header = readHeader(threadDecompressor(), data, size, what);
  if (!header)
    return header.status();
  return std::make_pair(header->width, header->height);
}

int jpegColorspace(const uint8_t *data, size_t size) {
  auto header = readHeader(threadDecompressor(), data, size, "");
  return header ? header->colorspace : -1;
}

Expected<Image> decodeJpeg(const uint8_t *data, size_t size, int channels, int minWidth, int minHeight,
                           const std::string &what, int *scaleNum, int *scaleDenom) {
  ThreadDecompressor &decompressor = threadDecompressor();
  auto header = readHeader(decompressor, data, size, what);
  if (!header)
    return header.status();
  const int width = header->width, height = header->height;

  // The smallest scale <= 1 that keeps minWidth x minHeight (1/1 when none is asked for).
  int factorCount = 0;
  const tjscalingfactor *factors = tjGetScalingFactors(&factorCount);
  tjscalingfactor chosen = {1, 1};
  if (minWidth > 0 || minHeight > 0)
    for (int i = 0; i < factorCount; ++i) {
      const tjscalingfactor f = factors[i];
      if (f.num <= f.denom && TJSCALED(width, f) >= minWidth && TJSCALED(height, f) >= minHeight &&
          int64_t(f.num) * chosen.denom < int64_t(chosen.num) * f.denom)
        chosen = f;
    }
  const int outWidth = TJSCALED(width, chosen), outHeight = TJSCALED(height, chosen);
  // tjDecompress2 takes the first factor of its list (largest first) whose size fits the one
  // asked for; report that one, in case two factors give a tiny image the same size.
  tjscalingfactor used = chosen;
  for (int i = 0; i < factorCount; ++i)
    if (TJSCALED(width, factors[i]) <= outWidth && TJSCALED(height, factors[i]) <= outHeight) {
      used = factors[i];
      break;
    }

  const int colorspace = header->colorspace;
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int pixelFormat = cmyk ? TJPF_CMYK : colorspace == TJCS_GRAY && channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const size_t pixels = size_t(outWidth) * size_t(outHeight);
  Image image;
  image.width = outWidth;
  image.height = outHeight;
  image.channels = channels;
  image.pixels.resize(pixels * size_t(tjPixelSize[pixelFormat]));
  if (tjDecompress2(decompressor.get(), data, static_cast<unsigned long>(size), image.pixels.data(), outWidth, 0,
                    outHeight, pixelFormat, 0) != 0) {
    Status outcome = failedCallOutcome(decompressor.get(), what);
    if (!outcome) {
      decompressor.reset();
      return outcome;
    }
  }

  if (cmyk) {
    std::vector<uint8_t> rgb(pixels * 3);
    invertedCmykToRgb(image.pixels.data(), pixels, rgb.data());
    image.pixels = std::move(rgb);
  }
  if (channels == 1 && pixelFormat != TJPF_GRAY) {
    rgbToGray(image.pixels.data(), pixels, image.pixels.data());
    image.pixels.resize(pixels);
  }
  if (scaleNum)
    *scaleNum = used.num;
  if (scaleDenom)
    *scaleDenom = used.denom;
  return image;
}

} // namespace castor::data::detail
