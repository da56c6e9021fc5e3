// A plan loaded onto a backend, with parameters in place and inputs/outputs by binding name.
//
//   auto s = castor::Session::create(plan, castor::createCpuBackend(), {.weightsPath = "w.safetensors"});
//   s->setInput("images", images);  s->run();  auto y = s->output("logits");
#pragma once

#include "castor/backend.h"
#include "castor/status.h"
#include "plan/plan.h"
#include "weights/safetensors.h"

#include <memory>
#include <string>

namespace castor {

using HostTensor = weights::NamedTensor;

struct SessionOptions {
  std::string weightsPath; // safetensors; empty: every parameter comes from its initializer
  uint64_t seed = 0;       // for seeded initializers
  // Every parameter must come from the weights file (resuming a saved training state).
  bool requireAllFromFile = false;
};

class Session {
public:
  // Validates the plan, loads it onto `backend` and sets every parameter: from the weights file
  // when it holds a tensor of that name (shape must match; float dtypes are converted), else
  // from the parameter's seeded initializer (an init FILE parameter missing from the file is an
  // error).
  static Expected<std::unique_ptr<Session>> create(plan::Plan plan, std::unique_ptr<Backend> backend,
                                                   const SessionOptions &options);

  const plan::Plan &plan() const { return plan_; }
  Backend &backend() { return *backend_; }
  int parametersFromFile() const { return fromFile_; }
  int parametersInitialized() const { return initialized_; }

  // Shape must match the bound tensor; floating-point data is converted to its dtype.
  Status setInput(const std::string &name, const HostTensor &value);
  // 8-bit images into image input `name` [N, C, H, W]: pixels[N][H][W][C] through `transform`
  // (castor/pixel_input.h), converted where the step runs.
  Status setInputPixels(const std::string &name, const uint8_t *pixels, const PixelTransform &transform);
  // The synthetic pixels of (seed, step) into image input `name`, made where the step runs.
  Status generateInputPixels(const std::string &name, uint64_t seed, int64_t step, const PixelTransform &transform);
  // Image files into image input `name` [N, C, H, W], decoded and resized where the step runs
  // (Backend::uploadEncodedImages); the batch holds N images.
  Status setInputEncoded(const std::string &name, EncodedImageBatch batch, const PixelTransform &transform);
  Status run();
  // The bound tensor, in its own dtype.
  Expected<HostTensor> output(const std::string &name);

  // Any tensor of the plan by id.
  Expected<HostTensor> tensor(uint32_t id);

  // Every parameter from `file`, by name (float dtypes converted); one the file lacks is an error.
  // A forward plan takes a training session's state() this way (validation during training).
  Status setParameters(const weights::TensorFile &file);
  // The state kept between steps: every PARAMETER and STATE tensor, named as its Parameter
  // entry (else as the tensor), in the plan's tensor order. Written back by Session::create
  // (weightsPath), so a saved state resumes bit-exactly.
  Expected<weights::TensorFile> state();

private:
  Session() = default;
  Status setTensor(const plan::Tensor &t, const HostTensor &value, const std::string &what);
  const plan::Tensor *byId(uint32_t id) const;

  plan::Plan plan_;
  std::unique_ptr<Backend> backend_;
  int fromFile_ = 0, initialized_ = 0;
};

// Converts between floating-point dtypes (or copies when equal); refuses float <-> int.
Expected<HostTensor> convertTensor(const HostTensor &value, plan::DType dtype);

} // namespace castor
