#include "plan/op_attrs.h"

#include "plan/op_registry.h"

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

namespace {

// The value of string attribute `name` among `options` (an error lists them all).
template <typename E>
Expected<E> oneOf(const std::string &name, const std::string &value,
                  const std::vector<std::pair<std::string, E>> &options) {
  for (const auto &[text, e] : options)
    if (value == text)
      return e;
  std::string names;
  for (size_t i = 0; i < options.size(); ++i)
    names += (i == 0 ? "" : i + 1 == options.size() ? " or " : ", ") + ("\"" + options[i].first + "\"");
  return Status::error(name + " must be " + names + ", got \"" + value + "\"");
}

} // namespace

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
  if (const auto op = opFromName(k.op()); op == OpId::MaxPool2d || op == OpId::MaxPool2dBackward) {
    p.shape.dilations = r.ints("dilations", {1, 1});
  } else {
    p.countIncludePad = r.boolean("count_include_pad", false);
  }
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (p.shape.kernel.empty())
    return Status::error("attribute 'kernel' is required");
  return p;
}

Expected<DropoutParams> parseDropout(const Kernel &k) {
  AttrReader r(k);
  DropoutParams p;
  p.ratio = r.real("ratio", 0.5);
  p.seed = r.integer("seed", 0);
  p.salt = r.integer("salt", 0);
  p.perSample = r.boolean("per_sample", false);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(p.ratio >= 0.0 && p.ratio <= 1.0))
    return Status::error("ratio must be in [0, 1]");
  return p;
}

Expected<ReduceSumToParams> parseReduceSumTo(const Kernel &k) {
  AttrReader r(k);
  ReduceSumToParams p;
  p.scale = r.real("scale", 1.0);
  CASTOR_RETURN_IF_ERROR(r.finish());
  return p;
}

Expected<BatchNormRunningUpdateParams> parseBatchNormRunningUpdate(const Kernel &k) {
  AttrReader r(k);
  BatchNormRunningUpdateParams p;
  p.momentum = r.real("momentum", 0.1);
  p.epsilon = r.real("epsilon", 1e-5);
  p.count = r.integer("count", 0);
  p.sync = r.boolean("sync", false);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (p.count < 1)
    return Status::error("attribute 'count' (elements per channel) is required and must be positive");
  if (!(p.epsilon >= 0))
    return Status::error("epsilon must be non-negative");
  return p;
}

Expected<SgdParams> parseSgd(const Kernel &k) {
  AttrReader r(k);
  SgdParams p;
  p.momentum = r.real("momentum", 0.0);
  p.nesterov = r.boolean("nesterov", false);
  p.weightDecay = r.real("weight_decay", 0.0);
  p.dampening = r.real("dampening", 0.0);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(p.momentum >= 0))
    return Status::error("momentum must be non-negative");
  if (p.nesterov && (p.momentum <= 0 || p.dampening != 0))
    return Status::error("nesterov momentum requires a momentum and zero dampening");
  return p;
}

Expected<AdamWParams> parseAdamW(const Kernel &k) {
  AttrReader r(k);
  AdamWParams p;
  p.beta1 = r.real("beta1", 0.9);
  p.beta2 = r.real("beta2", 0.999);
  p.eps = r.real("eps", 1e-8);
  p.weightDecay = r.real("weight_decay", 0.01);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1))
    return Status::error("beta1 and beta2 must be in [0, 1)");
  if (!(p.eps >= 0))
    return Status::error("eps must be non-negative");
  return p;
}

