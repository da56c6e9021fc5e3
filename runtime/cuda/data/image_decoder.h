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
  // Decodes and resizes `batch` into out[N][outHeight][outWidth][channels] (device) on `stream`,
  // writing `out` only after `outFree` (its last reader). Returns once the work is enqueued;
  // `batch` may change as soon as it returns. Two calls' work may be in flight at once (two sets
  // of buffers); a third call waits for the first's.
  virtual Status run(const EncodedImageBatch &batch, uint8_t *out, cudaStream_t stream, cudaEvent_t outFree) = 0;
};

// A decoder on a thread of its own, so that its host work (staging the files, nvJPEG's parsing,
// the resize plans) overlaps the caller's, which only hands batches over: one batch in flight.
class BackgroundImageDecoder {
public:
  explicit BackgroundImageDecoder(std::unique_ptr<DeviceImageDecoder> decoder);
  ~BackgroundImageDecoder();
  bool hardware() const { return decoder_->hardware(); }
  // Waits for the batch before to be enqueued, then hands this one over: decoded into `out` on
  // `stream` after `outFree`, then `done` recorded on `stream`. Its error comes from wait().
  Status submit(EncodedImageBatch batch, uint8_t *out, cudaStream_t stream, cudaEvent_t outFree, cudaEvent_t done);
  // Waits until the batch handed over last is enqueued (its `done` recorded); its outcome.
  Status wait();

private:
  struct Impl;
  std::unique_ptr<DeviceImageDecoder> decoder_;
  std::unique_ptr<Impl> impl_;
};

} // namespace castor::cuda
