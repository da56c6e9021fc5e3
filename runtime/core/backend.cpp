// What every backend shares, whatever it runs on.
#include "castor/backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace castor {

bool poisonRequestedByEnvironment() {
  const char *v = std::getenv("CASTOR_POISON");
  return v && *v && std::strcmp(v, "0") != 0;
}

// A host clock around run(): right for a backend whose run() returns when the step is done; a
// device backend times with its own events instead.
Expected<double> Backend::timedRun() {
  const auto start = std::chrono::steady_clock::now();
  CASTOR_RETURN_IF_ERROR(run());
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Status Backend::uploadPixels(const plan::Tensor &t, const uint8_t *pixels, const PixelTransform &transform) {
  auto shape = pixelShapeOf(t, transform);
  if (!shape)
    return shape.status();
  std::vector<uint8_t> values(t.bytes());
  pixelsToTensor(pixels, *shape, transform, t.dtype(), values.data());
  return upload(t.id(), values.data(), values.size());
}

Status Backend::generatePixels(const plan::Tensor &t, uint64_t seed, int64_t step, const PixelTransform &transform) {
  auto shape = pixelShapeOf(t, transform);
  if (!shape)
    return shape.status();
  std::vector<uint8_t> pixels(shape->count());
  syntheticPixels(seed, step, pixels.size(), pixels.data());
  return uploadPixels(t, pixels.data(), transform);
}

} // namespace castor
