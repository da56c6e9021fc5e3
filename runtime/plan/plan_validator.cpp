#include "plan/plan_validator.h"

#include "castor/shape_rules.h"
#include "plan/fused_elementwise.h"
#include "plan/op_attrs.h"
#include "plan/op_registry.h"
#include "plan/storage_order.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace castor::plan {
namespace {

using shape::Shape;

Shape shapeOf(const Tensor &t) { return Shape(t.shape().begin(), t.shape().end()); }

std::string tensorLabel(const Tensor &t) {
  return "tensor " + std::to_string(t.id()) + (t.name().empty() ? "" : " '" + t.name() + "'");
}

bool isFloat(DType d) { return d == F32 || d == F16 || d == BF16 || d == F64; }

shape::ElementType elementTypeOf(const Tensor &t) {
  switch (t.dtype()) {
  case F64: return shape::ElementType::F64;
  case F32: return shape::ElementType::F32;
  case F16: return shape::ElementType::F16;
  case BF16: return shape::ElementType::BF16;
  default: return shape::ElementType::Other;
  }
}

// The operands of one kernel, resolved.
struct KernelView {
  const Kernel &kernel;
  std::vector<const Tensor *> in, out;
};

Status expectArity(const KernelView &k, size_t minIn, size_t maxIn, size_t minOut, size_t maxOut) {
  auto range = [](size_t lo, size_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
  };
  if (k.in.size() < minIn || k.in.size() > maxIn)
    return Status::error("takes " + range(minIn, maxIn) + " inputs, got " + std::to_string(k.in.size()));
  if (k.out.size() < minOut || k.out.size() > maxOut)
    return Status::error("produces " + range(minOut, maxOut) + " outputs, got " +
                         std::to_string(k.out.size()));
  return Status::ok();
}

Status expectFloat(const std::vector<const Tensor *> &ts, const char *what) {
  for (size_t i = 0; i < ts.size(); ++i)
    if (!isFloat(ts[i]->dtype()))
      return Status::error(std::string(what) + " " + std::to_string(i) + " (" + tensorLabel(*ts[i]) +
                           ") must be a floating-point tensor, got " + dtypeName(ts[i]->dtype()));
  return Status::ok();
}

Status expectShape(const Tensor &t, const shape::ShapeResult &r, const char *what) {
  if (!r)
    return Status::error(r.error);
  if (shapeOf(t) != r.shape)
    return Status::error(std::string(what) + " " + tensorLabel(t) + " has shape " + shapeString(t) +
                         ", the operands give " + shape::toString(r.shape));
  return Status::ok();
}

Status expectI64Scalar(const Tensor &t, const char *what) {
  if (t.dtype() != I64 || t.shape_size() != 0)
    return Status::error(std::string(what) + " (" + tensorLabel(t) + ") must be an i64 scalar [], got " +
                         dtypeName(t.dtype()) + " " + shapeString(t));
  return Status::ok();
}

Status expectFloatScalar(const Tensor &t, const char *what) {
  if (!isFloat(t.dtype()) || t.shape_size() != 0)
    return Status::error(std::string(what) + " (" + tensorLabel(t) + ") must be a floating-point scalar [], got " +
                         dtypeName(t.dtype()) + " " + shapeString(t));
  return Status::ok();
}

Status expectF32Scalar(const Tensor &t, const char *what) {
  if (t.dtype() != F32 || t.shape_size() != 0)
    return Status::error(std::string(what) + " (" + tensorLabel(t) + ") must be an f32 scalar [], got " +
                         dtypeName(t.dtype()) + " " + shapeString(t));
  return Status::ok();
}

Status expectSameShape(const Tensor &t, const Tensor &like, const char *what) {
  return expectShape(t, shape::ShapeResult::ok(shapeOf(like)), what);
}

// Output `out` updates input `in` in place: both name the same tensor.
Status expectInPlace(const KernelView &k, size_t out, size_t in) {
  if (k.out[out]->id() != k.in[in]->id())
    return Status::error("output " + std::to_string(out) + " (" + tensorLabel(*k.out[out]) +
                         ") must be input " + std::to_string(in) + " (" + tensorLabel(*k.in[in]) +
                         "): the update is in place");
  return Status::ok();
}

Status expectLabels(const Tensor &t) {
  if (t.dtype() != I64)
    return Status::error("labels (" + tensorLabel(t) + ") must be i64, got " + dtypeName(t.dtype()));
  return Status::ok();
}

Status expectSameDtype(const KernelView &k, const char *hint) {
  if (k.in[0]->dtype() != k.out[0]->dtype())
    return Status::error(std::string("input and output dtypes differ") + hint);
  return Status::ok();
}

// Distinct floating-point gradients g_0..g_{n-1}, each updated in place as output i.
Status expectGradientsInPlace(const KernelView &k, size_t n) {
  std::set<uint32_t> seen;
  for (size_t i = 0; i < n; ++i) {
    CASTOR_RETURN_IF_ERROR(expectFloat({k.in[i]}, "gradient"));
    if (!seen.insert(k.in[i]->id()).second)
      return Status::error("gradient " + std::to_string(i) + " (" + tensorLabel(*k.in[i]) +
                           ") is listed twice");
    CASTOR_RETURN_IF_ERROR(expectInPlace(k, i, i));
  }
  return Status::ok();
}

// --- The rules of each op ------------------------------------------------------------------

// Validates a kernel's attributes, discarding the parsed values.
using AttrCheck = Status (*)(const Kernel &);
template <auto Parse> Status attrs(const Kernel &k) { return Parse(k).status(); }
template <int64_t Fallback> Status axisAttr(const Kernel &k) { return parseAxis(k, Fallback).status(); }
Status noAttrs(const Kernel &k) { return parseNoAttrs(k); }

struct Arity {
  size_t minIn, maxIn, minOut, maxOut;
};
constexpr Arity kAnyArity{0, SIZE_MAX, 0, SIZE_MAX}, kUnary{1, 1, 1, 1}, kBinary{2, 2, 1, 1};

// The leading `inputs` inputs (named `what` in errors) and, with `outputs`, every output must be
// floating-point.
struct Floats {
  size_t inputs;
  const char *what;
  bool outputs;
};
constexpr Floats kAnyDtype{0, "", false}, kFloat{SIZE_MAX, "input", true}, kFloatInputs{SIZE_MAX, "input", false};

using Checker = std::function<Status(const KernelView &)>;

// An op's rule, checked in this order: `first` (attributes), the arity, the floating-point
// operands, `last` (attributes), then `check` (the shapes and whatever else the op needs).
struct OpRule {
  AttrCheck first;
  Arity arity;
  Floats floats;
  AttrCheck last;
  Checker check;
};

Status checkRule(const OpRule &rule, const KernelView &k) {
  if (rule.first)
    CASTOR_RETURN_IF_ERROR(rule.first(k.kernel));
  CASTOR_RETURN_IF_ERROR(expectArity(k, rule.arity.minIn, rule.arity.maxIn, rule.arity.minOut, rule.arity.maxOut));
  const size_t floatInputs = std::min(rule.floats.inputs, k.in.size());
  if (floatInputs > 0)
    CASTOR_RETURN_IF_ERROR(
        expectFloat(std::vector<const Tensor *>(k.in.begin(), k.in.begin() + floatInputs), rule.floats.what));
  if (rule.floats.outputs)
    CASTOR_RETURN_IF_ERROR(expectFloat(k.out, "output"));
  if (rule.last)
    CASTOR_RETURN_IF_ERROR(rule.last(k.kernel));
  return rule.check ? rule.check(k) : Status::ok();
}

// BatchNorm's element-type rule over the data tensors (x, y, dy, dx) and the per-channel ones.
Status batchNormTypes(const std::vector<const Tensor *> &data, const std::vector<const Tensor *> &perChannel) {
  std::vector<shape::ElementType> d, p;
  for (const Tensor *t : data)
    d.push_back(elementTypeOf(*t));
  for (const Tensor *t : perChannel)
    p.push_back(elementTypeOf(*t));
  std::string error = shape::batchNormTypes(d, p);
  return error.empty() ? Status::ok() : Status::error(error);
}

// Output 0 has input 0's shape.
Status sameShapeOutput(const KernelView &k) { return expectSameShape(*k.out[0], *k.in[0], "output"); }

// (dy, saved) -> dx, all of one shape.
Status elementwiseBackwardShapes(const KernelView &k) {
  CASTOR_RETURN_IF_ERROR(expectSameShape(*k.in[1], *k.in[0], "input"));
  return expectSameShape(*k.out[0], *k.in[0], "output");
}

Status broadcastOutput(const KernelView &k) {
  return expectShape(*k.out[0], shape::broadcast(shapeOf(*k.in[0]), shapeOf(*k.in[1])), "output");
}

Status poolOutput(const KernelView &k) {
  auto p = parsePool2d(k.kernel);
  if (!p)
    return p.status();
  return expectShape(*k.out[0], shape::pool2d(shapeOf(*k.in[0]), p->shape), "output");
}

Status dropoutCheck(const KernelView &k) {
  auto p = parseDropout(k.kernel);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(expectFloat({k.in[0]}, "input"));
  CASTOR_RETURN_IF_ERROR(expectFloat(k.out, "output"));
  if (k.in.size() == 2)
    CASTOR_RETURN_IF_ERROR(expectI64Scalar(*k.in[1], "iteration"));
  return expectSameShape(*k.out[0], *k.in[0], "output");
}

// data: (dy, w) -> dx; filter: (x, dy) -> dw. Either way conv2d(x, w) must give dy.
template <bool Data> Status convBackwardCheck(const KernelView &k) {
  auto p = parseConv2d(k.kernel);
  if (!p)
    return p.status();
  const Tensor &dy = Data ? *k.in[0] : *k.in[1];
  Shape x = Data ? shapeOf(*k.out[0]) : shapeOf(*k.in[0]);
  Shape w = Data ? shapeOf(*k.in[1]) : shapeOf(*k.out[0]);
  if (x.size() != 4 || w.size() != 4)
    return Status::error("x and w must be 4-D");
  if (Data && k.in.size() > 2) { // the accumulated gradient: dx's shape and dtype
    const Tensor &acc = *k.in[2], &dx = *k.out[0];
    CASTOR_RETURN_IF_ERROR(expectSameShape(acc, dx, "accumulate"));
    if (acc.dtype() != dx.dtype())
      return Status::error("accumulate (" + tensorLabel(acc) + ") must have dx's dtype " + dtypeName(dx.dtype()) +
                           ", got " + dtypeName(acc.dtype()));
  }
  return expectShape(dy, shape::conv2d(x, w, nullptr, p->shape), "dy");
}

// max: (dy, x) -> dx; avg: (dy) -> dx. pool2d(dx's shape) must give dy.
template <bool IsMax> Status poolBackwardCheck(const KernelView &k) {
  auto p = parsePool2d(k.kernel);
  if (!p)
    return p.status();
  if (IsMax)
    CASTOR_RETURN_IF_ERROR(expectSameShape(*k.out[0], *k.in[1], "output"));
  return expectShape(*k.in[0], shape::pool2d(shapeOf(*k.out[0]), p->shape), "dy");
}

// attention's element-type rule (shared): the data tensors alike, stats f32.
Status attentionTypes(const std::vector<const Tensor *> &data, const Tensor &stats) {
  std::vector<shape::ElementType> d;
  for (const Tensor *t : data)
    d.push_back(elementTypeOf(*t));
  std::string error = shape::attentionTypes(d, elementTypeOf(stats));
  return error.empty() ? Status::ok() : Status::error(error);
}

// attention: q, k, v -> o, stats. attention_backward: q, k, v, o, stats, dO -> dq, dk, dv.
template <bool Backward> Status attentionCheck(const KernelView &k) {
  const Tensor &q = *k.in[0], &key = *k.in[1], &v = *k.in[2];
  const Tensor &o = Backward ? *k.in[3] : *k.out[0], &stats = Backward ? *k.in[4] : *k.out[1];
  std::vector<const Tensor *> data{&q, &key, &v, &o};
  if (Backward)
    data.insert(data.end(), {k.in[5], k.out[0], k.out[1], k.out[2]});
  CASTOR_RETURN_IF_ERROR(attentionTypes(data, stats));
  Shape statsShape;
  auto r = shape::attention(shapeOf(q), shapeOf(key), shapeOf(v), &statsShape);
  CASTOR_RETURN_IF_ERROR(expectShape(o, r, "o"));
  CASTOR_RETURN_IF_ERROR(expectShape(stats, shape::ShapeResult::ok(statsShape), "stats"));
  if (!Backward)
    return Status::ok();
  CASTOR_RETURN_IF_ERROR(expectShape(*k.in[5], r, "dO"));
  CASTOR_RETURN_IF_ERROR(expectSameShape(*k.out[0], q, "dq"));
  CASTOR_RETURN_IF_ERROR(expectSameShape(*k.out[1], key, "dk"));
  return expectSameShape(*k.out[2], v, "dv");
}

// The unary element-wise ops and their gradients (ops.def's CASTOR_ELEMENTWISE_OP lines):
// x -> y and (dy, saved) -> dx, floating-point, of one shape, with the op's attributes.
OpTable<OpRule> elementwiseRules() {
  return {
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                  \
  {OpId::id, {attrs<parseElementwise<elementwise::id>>, kUnary, kFloat, nullptr, sameShapeOutput}},     \
      {OpId::id##Backward,                                                                               \
       {attrs<parseElementwise<elementwise::id>>, kBinary, kFloat, nullptr, elementwiseBackwardShapes}},
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  };
}

// One rule per op of the registry (ops.def); the runtime tests check that none is missing.
const OpTable<OpRule> &rules() {
  static const OpTable<OpRule> table = OpTable<OpRule>{
      // --- Inference ops.
      {OpId::Conv2d,
       {nullptr, {2, 3, 1, 1}, kFloat, nullptr,
        [](const KernelView &k) -> Status {
          auto p = parseConv2d(k.kernel);
          if (!p)
            return p.status();
          Shape bias = k.in.size() == 3 ? shapeOf(*k.in[2]) : Shape{};
          return expectShape(*k.out[0],
                             shape::conv2d(shapeOf(*k.in[0]), shapeOf(*k.in[1]),
                                           k.in.size() == 3 ? &bias : nullptr, p->shape),
                             "output");
        }}},
      {OpId::LayerNorm,
       {nullptr, {3, 3, 3, 3}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          // x, scale, bias -> y, mean, inv_std
          CASTOR_RETURN_IF_ERROR(expectFloat(k.in, "input"));
          CASTOR_RETURN_IF_ERROR(expectFloat(k.out, "output"));
          auto p = parseLayerNorm(k.kernel);
          if (!p)
            return p.status();
          CASTOR_RETURN_IF_ERROR(batchNormTypes({k.in[0], k.out[0]}, {k.in[1], k.in[2], k.out[1], k.out[2]}));
          Shape stats;
          auto r = shape::layerNorm(shapeOf(*k.in[0]), shapeOf(*k.in[1]), shapeOf(*k.in[2]), p->axis, &stats);
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[0], r, "output"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[1], shape::ShapeResult::ok(stats), "mean"));
          return expectShape(*k.out[2], shape::ShapeResult::ok(stats), "inv_std");
        }}},
      {OpId::LayerNormBackward,
       {nullptr, {5, 5, 3, 3}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          // dy, x, scale, mean, inv_std -> dx, dscale, dbias
          CASTOR_RETURN_IF_ERROR(expectFloat(k.in, "input"));
          CASTOR_RETURN_IF_ERROR(expectFloat(k.out, "output"));
          auto p = parseLayerNorm(k.kernel);
          if (!p)
            return p.status();
          CASTOR_RETURN_IF_ERROR(batchNormTypes({k.in[0], k.in[1], k.out[0]},
                                                {k.in[2], k.in[3], k.in[4], k.out[1], k.out[2]}));
          Shape stats;
          const Shape x = shapeOf(*k.in[1]), scale = shapeOf(*k.in[2]);
          auto r = shape::layerNorm(x, scale, scale, p->axis, &stats);
          CASTOR_RETURN_IF_ERROR(expectShape(*k.in[0], r, "output gradient"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[0], r, "input gradient"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.in[3], shape::ShapeResult::ok(stats), "mean"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.in[4], shape::ShapeResult::ok(stats), "inv_std"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[1], shape::ShapeResult::ok(scale), "scale gradient"));
          return expectShape(*k.out[2], shape::ShapeResult::ok(scale), "bias gradient");
        }}},
      {OpId::BatchNormTraining,
       {nullptr, {3, 5, 3, 5}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          // x, scale, bias [, running_mean, running_var] -> y, mean, inv_std
          // [, running_mean', running_var'].
          // With 5 inputs and 3 outputs the running statistics are read-only and unused (their
          // update is batch_norm_running_update).
          if (k.in.size() == 4 || k.out.size() == 4 || k.in.size() < k.out.size())
            return Status::error("takes x, scale, bias -> y, mean, inv_std, optionally with "
                                 "running_mean, running_var as inputs (and as outputs when updated in place)");
          CASTOR_RETURN_IF_ERROR(expectFloat(k.in, "input"));
          CASTOR_RETURN_IF_ERROR(expectFloat(k.out, "output"));
          CASTOR_RETURN_IF_ERROR(attrs<parseBatchNorm>(k.kernel));
          std::vector<const Tensor *> channelTensors(k.in.begin() + 1, k.in.end());
          channelTensors.insert(channelTensors.end(), k.out.begin() + 1, k.out.end());
          CASTOR_RETURN_IF_ERROR(batchNormTypes({k.in[0], k.out[0]}, channelTensors));
          std::vector<Shape> perChannel;
          for (size_t i = 1; i < k.in.size(); ++i)
            perChannel.push_back(shapeOf(*k.in[i]));
          auto r = shape::batchNorm(shapeOf(*k.in[0]), perChannel);
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[0], r, "output"));
          Shape c{k.in[0]->shape_size() > 1 ? k.in[0]->shape(1) : 0};
          for (size_t i = 1; i < k.out.size(); ++i)
            CASTOR_RETURN_IF_ERROR(expectShape(*k.out[i], shape::ShapeResult::ok(c), "output"));
          return Status::ok();
        }}},
      {OpId::BatchNormInference, // x, scale, bias, mean, var -> y
       {nullptr, {5, 5, 1, 1}, kFloat, attrs<parseBatchNorm>,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(batchNormTypes({k.in[0], k.out[0]}, {k.in.begin() + 1, k.in.end()}));
          std::vector<Shape> perChannel;
          for (size_t i = 1; i < 5; ++i)
            perChannel.push_back(shapeOf(*k.in[i]));
          return expectShape(*k.out[0], shape::batchNorm(shapeOf(*k.in[0]), perChannel), "output");
        }}},
      {OpId::Identity,
       {noAttrs, kUnary, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectSameDtype(k, " (use cast)"));
          return sameShapeOutput(k);
        }}},
      {OpId::Cast, {noAttrs, kUnary, kAnyDtype, nullptr, sameShapeOutput}},
      {OpId::Add, {noAttrs, kBinary, kFloat, nullptr, broadcastOutput}},
      {OpId::Mul, {noAttrs, kBinary, kFloat, nullptr, broadcastOutput}},
      {OpId::MaxPool2d, {nullptr, kUnary, kFloat, nullptr, poolOutput}},
      {OpId::AvgPool2d, {nullptr, kUnary, kFloat, nullptr, poolOutput}},
      {OpId::GlobalAvgPool,
       {noAttrs, kUnary, kFloat, nullptr,
        [](const KernelView &k) {
          return expectShape(*k.out[0], shape::globalAvgPool(shapeOf(*k.in[0])), "output");
        }}},
      {OpId::Flatten,
       {nullptr, kUnary, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          auto axis = parseAxis(k.kernel, 1);
          if (!axis)
            return axis.status();
          CASTOR_RETURN_IF_ERROR(expectSameDtype(k, ""));
          return expectShape(*k.out[0], shape::flatten(shapeOf(*k.in[0]), *axis), "output");
        }}},
      {OpId::Reshape,
       {noAttrs, kUnary, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectSameDtype(k, ""));
          return expectShape(*k.out[0], shape::reshape(shapeOf(*k.in[0]), shapeOf(*k.out[0])), "output");
        }}},
      {OpId::Gemm,
       {nullptr, {2, 3, 1, 1}, kFloat, nullptr,
        [](const KernelView &k) -> Status {
          auto p = parseGemm(k.kernel);
          if (!p)
            return p.status();
          Shape c = k.in.size() == 3 ? shapeOf(*k.in[2]) : Shape{};
          return expectShape(*k.out[0],
                             shape::gemm(shapeOf(*k.in[0]), shapeOf(*k.in[1]),
                                         k.in.size() == 3 ? &c : nullptr, p->transA, p->transB),
                             "output");
        }}},
      {OpId::Matmul,
       {noAttrs, kBinary, kFloat, nullptr,
        [](const KernelView &k) {
          return expectShape(*k.out[0], shape::matmul(shapeOf(*k.in[0]), shapeOf(*k.in[1])), "output");
        }}},
      {OpId::Concat,
       {nullptr, {1, SIZE_MAX, 1, 1}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          auto axis = parseAxis(k.kernel, 0);
          if (!axis)
            return axis.status();
          std::vector<Shape> shapes;
          for (const Tensor *t : k.in) {
            if (t->dtype() != k.out[0]->dtype())
              return Status::error("inputs and output must share one dtype");
            shapes.push_back(shapeOf(*t));
          }
          return expectShape(*k.out[0], shape::concat(shapes, *axis), "output");
        }}},
      {OpId::Transpose,
       {nullptr, kUnary, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          auto p = parseTranspose(k.kernel);
          if (!p)
            return p.status();
          if (k.in[0]->dtype() != k.out[0]->dtype())
            return Status::error("input and output must share one dtype");
          return expectShape(*k.out[0], shape::transpose(shapeOf(*k.in[0]), p->perm), "output");
        }}},
      {OpId::Slice,
       {nullptr, kUnary, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          auto p = parseSlice(k.kernel);
          if (!p)
            return p.status();
          if (k.in[0]->dtype() != k.out[0]->dtype())
            return Status::error("input and output must share one dtype");
          return expectShape(*k.out[0], shape::slice(shapeOf(*k.in[0]), p->starts, p->ends, p->steps), "output");
        }}},
      {OpId::Softmax,
       {nullptr, kUnary, kFloat, nullptr,
        [](const KernelView &k) -> Status {
          auto axis = parseAxis(k.kernel, -1);
          if (!axis)
            return axis.status();
          return expectShape(*k.out[0], shape::softmax(shapeOf(*k.in[0]), *axis), "output");
        }}},
      {OpId::SoftmaxCrossEntropy,
       // logits [N, C], labels i64 [N] -> loss [] (mean, sum) or [N] (none) [, probs [N, C]].
       {nullptr, {2, 2, 1, 2}, {1, "logits", true}, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectLabels(*k.in[1]));
          auto p = parseSoftmaxCrossEntropy(k.kernel);
          if (!p)
            return p.status();
          CASTOR_RETURN_IF_ERROR(expectShape(
              *k.out[0], shape::softmaxCrossEntropy(shapeOf(*k.in[0]), shapeOf(*k.in[1]), p->reduction),
              "loss"));
          if (k.out.size() == 2)
            CASTOR_RETURN_IF_ERROR(expectSameShape(*k.out[1], *k.in[0], "probabilities"));
          return Status::ok();
        }}},

      {OpId::Attention, {attrs<parseAttention>, {3, 3, 2, 2}, kAnyDtype, nullptr, attentionCheck<false>}},

      // --- The training step's kernels (backward, optimizer, schedule).
      {OpId::Dropout, {nullptr, {1, 2, 1, 1}, kAnyDtype, nullptr, dropoutCheck}},
      {OpId::DropoutBackward, {nullptr, {2, 2, 1, 1}, kAnyDtype, nullptr, dropoutCheck}},
      {OpId::Conv2dBackwardData, {nullptr, {2, 3, 1, 1}, kFloat, nullptr, convBackwardCheck<true>}},
      {OpId::Conv2dBackwardFilter, {nullptr, kBinary, kFloat, nullptr, convBackwardCheck<false>}},
      {OpId::Conv2dBackwardBias,
       {noAttrs, kUnary, kFloat, nullptr,
        [](const KernelView &k) -> Status {
          if (k.in[0]->shape_size() < 2)
            return Status::error("dy must have rank 2 or more, got " + shapeString(*k.in[0]));
          return expectShape(*k.out[0], shape::ShapeResult::ok({k.in[0]->shape(1)}), "output");
        }}},
      {OpId::ReduceSumTo,
       {nullptr, kUnary, kFloat, attrs<parseReduceSumTo>,
        [](const KernelView &k) -> Status {
          auto r = shape::broadcast(shapeOf(*k.out[0]), shapeOf(*k.in[0]));
          if (!r || r.shape != shapeOf(*k.in[0]))
            return Status::error("output " + tensorLabel(*k.out[0]) + " " + shapeString(*k.out[0]) +
                                 " does not broadcast to the input's shape " + shapeString(*k.in[0]));
          return Status::ok();
        }}},
      {OpId::BatchNormTrainingBackward, // dy, x, scale, batch_mean, batch_inv_std -> dx, dscale, dbias.
       {nullptr, {5, 5, 3, 3}, kFloat, attrs<parseBatchNorm>,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(
              batchNormTypes({k.in[0], k.in[1], k.out[0]}, {k.in[2], k.in[3], k.in[4], k.out[1], k.out[2]}));
          auto r = shape::batchNorm(shapeOf(*k.in[1]), {shapeOf(*k.in[2]), shapeOf(*k.in[3]), shapeOf(*k.in[4])});
          CASTOR_RETURN_IF_ERROR(expectShape(*k.in[0], r, "dy"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[0], r, "dx"));
          CASTOR_RETURN_IF_ERROR(expectSameShape(*k.out[1], *k.in[2], "dscale"));
          return expectSameShape(*k.out[2], *k.in[2], "dbias");
        }}},
      {OpId::BatchNormRunningUpdate,
       // running_mean, running_var, batch_mean, batch_inv_std [, found_inf f32 []]
       //   -> running_mean, running_var (unchanged when found_inf is set).
       {nullptr, {4, 5, 2, 2}, kFloatInputs, attrs<parseBatchNormRunningUpdate>,
        [](const KernelView &k) -> Status {
          if (k.in[0]->shape_size() != 1)
            return Status::error("running_mean must be 1-D [C], got " + shapeString(*k.in[0]));
          if (k.in.size() == 5)
            CASTOR_RETURN_IF_ERROR(expectF32Scalar(*k.in[4], "found_inf"));
          CASTOR_RETURN_IF_ERROR(batchNormTypes({}, {k.in.begin(), k.in.begin() + 4}));
          for (size_t i = 1; i < 4; ++i)
            CASTOR_RETURN_IF_ERROR(expectSameShape(*k.in[i], *k.in[0], "input"));
          CASTOR_RETURN_IF_ERROR(expectInPlace(k, 0, 0));
          return expectInPlace(k, 1, 1);
        }}},
      {OpId::MaxPool2dBackward, {nullptr, kBinary, kFloat, nullptr, poolBackwardCheck<true>}},
      {OpId::AvgPool2dBackward, {nullptr, kUnary, kFloat, nullptr, poolBackwardCheck<false>}},
      {OpId::GlobalAvgPoolBackward,
       {noAttrs, kUnary, kFloat, nullptr,
        [](const KernelView &k) {
          return expectShape(*k.in[0], shape::globalAvgPool(shapeOf(*k.out[0])), "dy");
        }}},
      {OpId::SoftmaxBackward,
       {axisAttr<-1>, kBinary, kFloat, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(elementwiseBackwardShapes(k));
          return expectShape(*k.out[0], shape::softmax(shapeOf(*k.in[1]), *parseAxis(k.kernel, -1)), "output");
        }}},
      {OpId::SoftmaxCrossEntropyBackward, // dloss, logits [N, C], labels i64 [N] -> dlogits [N, C].
       {nullptr, {3, 3, 1, 1}, {2, "input", true}, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectLabels(*k.in[2]));
          auto p = parseSoftmaxCrossEntropy(k.kernel);
          if (!p)
            return p.status();
          CASTOR_RETURN_IF_ERROR(expectShape(
              *k.in[0], shape::softmaxCrossEntropy(shapeOf(*k.in[1]), shapeOf(*k.in[2]), p->reduction), "dloss"));
          return expectSameShape(*k.out[0], *k.in[1], "output");
        }}},
      {OpId::AttentionBackward, {attrs<parseAttention>, {6, 6, 3, 3}, kAnyDtype, nullptr, attentionCheck<true>}},
      {OpId::CountCorrect,
       {noAttrs, kBinary, {1, "logits", false}, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectLabels(*k.in[1]));
          auto r = shape::softmaxCrossEntropy(shapeOf(*k.in[0]), shapeOf(*k.in[1]), shape::Reduction::Mean);
          if (!r)
            return Status::error(r.error);
          return expectI64Scalar(*k.out[0], "output");
        }}},
      {OpId::SliceBackward,
       {nullptr, kUnary, kFloat, nullptr,
        [](const KernelView &k) -> Status {
          auto p = parseSlice(k.kernel);
          if (!p)
            return p.status();
          if (k.in[0]->dtype() != k.out[0]->dtype())
            return Status::error("input and output must share one dtype");
          return expectShape(*k.in[0], shape::slice(shapeOf(*k.out[0]), p->starts, p->ends, p->steps),
                             "output gradient");
        }}},
      {OpId::Split,
       {nullptr, {1, 1, 1, SIZE_MAX}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          auto axis = parseAxis(k.kernel, 0);
          if (!axis)
            return axis.status();
          std::vector<Shape> shapes;
          for (const Tensor *t : k.out) {
            if (t->dtype() != k.in[0]->dtype())
              return Status::error("input and outputs must share one dtype");
            shapes.push_back(shapeOf(*t));
          }
          auto r = shape::concat(shapes, *axis);
          if (!r)
            return Status::error("the outputs are not slices of one tensor: " + r.error);
          if (r.shape != shapeOf(*k.in[0]))
            return Status::error("the outputs concatenate to " + shape::toString(r.shape) +
                                 ", not to the input's " + shapeString(*k.in[0]));
          return Status::ok();
        }}},
      {OpId::SgdUpdate,
       // param, grad, momentum_buffer, lr [] [, step i64 []] [, found_inf f32 []] -> param, momentum_buffer.
       {nullptr, {4, 6, 2, 2}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          auto p = parseSgd(k.kernel);
          if (!p)
            return p.status();
          // A last input that is not an i64 is the overflow flag (found_inf).
          const bool flagged = k.in.size() == 6 || (k.in.size() == 5 && k.in[4]->dtype() != I64);
          if (flagged)
            CASTOR_RETURN_IF_ERROR(expectF32Scalar(*k.in.back(), "found_inf"));
          const size_t plain = k.in.size() - (flagged ? 1 : 0);
          if (p->momentum != 0 && plain != 5)
            return Status::error("with momentum, the step counter (i64 []) is the 5th input");
          CASTOR_RETURN_IF_ERROR(expectFloat({k.in[0], k.in[1], k.in[2]}, "input"));
          CASTOR_RETURN_IF_ERROR(expectSameShape(*k.in[1], *k.in[0], "grad"));
          CASTOR_RETURN_IF_ERROR(expectSameShape(*k.in[2], *k.in[0], "momentum_buffer"));
          CASTOR_RETURN_IF_ERROR(expectFloatScalar(*k.in[3], "lr"));
          if (plain == 5)
            CASTOR_RETURN_IF_ERROR(expectI64Scalar(*k.in[4], "step"));
          CASTOR_RETURN_IF_ERROR(expectInPlace(k, 0, 0));
          return expectInPlace(k, 1, 2);
        }}},
      {OpId::AdamwUpdate,
       // param, grad, exp_avg, exp_avg_sq, lr [], step i64 [] [, found_inf f32 []]
       //   -> param, exp_avg, exp_avg_sq.
       {nullptr, {6, 7, 3, 3}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          if (k.in.size() == 7)
            CASTOR_RETURN_IF_ERROR(expectF32Scalar(*k.in[6], "found_inf"));
          CASTOR_RETURN_IF_ERROR(attrs<parseAdamW>(k.kernel));
          CASTOR_RETURN_IF_ERROR(expectFloat({k.in[0], k.in[1], k.in[2], k.in[3]}, "input"));
          for (size_t i = 1; i < 4; ++i)
            CASTOR_RETURN_IF_ERROR(expectSameShape(*k.in[i], *k.in[0], "input"));
          CASTOR_RETURN_IF_ERROR(expectFloatScalar(*k.in[4], "lr"));
          CASTOR_RETURN_IF_ERROR(expectI64Scalar(*k.in[5], "step"));
          CASTOR_RETURN_IF_ERROR(expectInPlace(k, 0, 0));
          CASTOR_RETURN_IF_ERROR(expectInPlace(k, 1, 2));
          return expectInPlace(k, 2, 3);
        }}},
      {OpId::AllReduce, // t_0..t_{n-1} -> t_0..t_{n-1} (in place), reduced across the replicas.
       {attrs<parseAllReduce>, kAnyArity, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          if (k.in.empty() || k.out.size() != k.in.size())
            return Status::error("takes n >= 1 tensors and writes the same n in place, got " +
                                 std::to_string(k.in.size()) + " inputs and " + std::to_string(k.out.size()) +
                                 " outputs");
          auto p = parseAllReduce(k.kernel);
          std::set<uint32_t> seen;
          for (size_t i = 0; i < k.in.size(); ++i) {
            if (!seen.insert(k.in[i]->id()).second)
              return Status::error("tensor " + std::to_string(i) + " (" + tensorLabel(*k.in[i]) + ") is listed twice");
            CASTOR_RETURN_IF_ERROR(expectInPlace(k, i, i));
            if (p && p->reduction == ReplicaReduction::Mean)
              CASTOR_RETURN_IF_ERROR(expectFloat({k.in[i]}, "a mean's tensor"));
          }
          return Status::ok();
        }}},
      {OpId::Increment, // counter i64 [] [, flag f32 []] -> counter.
       {attrs<parseIncrement>, {1, 2, 1, 1}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectI64Scalar(*k.in[0], "counter"));
          if (k.in.size() == 2)
            CASTOR_RETURN_IF_ERROR(expectF32Scalar(*k.in[1], "flag"));
          return expectInPlace(k, 0, 0);
        }}},
      {OpId::LrSchedule,
       {nullptr, kUnary, kAnyDtype, attrs<parseLrSchedule>,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectI64Scalar(*k.in[0], "iteration"));
          return expectFloatScalar(*k.out[0], "lr");
        }}},
      {OpId::Fill, {nullptr, {0, 0, 1, 1}, kAnyDtype, attrs<parseFill>, nullptr}},

      // --- Mixed-precision kernels (loss scaling, gradient clipping, statistics); the
      // overflow-flag forms of sgd_update, adamw_update and increment are above.
      {OpId::UnscaleGradients, // g_0..g_{n-1}, scale f32 [] -> g_0..g_{n-1} (in place), found_inf f32 [].
       {noAttrs, kAnyArity, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          if (k.in.size() < 2 || k.out.size() != k.in.size())
            return Status::error("takes n >= 1 gradients and the scale, and produces the n gradients and "
                                 "found_inf (n + 1 inputs and n + 1 outputs), got " +
                                 std::to_string(k.in.size()) + " inputs and " + std::to_string(k.out.size()) +
                                 " outputs");
          const size_t n = k.in.size() - 1;
          CASTOR_RETURN_IF_ERROR(expectGradientsInPlace(k, n));
          CASTOR_RETURN_IF_ERROR(expectF32Scalar(*k.in[n], "scale"));
          return expectF32Scalar(*k.out[n], "found_inf");
        }}},
      {OpId::ClipGradNorm, // g_0..g_{n-1} -> g_0..g_{n-1} (in place), total_norm f32 [].
       {attrs<parseClipGradNorm>, kAnyArity, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          if (k.in.empty() || k.out.size() != k.in.size() + 1)
            return Status::error("takes n >= 1 gradients and produces the n gradients and total_norm (n + 1 "
                                 "outputs), got " +
                                 std::to_string(k.in.size()) + " inputs and " + std::to_string(k.out.size()) +
                                 " outputs");
          const size_t n = k.in.size();
          CASTOR_RETURN_IF_ERROR(expectGradientsInPlace(k, n));
          return expectF32Scalar(*k.out[n], "total_norm");
        }}},
      {OpId::UpdateLossScale,
       // scale f32 [], growth_tracker i64 [], found_inf f32 [] -> scale, growth_tracker (in place).
       {attrs<parseUpdateLossScale>, {3, 3, 2, 2}, kAnyDtype, nullptr,
        [](const KernelView &k) -> Status {
          CASTOR_RETURN_IF_ERROR(expectF32Scalar(*k.in[0], "scale"));
          CASTOR_RETURN_IF_ERROR(expectI64Scalar(*k.in[1], "growth_tracker"));
          CASTOR_RETURN_IF_ERROR(expectF32Scalar(*k.in[2], "found_inf"));
          CASTOR_RETURN_IF_ERROR(expectInPlace(k, 0, 0));
          return expectInPlace(k, 1, 1);
        }}},
      {OpId::GradientStats, // g -> f32 [3]: mean |g|, max |g| (finite elements), count of non-finite elements.
       {noAttrs, kUnary, kFloatInputs, nullptr,
        [](const KernelView &k) -> Status {
          const Tensor &y = *k.out[0];
          if (y.dtype() != F32 || y.shape_size() != 1 || y.shape(0) != 3)
            return Status::error("output (" + tensorLabel(y) + ") must be f32 [3], got " + dtypeName(y.dtype()) +
                                 " " + shapeString(y));
          return Status::ok();
        }}},

      {OpId::BatchNormApply, // x, scale, bias, batch_mean, batch_inv_std [, z] -> y.
       {nullptr, {5, 6, 1, 1}, kFloat, attrs<parseBatchNormApply>,
        [](const KernelView &k) -> Status {
          std::vector<const Tensor *> data{k.in[0], k.out[0]};
          if (k.in.size() == 6 && k.kernel.attrs().count("clip_max"))
            return Status::error("clip_max takes no residual");
          if (k.in.size() == 6) {
            CASTOR_RETURN_IF_ERROR(expectSameShape(*k.in[5], *k.in[0], "residual"));
            data.push_back(k.in[5]);
          }
          CASTOR_RETURN_IF_ERROR(batchNormTypes(data, {k.in[1], k.in[2], k.in[3], k.in[4]}));
          auto r = shape::batchNorm(shapeOf(*k.in[0]),
                                    {shapeOf(*k.in[1]), shapeOf(*k.in[2]), shapeOf(*k.in[3]), shapeOf(*k.in[4])});
          return expectShape(*k.out[0], r, "output");
        }}},

      // --- Fused ops: the rules of the ops each replaces.
      {OpId::BatchNormReluTraining, // x, scale, bias [, z] -> y, batch_mean, batch_inv_std.
       {nullptr, {3, 4, 3, 3}, kFloat, attrs<parseBatchNormRelu>,
        [](const KernelView &k) -> Status {
          std::vector<const Tensor *> data{k.in[0], k.out[0]};
          if (k.in.size() == 4 && k.kernel.attrs().count("clip_max"))
            return Status::error("clip_max takes no residual");
          if (k.in.size() == 4) {
            CASTOR_RETURN_IF_ERROR(expectSameShape(*k.in[3], *k.in[0], "residual"));
            data.push_back(k.in[3]);
          }
          CASTOR_RETURN_IF_ERROR(batchNormTypes(data, {k.in[1], k.in[2], k.out[1], k.out[2]}));
          auto r = shape::batchNorm(shapeOf(*k.in[0]), {shapeOf(*k.in[1]), shapeOf(*k.in[2])});
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[0], r, "output"));
          CASTOR_RETURN_IF_ERROR(expectSameShape(*k.out[1], *k.in[1], "batch_mean"));
          return expectSameShape(*k.out[2], *k.in[1], "batch_inv_std");
        }}},
      {OpId::BatchNormReluTrainingBackward,
       // dy, x, y, scale, bias, batch_mean, batch_inv_std -> dx, dscale, dbias [, dz].
       {nullptr, {7, 7, 3, 4}, kFloat, attrs<parseBatchNormRelu>,
        [](const KernelView &k) -> Status {
          if (k.out.size() == 4 && k.kernel.attrs().count("clip_max"))
            return Status::error("clip_max takes no residual gradient");
          std::vector<const Tensor *> data{k.in[0], k.in[1], k.in[2], k.out[0]};
          if (k.out.size() == 4)
            data.push_back(k.out[3]);
          CASTOR_RETURN_IF_ERROR(
              batchNormTypes(data, {k.in[3], k.in[4], k.in[5], k.in[6], k.out[1], k.out[2]}));
          auto r = shape::batchNorm(shapeOf(*k.in[1]),
                                    {shapeOf(*k.in[3]), shapeOf(*k.in[4]), shapeOf(*k.in[5]), shapeOf(*k.in[6])});
          CASTOR_RETURN_IF_ERROR(expectShape(*k.in[0], r, "dy"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.in[2], r, "y"));
          CASTOR_RETURN_IF_ERROR(expectShape(*k.out[0], r, "dx"));
          if (k.out.size() == 4)
            CASTOR_RETURN_IF_ERROR(expectShape(*k.out[3], r, "dz"));
          CASTOR_RETURN_IF_ERROR(expectSameShape(*k.out[1], *k.in[3], "dscale"));
          return expectSameShape(*k.out[2], *k.in[3], "dbias");
        }}},
      // inputs -> outputs of one shape (the domain) that each input broadcasts to; the
      // `program` read against the operands' dtypes (plan/fused_elementwise.h).
      {OpId::FusedElementwise,
       {nullptr, {0, SIZE_MAX, 1, SIZE_MAX}, kFloat, nullptr,
        [](const KernelView &k) { return parseFusedElementwise(k.kernel, k.in, k.out).status(); }}},
  }.merge(elementwiseRules());
  return table;
}

} // namespace