Expected<LrScheduleParams> parseLrSchedule(const Kernel &k) {
  AttrReader r(k);
  LrScheduleParams p;
  std::string kind = r.string("kind", "constant");
  p.baseLr = r.real("base_lr", 0.0);
  p.warmupSteps = r.integer("warmup_steps", 0);
  p.stepSize = r.integer("step_size", 0);
  p.gamma = r.real("gamma", 0.1);
  p.totalSteps = r.integer("total_steps", 0);
  p.minLr = r.real("min_lr", 0.0);
  CASTOR_RETURN_IF_ERROR(r.finish());
  using Kind = LrScheduleParams::Kind;
  auto parsedKind =
      oneOf<Kind>("kind", kind, {{"constant", Kind::Constant}, {"step", Kind::Step}, {"cosine", Kind::Cosine}});
  if (!parsedKind)
    return parsedKind.status();
  p.kind = *parsedKind;
  if (p.warmupSteps < 0)
    return Status::error("warmup_steps must be non-negative");
  if (p.kind == LrScheduleParams::Kind::Step && p.stepSize < 1)
    return Status::error("a step schedule needs a positive step_size");
  if (p.kind == LrScheduleParams::Kind::Cosine && p.totalSteps < 1)
    return Status::error("a cosine schedule needs a positive total_steps");
  return p;
}

Expected<FillParams> parseFill(const Kernel &k) {
  AttrReader r(k);
  FillParams p;
  p.value = r.real("value", 0.0);
  CASTOR_RETURN_IF_ERROR(r.finish());
  return p;
}

Expected<ClipGradNormParams> parseClipGradNorm(const Kernel &k) {
  AttrReader r(k);
  ClipGradNormParams p;
  std::optional<double> maxNorm = r.optReal("max_norm");
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!maxNorm)
    return Status::error("attribute 'max_norm' is required");
  if (!(std::isfinite(*maxNorm) && *maxNorm >= 0))
    return Status::error("max_norm must be finite and non-negative");
  p.maxNorm = *maxNorm;
  return p;
}

Expected<UpdateLossScaleParams> parseUpdateLossScale(const Kernel &k) {
  AttrReader r(k);
  UpdateLossScaleParams p;
  p.growth = r.real("growth", 2.0);
  p.backoff = r.real("backoff", 0.5);
  p.interval = r.integer("interval", 2000);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(std::isfinite(p.growth) && p.growth > 0 && std::isfinite(p.backoff) && p.backoff > 0))
    return Status::error("growth and backoff must be finite and positive");
  if (p.interval < 1)
    return Status::error("interval must be at least 1");
  return p;
}

Expected<IncrementParams> parseIncrement(const Kernel &k) {
  AttrReader r(k);
  IncrementParams p;
  const std::string when = r.string("when", "clear");
  CASTOR_RETURN_IF_ERROR(r.finish());
  auto whenSet = oneOf<bool>("when", when, {{"clear", false}, {"set", true}});
  if (!whenSet)
    return whenSet.status();
  p.whenSet = *whenSet;
  return p;
}

Expected<AllReduceParams> parseAllReduce(const Kernel &k) {
  AttrReader r(k);
  // Required: a mean and a sum differ by the number of replicas, which no default should hide.
  const std::string reduction = r.string("reduction", "");
  CASTOR_RETURN_IF_ERROR(r.finish());
  auto parsed = oneOf<ReplicaReduction>("reduction", reduction,
                                 {{"mean", ReplicaReduction::Mean}, {"sum", ReplicaReduction::Sum}, {"max", ReplicaReduction::Max}});
  if (!parsed)
    return parsed.status();
  return AllReduceParams{*parsed};
}

Expected<BatchNormParams> parseBatchNorm(const Kernel &k) {
  AttrReader r(k);
  BatchNormParams p;
  p.epsilon = r.real("epsilon", 1e-5);
  p.momentum = r.real("momentum", 0.1);
  p.sync = r.boolean("sync", false);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(p.epsilon >= 0))
    return Status::error("epsilon must be non-negative");
  return p;
}

namespace {
// A batch norm's ReLU6-type clip(t, 0, clip_max): absent, or positive and finite (the
// compiler's verifyClipMax rule).
Status checkClipMax(const std::optional<double> &clipMax) {
  if (clipMax && !(std::isfinite(*clipMax) && *clipMax > 0))
    return Status::error("clip_max must be positive and finite");
  return Status::ok();
}
} // namespace

