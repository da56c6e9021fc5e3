// Pillow's BILINEAR resize passes on the device (resample.cu), bit for bit the host's
// (castor/image_resize.h): each output byte is clamp((2^21 + sum input * weight) >> 22, 0, 255),
// an exact int32 sum whatever its order. A job is one pass of one image: along the rows
// (horizontal: output column j reads input columns first[j] - shift ...) or along the columns
// (vertical: output row i reads input rows first[i] - shift ...), or a plain copy; columns are
// written mirrored when `flip`.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace castor::cuda {

struct ResampleJob {
  enum Axis : int32_t { Horizontal = 0, Vertical = 1, Copy = 2 };
  const uint8_t *src = nullptr;
  uint8_t *dst = nullptr;
  int64_t srcRowBytes = 0, dstRowBytes = 0;
  int32_t rows = 0, cols = 0; // of the output
  int32_t channels = 3;
  int32_t axis = Copy;
  int32_t shift = 0;
  int32_t flip = 0;
  // Into the taps table: first[outputs], count[outputs], weights[outputs * stride].
  int64_t first = 0, count = 0, weights = 0;
  int32_t stride = 0;
};

// Runs `jobCount` jobs (device array) over the taps table (device); `maxOutputs` bounds any
// job's rows * cols.
cudaError_t runResampleJobs(const ResampleJob *jobs, int jobCount, int64_t maxOutputs, const int32_t *taps,
                            cudaStream_t s);

} // namespace castor::cuda
