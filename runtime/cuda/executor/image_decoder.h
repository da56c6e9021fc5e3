// Image files to 8-bit pixels on the device (Backend::uploadEncodedImages): JPEGs decoded by
// nvJPEG — the GPU's hardware JPEG decoder where it has one (baseline JPEGs), else nvJPEG's CUDA
// decoder — and pixels the host decoded copied up; then each image resized by its Pillow plan
// (castor/image_resize.h) in two launches of the resize kernel (kernels/resample.h), bit for bit
// the host's resize of the same decoded pixels. nvJPEG's IDCT and chroma upsampling are not
// libjpeg-turbo's: decoded pixels differ from Pillow's by a few levels.
#pragma once

#include "castor/encoded_images.h"
#include "castor/status.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace castor::cuda {

class DeviceImageDecoder {
public:
  virtual ~DeviceImageDecoder() = default;
  // Whether this build has nvJPEG (CASTOR_HAVE_NVJPEG) and the GPU a hardware JPEG decoder.
  static bool built();
  static Expected<std::unique_ptr<DeviceImageDecoder>> create();
  virtual bool hardware() const = 0;
  // Decodes and resizes `batch` into out[N][outHeight][outWidth][channels] (device) on `stream`.
  // Returns once the work is enqueued; `batch` may change as soon as it returns. Not re-entrant:
  // a call waits for the previous call's work to finish before reusing its buffers.
  virtual Status run(const EncodedImageBatch &batch, uint8_t *out, cudaStream_t stream) = 0;
};

} // namespace castor::cuda
