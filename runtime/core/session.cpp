#include "core/session.h"

#include "plan/plan_validator.h"
#include "weights/init.h"

#include <map>

namespace castor {

namespace {
bool isFloat(plan::DType d) { return d == plan::F32 || d == plan::F16 || d == plan::BF16 || d == plan::F64; }
} // namespace

Expected<HostTensor> convertTensor(const HostTensor &value, plan::DType dtype) {
  if (value.dtype == dtype)
    return value;
  if (!isFloat(value.dtype) || !isFloat(dtype))
    return Status::error("cannot convert " + plan::dtypeName(value.dtype) + " data to " + plan::dtypeName(dtype));
  HostTensor out = value;
  out.dtype = dtype;
  out.data = weights::encodeValues(dtype, weights::decodeValues(value.dtype, value.data));
  return out;
}

const plan::Tensor *Session::byId(uint32_t id) const {
  for (const plan::Tensor &t : plan_.tensors())
    if (t.id() == id)
      return &t;
  return nullptr;
}

Status Session::setTensor(const plan::Tensor &t, const HostTensor &value, const std::string &what) {
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  if (value.shape != shape) {
    plan::Tensor got;
    for (int64_t d : value.shape)
      got.add_shape(d);
    return Status::error(what + " needs shape " + plan::shapeString(t) + ", got " + plan::shapeString(got));
  }
  // Already in the tensor's dtype (castor-run's batches are): upload without a copy.
  if (value.dtype == t.dtype())
    return backend_->upload(t.id(), value.data.data(), value.data.size()).withContext(what);
  auto converted = convertTensor(value, t.dtype());
  if (!converted)
    return converted.status().withContext(what);
  return backend_->upload(t.id(), converted->data.data(), converted->data.size()).withContext(what);
}

Expected<std::unique_ptr<Session>> Session::create(plan::Plan plan, std::unique_ptr<Backend> backend,
                                                   const SessionOptions &options) {
  CASTOR_RETURN_IF_ERROR(plan::validatePlan(plan).withContext("invalid plan"));
  std::unique_ptr<Session> s(new Session());
  s->plan_ = std::move(plan);
  s->backend_ = std::move(backend);
  CASTOR_RETURN_IF_ERROR(s->backend_->load(s->plan_));

  weights::TensorFile file;
  if (!options.weightsPath.empty()) {
    auto read = weights::readSafetensors(options.weightsPath);
    if (!read)
      return read.status();
    file = std::move(*read);
  }
  for (const plan::Parameter &p : s->plan_.parameters()) {
    const plan::Tensor &t = *s->byId(p.tensor());
    std::string what = "parameter '" + p.name() + "'";
    // A constant the plan fills itself (a splat: the loss gradient's seed, a static loss scale)
    // is the plan's own value: a file's tensor of that name (a state saved by another plan,
    // given as --weights) does not replace it.
    const bool planConstant = p.init() == plan::Parameter::FILL && p.name().rfind("castor.constant.", 0) == 0;
    if (const HostTensor *w = planConstant ? nullptr : file.find(p.name())) {
      CASTOR_RETURN_IF_ERROR(s->setTensor(t, *w, what + " from " + options.weightsPath));
      ++s->fromFile_;
      continue;
    }
    if (p.init() == plan::Parameter::FILE || (options.requireAllFromFile && !planConstant))
      return Status::error(what + " is to be read from a weights file, but " +
                           (options.weightsPath.empty() ? std::string("none was given")
                                                        : options.weightsPath + " does not contain it"));
    auto values = weights::initialValues(p, *plan::elementCount(t), options.seed);
    if (!values)
      return values.status();
    auto bytes = weights::encodeValues(t.dtype(), *values);
    CASTOR_RETURN_IF_ERROR(s->backend_->upload(t.id(), bytes.data(), bytes.size()).withContext(what));
    ++s->initialized_;
  }
  return s;
}

Status Session::setParameters(const weights::TensorFile &file) {
  for (const plan::Parameter &p : plan_.parameters()) {
    const HostTensor *w = file.find(p.name());
    if (!w)
      return Status::error("parameter '" + p.name() + "' is not in the given state");
    CASTOR_RETURN_IF_ERROR(setTensor(*byId(p.tensor()), *w, "parameter '" + p.name() + "'"));
  }
  return Status::ok();
}

Status Session::setInput(const std::string &name, const HostTensor &value) {
  for (const plan::Binding &b : plan_.inputs())
    if (b.name() == name)
      return setTensor(*byId(b.tensor()), value, "input '" + name + "'");
  return Status::error("the plan has no input named '" + name + "'");
}

Status Session::setInputPixels(const std::string &name, const uint8_t *pixels, const PixelTransform &transform) {
  for (const plan::Binding &b : plan_.inputs())
    if (b.name() == name)
      return backend_->uploadPixels(*byId(b.tensor()), pixels, transform);
  return Status::error("the plan has no input named '" + name + "'");
}

Status Session::generateInputPixels(const std::string &name, uint64_t seed, int64_t step,
                                    const PixelTransform &transform) {
  for (const plan::Binding &b : plan_.inputs())
    if (b.name() == name)
      return backend_->generatePixels(*byId(b.tensor()), seed, step, transform);
  return Status::error("the plan has no input named '" + name + "'");
}

Status Session::setInputEncoded(const std::string &name, EncodedImageBatch batch, const PixelTransform &transform) {
  for (const plan::Binding &b : plan_.inputs())
    if (b.name() == name) {
      const plan::Tensor &t = *byId(b.tensor());
      if (t.shape_size() != 4 || int64_t(batch.images.size()) != t.shape(0) || batch.channels != t.shape(1) ||
          batch.outHeight != t.shape(2) || batch.outWidth != t.shape(3))
        return Status::error("input '" + name + "' " + plan::shapeString(t) + " does not take " +
                             std::to_string(batch.images.size()) + " images of " + std::to_string(batch.channels) +
                             " x " + std::to_string(batch.outHeight) + " x " + std::to_string(batch.outWidth));
      return backend_->uploadEncodedImages(t, std::move(batch), transform);
    }
  return Status::error("the plan has no input named '" + name + "'");
}

Status Session::run() { return backend_->run(); }

Expected<HostTensor> Session::tensor(uint32_t id) {
  const plan::Tensor *t = byId(id);
  if (!t)
    return Status::error("no tensor with id " + std::to_string(id));
  HostTensor out;
  out.name = t->name();
  out.dtype = t->dtype();
  out.shape.assign(t->shape().begin(), t->shape().end());
  out.data.resize(t->bytes());
  CASTOR_RETURN_IF_ERROR(backend_->download(id, out.data.data(), out.data.size()));
  return out;
}

Expected<weights::TensorFile> Session::state() {
  std::map<uint32_t, std::string> names;
  for (const plan::Parameter &p : plan_.parameters())
    names[p.tensor()] = p.name();
  weights::TensorFile file;
  for (const plan::Tensor &t : plan_.tensors()) {
    if (t.kind() != plan::Tensor::PARAMETER && t.kind() != plan::Tensor::STATE)
      continue;
    auto value = tensor(t.id());
    if (!value)
      return value.status();
    auto it = names.find(t.id());
    value->name = it != names.end() ? it->second : t.name();
    if (value->name.empty())
      return Status::error("state tensor " + std::to_string(t.id()) + " has no name");
    file.tensors.push_back(std::move(*value));
  }
  return file;
}

Expected<HostTensor> Session::output(const std::string &name) {
  for (const plan::Binding &b : plan_.outputs())
    if (b.name() == name) {
      auto t = tensor(b.tensor());
      if (t)
        t->name = name;
      return t;
    }
  return Status::error("the plan has no output named '" + name + "'");
}

} // namespace castor