bool isBatchNormReluActivationAttr(const std::string &name) { return name == "clip_max"; }

Expected<BatchNormReluParams> parseBatchNormRelu(const Kernel &k) {
  AttrReader r(k);
  BatchNormReluParams p;
  p.batchNorm.epsilon = r.real("epsilon", 1e-5);
  p.batchNorm.momentum = r.real("momentum", 0.1);
  p.batchNorm.sync = r.boolean("sync", false);
  p.clipMax = r.optReal("clip_max");
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(p.batchNorm.epsilon >= 0))
    return Status::error("epsilon must be non-negative");
  CASTOR_RETURN_IF_ERROR(checkClipMax(p.clipMax));
  return p;
}

Expected<LayerNormParams> parseLayerNorm(const Kernel &k) {
  AttrReader r(k);
  LayerNormParams p;
  p.axis = r.integer("axis", -1);
  p.epsilon = r.real("epsilon", 1e-5);
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!(p.epsilon >= 0))
    return Status::error("epsilon must be non-negative");
  return p;
}

Expected<BatchNormApplyParams> parseBatchNormApply(const Kernel &k) {
  AttrReader r(k);
  BatchNormApplyParams p;
  p.relu = r.boolean("relu", false);
  p.clipMax = r.optReal("clip_max");
  CASTOR_RETURN_IF_ERROR(r.finish());
  CASTOR_RETURN_IF_ERROR(checkClipMax(p.clipMax));
  if (p.clipMax && !p.relu)
    return Status::error("clip_max needs relu: it bounds the activation from above");
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

Expected<AttentionParams> parseAttention(const Kernel &k) {
  AttrReader r(k);
  AttentionParams p;
  // Required: a default would hide a compiler that forgot the 1/sqrt(D).
  std::optional<double> scale = r.optReal("scale");
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (!scale)
    return Status::error("attribute 'scale' is required");
  if (!std::isfinite(*scale))
    return Status::error("scale must be finite");
  p.scale = *scale;
  return p;
}

Expected<SoftmaxCrossEntropyParams> parseSoftmaxCrossEntropy(const Kernel &k) {
  AttrReader r(k);
  SoftmaxCrossEntropyParams p;
  p.labelSmoothing = r.real("label_smoothing", 0.0);
  std::string reduction = r.string("reduction", "mean");
  CASTOR_RETURN_IF_ERROR(r.finish());
  using shape::Reduction;
  auto parsedReduction = oneOf<Reduction>(
      "reduction", reduction, {{"mean", Reduction::Mean}, {"sum", Reduction::Sum}, {"none", Reduction::None}});
  if (!parsedReduction)
    return parsedReduction.status();
  p.reduction = *parsedReduction;
  if (!(p.labelSmoothing >= 0.0 && p.labelSmoothing <= 1.0))
    return Status::error("label_smoothing must be in [0, 1]");
  return p;
}

Expected<TransposeParams> parseTranspose(const Kernel &k) {
  AttrReader r(k);
  TransposeParams p;
  p.perm = r.ints("perm", {});
  CASTOR_RETURN_IF_ERROR(r.finish());
  return p;
}

Expected<SliceParams> parseSlice(const Kernel &k) {
  AttrReader r(k);
  SliceParams p;
  p.starts = r.ints("starts", {});
  p.ends = r.ints("ends", {});
  p.steps = r.ints("steps", {});
  CASTOR_RETURN_IF_ERROR(r.finish());
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

bool isFusedKernel(const Kernel &k) {
  const auto op = opFromName(k.op());
  return op && (isFusedOp(*op) || (*op == OpId::Conv2dBackwardData && k.inputs_size() == 3));
}

} // namespace castor::plan
