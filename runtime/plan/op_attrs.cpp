#include "plan/op_attrs.h"

#include <cmath>

namespace castor::plan {

const Attr *AttrReader::find(const std::string &name) {
  read_.insert(name);
  auto it = kernel_.attrs().find(name);
  return it == kernel_.attrs().end() ? nullptr : &it->second;
}

void AttrReader::fail(const std::string &message) {
  if (error_.empty())
    error_ = message;
}

std::vector<int64_t> AttrReader::ints(const std::string &name, std::vector<int64_t> fallback) {
  const Attr *a = find(name);
  if (!a)
    return fallback;
  if (a->value_case() != Attr::kInts) {
    fail("attribute '" + name + "' must be an int list, got " + attrString(*a));
    return fallback;
  }
  return {a->ints().values().begin(), a->ints().values().end()};
}

int64_t AttrReader::integer(const std::string &name, int64_t fallback) {
  const Attr *a = find(name);
  if (!a)
    return fallback;
  if (a->value_case() == Attr::kB)
    return a->b();
  if (a->value_case() != Attr::kInts || a->ints().values_size() != 1) {
    fail("attribute '" + name + "' must be one integer, got " + attrString(*a));
    return fallback;
  }
  return a->ints().values(0);
}

std::optional<double> AttrReader::optReal(const std::string &name) {
  const Attr *a = find(name);
  if (!a)
    return std::nullopt;
  if (a->value_case() == Attr::kFloats && a->floats().values_size() == 1)
    return a->floats().values(0);
  if (a->value_case() == Attr::kInts && a->ints().values_size() == 1)
    return double(a->ints().values(0));
  fail("attribute '" + name + "' must be one real number, got " + attrString(*a));
  return std::nullopt;
}

double AttrReader::real(const std::string &name, double fallback) {
  auto v = optReal(name);
  return v ? *v : fallback;
}

bool AttrReader::boolean(const std::string &name, bool fallback) {
  const Attr *a = find(name);
  if (!a)
    return fallback;
  if (a->value_case() == Attr::kB)
    return a->b();
  if (a->value_case() == Attr::kInts && a->ints().values_size() == 1 &&
      (a->ints().values(0) == 0 || a->ints().values(0) == 1))
    return a->ints().values(0) == 1;
  fail("attribute '" + name + "' must be a bool, got " + attrString(*a));
  return fallback;
}

std::string AttrReader::string(const std::string &name, std::string fallback) {
  const Attr *a = find(name);
  if (!a)
    return fallback;
  if (a->value_case() != Attr::kS) {
    fail("attribute '" + name + "' must be a string, got " + attrString(*a));
    return fallback;
  }
  return a->s();
}

Status AttrReader::finish() const {
  if (!error_.empty())
    return Status::error(error_);
  for (const auto &[name, value] : kernel_.attrs())
    if (!read_.count(name)) {
      std::string known;
      for (const auto &n : read_)
        known += (known.empty() ? "" : ", ") + n;
      return Status::error("unknown attribute '" + name + "' for " + kernel_.op() +
                           (known.empty() ? " (it takes none)" : " (it takes: " + known + ")"));
    }
  return Status::ok();
}

Expected<Conv2dParams> parseConv2d(const Kernel &k) {
  AttrReader r(k);
  Conv2dParams p;
  p.shape.strides = r.ints("strides", {1, 1});
  p.shape.pads = r.ints("pads", {0, 0, 0, 0});
  p.shape.dilations = r.ints("dilations", {1, 1});
  p.shape.groups = r.integer("groups", 1);
  CASTOR_RETURN_IF_ERROR(r.finish());
  return p;
}

Expected<Pool2dParams> parsePool2d(const Kernel &k) {
  AttrReader r(k);
  Pool2dParams p;
  p.shape.kernel = r.ints("kernel", {});
  p.shape.strides = r.ints("strides", {1, 1}); // ONNX default (PyTorch defaults to the kernel)
  p.shape.pads = r.ints("pads", {0, 0, 0, 0});
  p.shape.ceilMode = r.boolean("ceil_mode", false);
  if (k.op() == "max_pool2d") {
    p.shape.dilations = r.ints("dilations", {1, 1});
  } else {
    p.countIncludePad = r.boolean("count_include_pad", false);
  }
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (p.shape.kernel.empty())
    return Status::error("attribute 'kernel' is required");
  return p;
}

Expected<BatchNormParams> parseBatchNorm(const Kernel &k) {
  AttrReader r(k);
  BatchNormParams p;
  p.epsilon = r.real("epsilon", 1e-5);
  p.momentum = r.real("momentum", 0.1);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(p.epsilon >= 0))
    return Status::error("epsilon must be non-negative");
  return p;
}

Expected<GemmParams> parseGemm(const Kernel &k) {
  AttrReader r(k);
  GemmParams p;
  p.transA = r.boolean("trans_a", false);
  p.transB = r.boolean("trans_b", false);
  p.alpha = r.real("alpha", 1.0);
  p.beta = r.real("beta", 1.0);
  CASTOR_RETURN_IF_ERROR(r.finish());
  return p;
}

Expected<ClipParams> parseClip(const Kernel &k) {
  AttrReader r(k);
  ClipParams p;
  p.min = r.optReal("min");
  p.max = r.optReal("max");
  CASTOR_RETURN_IF_ERROR(r.finish());
  return p;
}

Expected<SoftmaxCrossEntropyParams> parseSoftmaxCrossEntropy(const Kernel &k) {
  AttrReader r(k);
  SoftmaxCrossEntropyParams p;
  p.labelSmoothing = r.real("label_smoothing", 0.0);
  std::string reduction = r.string("reduction", "mean");
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (reduction == "mean")
    p.reduction = shape::Reduction::Mean;
  else if (reduction == "sum")
    p.reduction = shape::Reduction::Sum;
  else if (reduction == "none")
    p.reduction = shape::Reduction::None;
  else
    return Status::error("reduction must be \"mean\", \"sum\" or \"none\", got \"" + reduction + "\"");
  if (!(p.labelSmoothing >= 0.0 && p.labelSmoothing <= 1.0))
    return Status::error("label_smoothing must be in [0, 1]");
  return p;
}

Expected<int64_t> parseAxis(const Kernel &k, int64_t fallback) {
  AttrReader r(k);
  int64_t axis = r.integer("axis", fallback);
  CASTOR_RETURN_IF_ERROR(r.finish());
  return axis;
}

Status parseNoAttrs(const Kernel &k, const std::vector<std::string> &ignored) {
  AttrReader r(k);
  for (const auto &name : ignored)
    r.real(name, 0.0);
  return r.finish();
}

} // namespace castor::plan
