// An encoded batch (castor/encoded_images.h) made into pixels on the host: each JPEG decoded by
// TurboJPEG, each image resized by its plan. What a backend that decodes where the step runs
// computes, but for the decoder's rounding (the reference of its tests).
#pragma once

#include "castor/encoded_images.h"
#include "castor/status.h"

#include <cstdint>
#include <vector>

namespace castor::data {

// pixels[N][outHeight][outWidth][channels].
Status decodeEncodedBatch(const EncodedImageBatch &batch, std::vector<uint8_t> &pixels);

} // namespace castor::data
