// A batch of images handed to a backend as files, decoded and resized where the step runs
// (castor-run train --decoder gpu): per image its JPEG file, or 8-bit pixels the host decoded
// (formats the device decoder does not take), and the Pillow resize (castor/image_resize.h) that
// makes the plan's image of it. The host has already drawn the augmentation.
#pragma once

#include "castor/image_resize.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor {

struct EncodedImage {
  std::string name;           // for messages: the file
  std::vector<uint8_t> jpeg;  // the file, when it is a JPEG for the device to decode
  bool baseline = false;      // a baseline (SOF0) JPEG: what hardware JPEG decoders take
  std::vector<uint8_t> pixels; // else height x width x channels, decoded by the host (perhaps
                               // resized too: then its resize is a copy)
  int width = 0, height = 0;  // of the decoded image
  ImageResize resize;
};

struct EncodedImageBatch {
  std::vector<EncodedImage> images; // the batch's N (padding: resize.empty)
  int channels = 3, outWidth = 0, outHeight = 0;
};

} // namespace castor
