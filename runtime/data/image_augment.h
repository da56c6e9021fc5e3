// torchvision's ImageNet transforms on PIL images, reproduced to the byte so that a model trained
// or evaluated here sees what torchvision would have fed it:
//   training:   RandomResizedCrop(size) + RandomHorizontalFlip()
//               = randomResizedCropBox, then resizedCrop(..., flip);
//   evaluation: Resize(resize) + CenterCrop(crop) = resizeCenterCrop.
// Resizing is Pillow's BILINEAR (antialiased) resize, which torchvision calls for PIL images, as
// Pillow 13 computes it (earlier versions order the two passes differently in some downscales,
// which moves some pixels by 1).
#pragma once

#include "castor/image_resize.h"
#include "data/image_decode.h"

#include <cstdint>
#include <functional>

namespace castor::data {

struct CropBox {
  int left = 0, top = 0, width = 0, height = 0;
};

// torchvision.transforms.RandomResizedCrop.get_params(img, scale, ratio) for a width x height
// image: up to 10 attempts of
//   target_area = area * U(scaleMin, scaleMax); aspect = exp(U(log ratioMin, log ratioMax));
//   w = round(sqrt(target_area * aspect)); h = round(sqrt(target_area / aspect));
//   accepted if 0 < w <= width and 0 < h <= height: top = randint(0, height - h + 1), then
//   left = randint(0, width - w + 1);
// else torchvision's fallback, a central crop with the aspect ratio clamped into [ratioMin,
// ratioMax]. Draws come from `uniform()` (doubles in [0, 1)) in torchvision's order; U(a, b) =
// a + (b - a) u, randint(lo, hi) = lo + floor(u (hi - lo)), round is Python's (half to even).
// Computed in double (torchvision draws the aspect ratio in float32: its crops can differ from
// these in rare rounding cases, the distribution is the same).
CropBox randomResizedCropBox(int width, int height, const std::function<double()> &uniform, double scaleMin = 0.08,
                             double scaleMax = 1.0, double ratioMin = 3.0 / 4.0, double ratioMax = 4.0 / 3.0);

// PIL's img.crop(box).resize((outWidth, outHeight), Image.BILINEAR), mirrored left-right after
// when `flip` (RandomHorizontalFlip), written to `out` as outHeight x outWidth x src.channels
// (HWC). A box reaching outside the image is clipped to it (torchvision's boxes never do).
void resizedCrop(const Image &src, const CropBox &box, int outWidth, int outHeight, bool flip, uint8_t *out);

// torchvision Resize(resize) (the shorter side to `resize`, the longer to int(resize * long /
// short)) then CenterCrop(crop) (top = int(round((h - crop) / 2.0)), left likewise), with PIL's
// arithmetic: a full-image BILINEAR resize, then an integer crop; only the kept pixels are
// computed. Writes crop x crop x src.channels (HWC). Needs crop <= resize (torchvision would pad).
void resizeCenterCrop(const Image &src, int resize, int crop, uint8_t *out);

// The resizes above as plans (castor/image_resize.h) for a width x height image, and one plan run
// on the host into an outWidth x outHeight x src.channels image: what a backend that resizes
// where the step runs computes to the same bytes.
ImageResize planResizedCrop(int width, int height, const CropBox &box, int outWidth, int outHeight, bool flip);
ImageResize planResizeCenterCrop(int width, int height, int resize, int crop);
void runResize(const Image &src, const ImageResize &resize, int outWidth, int outHeight, uint8_t *out);

} // namespace castor::data