std::vector<OpId> opsWithRules() { return rules().implemented(); }

std::string describeKernel(const Plan &plan, int index) {
  const Kernel &k = plan.kernels(index);
  return "kernel #" + std::to_string(index) + " (" + k.op() + (k.name().empty() ? "" : " '" + k.name() + "'") +
         ")";
}

std::unordered_map<uint32_t, LiveRange> computeLiveRanges(const Plan &plan) {
  const int64_t n = plan.kernels_size();
  std::unordered_map<uint32_t, LiveRange> ranges;
  std::unordered_map<uint32_t, int64_t> firstWrite, lastRead;
  for (int64_t i = 0; i < n; ++i) {
    const Kernel &k = plan.kernels(int(i));
    for (uint32_t id : k.outputs())
      firstWrite.emplace(id, i);
    for (uint32_t id : k.inputs())
      lastRead[id] = i;
  }
  for (const Tensor &t : plan.tensors()) {
    LiveRange r;
    auto w = firstWrite.find(t.id());
    auto rd = lastRead.find(t.id());
    switch (t.kind()) {
    case Tensor::INPUT:
      r.begin = -1;
      r.end = rd != lastRead.end() ? rd->second : -1;
      break;
    case Tensor::PARAMETER: // Kept from one step to the next, like state.
    case Tensor::STATE:
      r.begin = -1;
      r.end = n;
      break;
    case Tensor::OUTPUT:
      r.begin = w != firstWrite.end() ? w->second : -1;
      r.end = n;
      break;
    default:
      r.begin = w != firstWrite.end() ? w->second : (rd != lastRead.end() ? -1 : 0);
      r.end = rd != lastRead.end() ? rd->second : r.begin;
      r.end = std::max(r.end, r.begin);
      break;
    }
    ranges[t.id()] = r;
  }
  // A view and the tensor it reads are one buffer: each is live while any of them is.
  const auto roots = viewRoots(plan);
  std::unordered_map<uint32_t, LiveRange> groups;
  for (const auto &[id, root] : roots) {
    const LiveRange &r = ranges[id];
    auto [it, fresh] = groups.emplace(root, r);
    if (!fresh) {
      it->second.begin = std::min(it->second.begin, r.begin);
      it->second.end = std::max(it->second.end, r.end);
    }
  }
  for (const auto &[id, root] : roots)
    ranges[id] = groups[root];
  return ranges;
}

