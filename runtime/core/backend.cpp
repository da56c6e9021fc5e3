// What every backend shares, whatever it runs on.
#include "castor/backend.h"

#include "plan/plan_validator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace castor {

bool poisonRequestedByEnvironment() {
  const char *v = std::getenv("CASTOR_POISON");
  return v && *v && std::strcmp(v, "0") != 0;
}

namespace {

// `options.plantNonFinite`, else CASTOR_PLANT_NONFINITE parsed; an error names a malformed value.
Expected<std::optional<PlantedNonFinite>> plantedNonFinite(const BackendOptions &options) {
  if (options.plantNonFinite)
    return options.plantNonFinite;
  const char *v = std::getenv("CASTOR_PLANT_NONFINITE");
  if (!v || !*v)
    return std::optional<PlantedNonFinite>{};
  // "K@R" or "K@R:inf"
  const std::string text = v;
  PlantedNonFinite p;
  size_t at = text.find('@'), colon = text.find(':');
  std::string run = text.substr(at == std::string::npos ? text.size() : at + 1,
                                colon == std::string::npos ? std::string::npos : colon - at - 1);
  const std::string kind = colon == std::string::npos ? "nan" : text.substr(colon + 1);
  char *end = nullptr;
  p.kernel = int(std::strtol(text.c_str(), &end, 10));
  const bool kernelOk = at != std::string::npos && end == text.c_str() + at && at > 0;
  // RUN "*": every run (a fault that recurs, e.g. a batch norm whose input is never finite).
  const bool everyRun = run == "*";
  p.run = everyRun ? 0 : std::strtoll(run.c_str(), &end, 10);
  const bool runOk = everyRun || (!run.empty() && *end == '\0' && p.run >= 1);
  if (!kernelOk || !runOk || p.kernel < 0 || (kind != "nan" && kind != "inf"))
    return Status::error("CASTOR_PLANT_NONFINITE='" + text + "': expected KERNEL@RUN, KERNEL@RUN:inf or KERNEL@*");
  p.inf = kind == "inf";
  return std::optional<PlantedNonFinite>{p};
}

bool isFloat(plan::DType dt) { return dt == plan::F32 || dt == plan::F16 || dt == plan::BF16 || dt == plan::F64; }

// Kernel `kernel`'s first floating-point output.
Expected<const plan::Tensor *> plantTarget(const plan::Plan &plan, int kernel) {
  if (kernel < 0 || kernel >= plan.kernels_size())
    return Status::error("planted non-finite value: the plan has no kernel " + std::to_string(kernel));
  for (uint32_t id : plan.kernels(kernel).outputs())
    for (const plan::Tensor &t : plan.tensors())
      if (t.id() == id && isFloat(t.dtype()) && t.bytes() > 0)
        return &t;
  return Status::error("planted non-finite value: " + plan::describeKernel(plan, kernel) +
                       " has no floating-point output");
}

std::vector<uint8_t> nonFiniteElement(plan::DType dtype, bool inf) {
  // IEEE bit patterns, little-endian: all-ones exponent, zero (inf) or nonzero (NaN) mantissa.
  switch (dtype) {
  case plan::F16:
    return inf ? std::vector<uint8_t>{0x00, 0x7C} : std::vector<uint8_t>{0x00, 0x7E};
  case plan::BF16:
    return inf ? std::vector<uint8_t>{0x80, 0x7F} : std::vector<uint8_t>{0xC0, 0x7F};
  case plan::F64:
    return inf ? std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0xF0, 0x7F} : std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0xF8, 0x7F};
  default:
    return inf ? std::vector<uint8_t>{0x00, 0x00, 0x80, 0x7F} : std::vector<uint8_t>{0x00, 0x00, 0xC0, 0x7F};
  }
}

} // namespace

NonFinitePlant::NonFinitePlant(const BackendOptions &options) {
  auto plant = plantedNonFinite(options);
  if (plant)
    plant_ = *plant;
  else
    error_ = plant.status();
}

Status NonFinitePlant::bind(const plan::Plan &plan) {
  CASTOR_RETURN_IF_ERROR(error_);
  tensor_ = nullptr;
  if (!plant_)
    return Status::ok();
  auto target = plantTarget(plan, plant_->kernel);
  if (!target)
    return target.status();
  tensor_ = *target;
  bytes_ = nonFiniteElement(tensor_->dtype(), plant_->inf);
  return Status::ok();
}

const plan::Tensor *NonFinitePlant::after(int kernel, int64_t run) const {
  return tensor_ && kernel == plant_->kernel && (run == plant_->run || plant_->run == 0) ? tensor_ : nullptr;
}

int64_t countNonFinite(plan::DType dtype, const uint8_t *bytes, size_t size) {
  // An element is inf or NaN when its exponent bits are all ones.
  auto count = [&](auto word, uint64_t exponentMask) {
    using W = decltype(word);
    int64_t n = 0;
    for (size_t i = 0; i + sizeof(W) <= size; i += sizeof(W)) {
      W w;
      std::memcpy(&w, bytes + i, sizeof(W));
      n += (uint64_t(w) & exponentMask) == exponentMask;
    }
    return n;
  };
  switch (dtype) {
  case plan::F32:
    return count(uint32_t{}, 0x7F800000u);
  case plan::F16:
    return count(uint16_t{}, 0x7C00u);
  case plan::BF16:
    return count(uint16_t{}, 0x7F80u);
  case plan::F64:
    return count(uint64_t{}, 0x7FF0000000000000ull);
  default:
    return 0;
  }
}

Expected<NonFiniteTensor> Backend::firstNonFinite(const std::vector<const plan::Tensor *> &tensors) {
  std::vector<uint8_t> host;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const plan::Tensor &t = *tensors[i];
    if (!isFloat(t.dtype()))
      continue;
    host.resize(t.bytes());
    CASTOR_RETURN_IF_ERROR(download(t.id(), host.data(), host.size()));
    if (int64_t n = countNonFinite(t.dtype(), host.data(), host.size()); n > 0)
      return NonFiniteTensor{int(i), n};
  }
  return NonFiniteTensor{};
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