// The kernels that may write a view of their first operand: reshapes, and transposes between
// [N,C,H,W] stored channels-last and [N,H,W,C] (plan/storage_order.h).
static bool writesView(const Kernel &k, OpId op) {
  if (op == OpId::Reshape || op == OpId::Flatten || op == OpId::Identity)
    return true;
  if (op != OpId::Transpose)
    return false;
  auto p = parseTranspose(k);
  return p && isChannelsLastPerm(p->perm);
}

std::unordered_map<uint32_t, uint32_t> viewRoots(const Plan &plan) {
  std::unordered_map<uint32_t, uint32_t> viewOf;
  for (const Tensor &t : plan.tensors())
    if (t.has_view_of())
      viewOf[t.id()] = t.view_of();
  std::unordered_map<uint32_t, uint32_t> roots;
  for (const auto &[view, source] : viewOf) {
    uint32_t id = view;
    for (size_t steps = 0; steps <= viewOf.size(); ++steps) { // bounded: validatePlan refuses cycles
      auto it = viewOf.find(id);
      if (it == viewOf.end())
        break;
      id = it->second;
    }
    roots[view] = id;
    roots[id] = id;
  }
  return roots;
}

Status validatePlan(const Plan &plan) {
  if (plan.format_version() != kPlanFormatVersion)
    return Status::error("unsupported plan format version " + std::to_string(plan.format_version()) +
                         " (this runtime reads version " + std::to_string(kPlanFormatVersion) + ")");
  if (plan.batch() < 0)
    return Status::error("negative batch " + std::to_string(plan.batch()));
  if (plan.reserve_bytes() > plan.workspace_limit_bytes())
    return Status::error("reserve of " + std::to_string(plan.reserve_bytes()) +
                         " bytes beyond the workspace limit of " + std::to_string(plan.workspace_limit_bytes()));

  // Tensors.
  std::unordered_map<uint32_t, const Tensor *> byId;
  for (const Tensor &t : plan.tensors()) {
    std::string label = tensorLabel(t);
    if (!byId.emplace(t.id(), &t).second)
      return Status::error("duplicate tensor id " + std::to_string(t.id()));
    if (dtypeSize(t.dtype()) == 0)
      return Status::error(label + " has no valid dtype");
    if (!Tensor::Kind_IsValid(t.kind()) || t.kind() == Tensor::KIND_UNSPECIFIED)
      return Status::error(label + " has no valid kind");
    auto count = elementCount(t);
    if (!count)
      return Status::error(label + " has an invalid shape " + shapeString(t));
    uint64_t expected;
    if (__builtin_mul_overflow(uint64_t(*count), dtypeSize(t.dtype()), &expected))
      return Status::error(label + " is too large");
    if (t.bytes() != expected)
      return Status::error(label + " " + shapeString(t) + " " + dtypeName(t.dtype()) + " needs " +
                           std::to_string(expected) + " bytes, the plan says " + std::to_string(t.bytes()));
    if (t.offset() % kArenaAlignment != 0)
      return Status::error(label + " has misaligned arena offset " + std::to_string(t.offset()) +
                           " (must be a multiple of " + std::to_string(kArenaAlignment) + ")");
    uint64_t end;
    if (__builtin_add_overflow(t.offset(), t.bytes(), &end) || end > plan.arena_bytes())
      return Status::error(label + " slot [" + std::to_string(t.offset()) + ", " +
                           std::to_string(t.offset() + t.bytes()) + ") is out of bounds of the arena (" +
                           std::to_string(plan.arena_bytes()) + " bytes)");
  }

  // Views: another shape of an activation's bytes.
  for (const Tensor &t : plan.tensors()) {
    if (!t.has_view_of())
      continue;
    auto src = byId.find(t.view_of());
    if (src == byId.end() || t.view_of() == t.id())
      return Status::error(tensorLabel(t) + " is a view of tensor id " + std::to_string(t.view_of()) +
                           ", which does not exist");
    const Tensor &s = *src->second;
    if (t.kind() != Tensor::ACTIVATION || s.kind() != Tensor::ACTIVATION)
      return Status::error(tensorLabel(t) + " is a view of " + tensorLabel(s) + ": views join activations only");
    if (t.offset() != s.offset() || t.bytes() != s.bytes() || t.dtype() != s.dtype())
      return Status::error(tensorLabel(t) + " is a view of " + tensorLabel(s) +
                           " but differs in offset, bytes or dtype");
  }
  const auto viewRootOf = viewRoots(plan);

  // Kernels.
  std::set<uint32_t> written;
  for (int i = 0; i < plan.kernels_size(); ++i) {
    const Kernel &k = plan.kernels(i);
    auto where = [&] { return describeKernel(plan, i); };
    if (k.op().empty())
      return Status::error(where() + ": empty op name");
    KernelView view{k, {}, {}};
    for (uint32_t id : k.inputs()) {
      auto it = byId.find(id);
      if (it == byId.end())
        return Status::error(where() + ": input tensor id " + std::to_string(id) + " does not exist");
      const Tensor &t = *it->second;
      if ((t.kind() == Tensor::ACTIVATION || t.kind() == Tensor::OUTPUT) && !written.count(id))
        return Status::error(where() + " reads " + tensorLabel(t) + " before any kernel writes it");
      view.in.push_back(&t);
    }
    for (uint32_t id : k.outputs()) {
      auto it = byId.find(id);
      if (it == byId.end())
        return Status::error(where() + ": output tensor id " + std::to_string(id) + " does not exist");
      if (it->second->kind() == Tensor::INPUT)
        return Status::error(where() + " writes input " + tensorLabel(*it->second));
      view.out.push_back(it->second);
    }
    const auto op = opFromName(k.op());
    if (!op)
      return Status::error(where() + ": unknown op '" + k.op() + "'");
    // A view's bytes are written once, by its source's producer; the view's own kernel (a
    // reshape of the source) copies nothing.
    for (const Tensor *t : view.out) {
      if (viewRootOf.count(t->id()) && written.count(t->id()))
        return Status::error(where() + " writes " + tensorLabel(*t) + " again, but views share its bytes");
      if (t->has_view_of() && (view.out.size() != 1 || view.in.empty() || view.in[0]->id() != t->view_of() ||
                               !writesView(k, *op)))
        return Status::error(where() + " writes " + tensorLabel(*t) + ", a view of tensor id " +
                             std::to_string(t->view_of()) +
                             ": only a reshape, flatten or identity of that tensor may, or a transpose between "
                             "[N,C,H,W] and [N,H,W,C] (perm 0,2,3,1 or 0,3,1,2)");
    }
    if (const OpRule *rule = rules().find(*op))
      CASTOR_RETURN_IF_ERROR(checkRule(*rule, view).withContext(where()));
    else
      return Status::error(where() + ": the validator has no rule for op '" + k.op() + "'");
    for (uint32_t id : k.outputs())
      written.insert(id);
  }
  if (auto conflicts = conflictingTransposedViews(plan); !conflicts.empty())
    return Status::error(describeKernel(plan, conflicts.front()) +
                         " is a transposed view, but its [N,C,H,W] side cannot be stored channels-last or its "
                         "[N,H,W,C] side row-major (another kernel needs the other order)");
  for (const Tensor &t : plan.tensors())
    if (t.has_view_of() && !written.count(t.id()))
      return Status::error("no kernel writes " + tensorLabel(t) + ", a view of tensor id " +
                           std::to_string(t.view_of()));
  for (const Tensor &t : plan.tensors())
    if (t.kind() == Tensor::OUTPUT && !written.count(t.id()))
      return Status::error("no kernel writes output " + tensorLabel(t));

  // Parameters.
  std::set<std::string> names;
  for (const Parameter &p : plan.parameters()) {
    std::string label = "parameter '" + p.name() + "'";
    if (p.name().empty())
      return Status::error("a parameter has no name (tensor " + std::to_string(p.tensor()) + ")");
    if (!names.insert(p.name()).second)
      return Status::error("duplicate " + label);
    auto it = byId.find(p.tensor());
    if (it == byId.end())
      return Status::error(label + ": tensor id " + std::to_string(p.tensor()) + " does not exist");
    if (it->second->kind() != Tensor::PARAMETER && it->second->kind() != Tensor::STATE)
      return Status::error(label + ": " + tensorLabel(*it->second) + " is a " +
                           kindName(it->second->kind()) + ", not a parameter or state");
    switch (p.init()) {
    case Parameter::FILE:
    case Parameter::ZEROS:
    case Parameter::ONES:
      break;
    case Parameter::FILL:
      if (!isFloat(it->second->dtype()))
        return Status::error(label + ": fill needs a floating-point tensor, got " +
                             dtypeName(it->second->dtype()));
      if (!std::isfinite(p.init_value()))
        return Status::error(label + ": fill needs a finite init_value");
      break;
    case Parameter::KAIMING_NORMAL:
      if (p.fan_out() <= 0)
        return Status::error(label + ": kaiming_normal needs a positive fan_out");
      break;
    case Parameter::LINEAR_UNIFORM:
      if (p.fan_in() <= 0)
        return Status::error(label + ": linear_uniform needs a positive fan_in");
      break;
    default:
      return Status::error(label + " has no valid initializer");
    }
    if (!isFloat(it->second->dtype()) && p.init() != Parameter::FILE && p.init() != Parameter::ZEROS &&
        p.init() != Parameter::ONES)
      return Status::error(label + ": random initialization needs a floating-point tensor");
  }

  // Bindings.
  auto checkBindings = [&](const auto &bindings, Tensor::Kind kind, const char *what) -> Status {
    std::set<std::string> seen;
    for (const Binding &b : bindings) {
      if (!seen.insert(b.name()).second)
        return Status::error("duplicate " + std::string(what) + " binding '" + b.name() + "'");
      auto it = byId.find(b.tensor());
      if (it == byId.end())
        return Status::error(std::string(what) + " '" + b.name() + "': tensor id " +
                             std::to_string(b.tensor()) + " does not exist");
      if (it->second->kind() != kind && it->second->kind() != Tensor::STATE)
        return Status::error(std::string(what) + " '" + b.name() + "' is bound to " +
                             tensorLabel(*it->second) + ", a " + kindName(it->second->kind()));
    }
    return Status::ok();
  };
  CASTOR_RETURN_IF_ERROR(checkBindings(plan.inputs(), Tensor::INPUT, "input"));
  CASTOR_RETURN_IF_ERROR(checkBindings(plan.outputs(), Tensor::OUTPUT, "output"));

  // Tensors live at the same time must not share arena bytes.
  auto ranges = computeLiveRanges(plan);
  std::vector<const Tensor *> sorted;
  for (const Tensor &t : plan.tensors())
    if (t.bytes() > 0)
      sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const Tensor *a, const Tensor *b) { return a->offset() < b->offset(); });
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Tensor &a = *sorted[i];
    const LiveRange &ra = ranges[a.id()];
    for (size_t j = i + 1; j < sorted.size() && sorted[j]->offset() < a.offset() + a.bytes(); ++j) {
      const Tensor &b = *sorted[j];
      const LiveRange &rb = ranges[b.id()];
      auto ga = viewRootOf.find(a.id()), gb = viewRootOf.find(b.id());
      if (ga != viewRootOf.end() && gb != viewRootOf.end() && ga->second == gb->second)
        continue; // one buffer seen in two shapes
      if (ra.begin <= rb.end && rb.begin <= ra.end) {
        auto when = [&](int64_t k) {
          return k < 0 ? std::string("start") : k >= plan.kernels_size() ? std::string("end")
                                                                          : "#" + std::to_string(k);
        };
        return Status::error(tensorLabel(a) + " [" + std::to_string(a.offset()) + ", " +
                             std::to_string(a.offset() + a.bytes()) + ") and " + tensorLabel(b) + " [" +
                             std::to_string(b.offset()) + ", " + std::to_string(b.offset() + b.bytes()) +
                             ") overlap in the arena while both are live (kernels " + when(ra.begin) +
                             ".." + when(ra.end) + " and " + when(rb.begin) + ".." + when(rb.end) + ")");
      }
    }
  }
  return Status::ok();
}

} // namespace castor::plan
