#include <optional>
#include "castor/shape_rules.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace castor::shape {
namespace {

// Every dimension must be known (non-negative) before a rule can reason about it.
std::string checkStatic(const Shape &s, const char *what) {
  for (int64_t d : s)
    if (d < 0)
      return std::string(what) + " has a dynamic or negative dimension " + toString(s);
  if (!elementCount(s))
    return std::string(what) + " has too many elements " + toString(s);
  return {};
}

bool mulOverflows(int64_t a, int64_t b, int64_t &out) {
  return __builtin_mul_overflow(a, b, &out);
}

std::string checkLength(const std::vector<int64_t> &v, size_t n, const char *what) {
  if (v.size() != n)
    return std::string(what) + " must have " + std::to_string(n) + " values, got " +
           std::to_string(v.size());
  return {};
}

// Output extent of a sliding window, or nullopt when the window does not fit.
std::optional<int64_t> windowExtent(int64_t in, int64_t padBegin, int64_t padEnd, int64_t kernel,
                                    int64_t stride, int64_t dilation, bool ceilMode) {
  int64_t effective;
  if (mulOverflows(dilation, kernel - 1, effective))
    return std::nullopt;
  effective += 1;
  int64_t padded = in + padBegin + padEnd;
  if (padded < effective)
    return std::nullopt;
  int64_t span = padded - effective;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // As in PyTorch and ONNX: the last window of ceil mode must start inside the input or left pad.
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

std::string checkWindowAttrs(const std::vector<int64_t> &kernel, const std::vector<int64_t> &strides,
                             const std::vector<int64_t> &pads, const std::vector<int64_t> &dilations) {
  for (auto *e : {&kernel, &strides, &dilations})
    for (int64_t v : *e)
      if (v < 1 || v > (int64_t(1) << 31))
        return "kernel, strides and dilations must be positive, got " + toString(*e);
  for (int64_t p : pads)
    if (p < 0 || p > (int64_t(1) << 31))
      return "pads must be non-negative, got " + toString(pads);
  return {};
}

} // namespace

std::optional<int64_t> elementCount(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || mulOverflows(n, d, n))
      return std::nullopt;
  }
  return n;
}

std::string toString(const Shape &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

ShapeResult conv2d(const Shape &x, const Shape &w, const Shape *bias, const Conv2dAttrs &a) {
  if (x.size() != 4)
    return ShapeResult::fail("input must be rank 4 [N, C, H, W], got " + toString(x));
  if (w.size() != 4)
    return ShapeResult::fail("filter must be rank 4 [K, C/groups, R, S], got " + toString(w));
  for (auto e : {checkStatic(x, "input"), checkStatic(w, "filter"), checkLength(a.strides, 2, "strides"),
                 checkLength(a.pads, 4, "pads"), checkLength(a.dilations, 2, "dilations"),
                 checkWindowAttrs({w[2], w[3]}, a.strides, a.pads, a.dilations)})
    if (!e.empty())
      return ShapeResult::fail(e);
  if (a.groups < 1)
    return ShapeResult::fail("groups must be positive, got " + std::to_string(a.groups));
  if (x[1] % a.groups != 0 || w[0] % a.groups != 0)
    return ShapeResult::fail("input channels " + std::to_string(x[1]) + " and output channels " +
                             std::to_string(w[0]) + " must be divisible by groups " +
                             std::to_string(a.groups));
  if (w[1] * a.groups != x[1])
    return ShapeResult::fail("filter " + toString(w) + " expects " + std::to_string(w[1] * a.groups) +
                             " input channels, input " + toString(x) + " has " + std::to_string(x[1]));
  if (bias && (bias->size() != 1 || (*bias)[0] != w[0]))
    return ShapeResult::fail("bias must be [" + std::to_string(w[0]) + "], got " + toString(*bias));
  Shape out{x[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    auto e = windowExtent(x[2 + i], a.pads[i], a.pads[2 + i], w[2 + i], a.strides[i], a.dilations[i], false);
    if (!e)
      return ShapeResult::fail("filter " + toString(w) + " does not fit the padded input " + toString(x));
    out[2 + i] = *e;
  }
  return ShapeResult::ok(out);
}

ShapeResult pool2d(const Shape &x, const Pool2dAttrs &a) {
  if (x.size() != 4)
    return ShapeResult::fail("input must be rank 4 [N, C, H, W], got " + toString(x));
  for (auto e : {checkStatic(x, "input"), checkLength(a.kernel, 2, "kernel"), checkLength(a.strides, 2, "strides"),
                 checkLength(a.pads, 4, "pads"), checkLength(a.dilations, 2, "dilations")})
    if (!e.empty())
      return ShapeResult::fail(e);
  if (auto e = checkWindowAttrs(a.kernel, a.strides, a.pads, a.dilations); !e.empty())
    return ShapeResult::fail(e);
  for (int i = 0; i < 2; ++i)
    if (a.pads[i] >= a.kernel[i] || a.pads[2 + i] >= a.kernel[i])
      return ShapeResult::fail("pads " + toString(a.pads) + " must be smaller than the kernel " +
                               toString(a.kernel));
  Shape out{x[0], x[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    auto e = windowExtent(x[2 + i], a.pads[i], a.pads[2 + i], a.kernel[i], a.strides[i], a.dilations[i], a.ceilMode);
    if (!e)
      return ShapeResult::fail("kernel " + toString(a.kernel) + " does not fit the padded input " + toString(x));
    out[2 + i] = *e;
  }
  return ShapeResult::ok(out);
}

ShapeResult globalAvgPool(const Shape &x) {
  if (x.size() < 3)
    return ShapeResult::fail("input must have rank >= 3 [N, C, d...], got " + toString(x));
  if (auto e = checkStatic(x, "input"); !e.empty())
    return ShapeResult::fail(e);
  Shape out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  return ShapeResult::ok(out);
}

ShapeResult batchNorm(const Shape &x, const std::vector<Shape> &perChannel) {
  if (x.size() < 2)
    return ShapeResult::fail("input must have rank >= 2 [N, C, ...], got " + toString(x));
  if (auto e = checkStatic(x, "input"); !e.empty())
    return ShapeResult::fail(e);
  for (const Shape &p : perChannel)
    if (p.size() != 1 || p[0] != x[1])
      return ShapeResult::fail("per-channel operands must be [" + std::to_string(x[1]) + "], got " +
                               toString(p));
  return ShapeResult::ok(x);
}

const char *toString(ElementType type) {
  switch (type) {
  case ElementType::F64: return "f64";
  case ElementType::F32: return "f32";
  case ElementType::F16: return "f16";
  case ElementType::BF16: return "bf16";
  case ElementType::Other: break;
  }
  return "a non-floating-point type";
}

std::string batchNormTypes(const std::vector<ElementType> &data, const std::vector<ElementType> &perChannel) {
  for (const auto *group : {&data, &perChannel})
    for (ElementType t : *group)
      if (t == ElementType::Other)
        return "operands must be floating-point (f64, f32, f16 or bf16)";
  auto firstMismatch = [](const std::vector<ElementType> &ts) {
    return std::find_if(ts.begin(), ts.end(), [&](ElementType t) { return t != ts.front(); });
  };
  if (auto it = firstMismatch(data); it != data.end())
    return std::string("x, y, dy and dx must share one element type, got ") + toString(data.front()) + " and " +
           toString(*it);
  if (auto it = firstMismatch(perChannel); it != perChannel.end())
    return std::string("scale, bias, statistics and their gradients must share one element type, got ") +
           toString(perChannel.front()) + " and " + toString(*it);
  if (data.empty() || perChannel.empty() || perChannel.front() == data.front())
    return {};
  // Low-precision data may keep fp32 parameters and statistics; nothing else mixes.
  const bool lowData = data.front() == ElementType::F16 || data.front() == ElementType::BF16;
  if (lowData && perChannel.front() == ElementType::F32)
    return {};
  return std::string("scale, bias and statistics of ") + toString(data.front()) + " data must be " +
         (lowData ? "f32 or " : "") + toString(data.front()) + ", got " + toString(perChannel.front());
}

ShapeResult broadcast(const Shape &lhs, const Shape &rhs) {
  for (auto e : {checkStatic(lhs, "lhs"), checkStatic(rhs, "rhs")})
    if (!e.empty())
      return ShapeResult::fail(e);
  size_t rank = std::max(lhs.size(), rhs.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l != r && l != 1 && r != 1)
      return ShapeResult::fail("shapes " + toString(lhs) + " and " + toString(rhs) + " do not broadcast");
    out[i] = l == 1 ? r : l;
  }
  return ShapeResult::ok(out);
}

ShapeResult fusedElementwise(const std::vector<Shape> &inputs, const std::vector<Shape> &outputs,
                             const std::vector<bool> &reduced) {
  if (outputs.empty())
    return ShapeResult::fail("a fused element-wise group needs an output");
  auto isReduced = [&](size_t j) { return j < reduced.size() && reduced[j]; };
  std::optional<size_t> first;
  for (size_t j = 0; j < outputs.size() && !first; ++j)
    if (!isReduced(j))
      first = j;
  Shape domain;
  if (first) {
    domain = outputs[*first];
  } else { // reductions only: the domain is what the inputs span
    for (const Shape &in : inputs) {
      ShapeResult b = broadcast(domain, in);
      if (!b)
        return ShapeResult::fail("the inputs do not broadcast together: " + b.error);
      domain = b.shape;
    }
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (isReduced(j)) {
      ShapeResult b = broadcast(outputs[j], domain);
      if (!b || b.shape != domain)
        return ShapeResult::fail("reduction output " + std::to_string(j) + " " + toString(outputs[j]) +
                                 " does not broadcast to the domain " + toString(domain));
    } else if (outputs[j] != domain) {
      return ShapeResult::fail("output " + std::to_string(j) + " is " + toString(outputs[j]) + ", not the domain " +
                               toString(domain) + " of output " + std::to_string(*first));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    ShapeResult b = broadcast(inputs[i], domain);
    if (!b || b.shape != domain)
      return ShapeResult::fail("input " + std::to_string(i) + " " + toString(inputs[i]) +
                               " does not broadcast to the domain " + toString(domain));
  }
  return ShapeResult::ok(domain);
}

std::vector<int64_t> reducedAxes(const Shape &reduced, const Shape &domain) {
  std::vector<int64_t> axes;
  const size_t off = domain.size() - std::min(domain.size(), reduced.size());
  for (size_t d = 0; d < domain.size(); ++d) {
    const int64_t r = d < off ? 1 : reduced[d - off];
    if (r == 1 && domain[d] != 1)
      axes.push_back(int64_t(d));
  }
  return axes;
}

ShapeResult gemm(const Shape &a, const Shape &b, const Shape *c, bool transA, bool transB) {
  if (a.size() != 2 || b.size() != 2)
    return ShapeResult::fail("operands must be rank 2, got " + toString(a) + " and " + toString(b));
  for (auto e : {checkStatic(a, "A"), checkStatic(b, "B")})
    if (!e.empty())
      return ShapeResult::fail(e);
  int64_t m = transA ? a[1] : a[0], ka = transA ? a[0] : a[1];
  int64_t kb = transB ? b[1] : b[0], n = transB ? b[0] : b[1];
  if (ka != kb)
    return ShapeResult::fail("inner dimensions differ: op(A) is [" + std::to_string(m) + ", " +
                             std::to_string(ka) + "], op(B) is [" + std::to_string(kb) + ", " +
                             std::to_string(n) + "]");
  Shape out{m, n};
  if (c) {
    auto bc = broadcast(*c, out);
    if (!bc || bc.shape != out)
      return ShapeResult::fail("C " + toString(*c) + " does not broadcast to " + toString(out));
  }
  return ShapeResult::ok(out);
}

ShapeResult matmul(const Shape &a, const Shape &b) {
  if (a.empty() || b.empty())
    return ShapeResult::fail("operands must have rank >= 1");
  Shape pa = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape pb = b.size() == 1 ? Shape{b[0], 1} : b;
  if (pa[pa.size() - 1] != pb[pb.size() - 2])
    return ShapeResult::fail("inner dimensions differ: " + toString(a) + " x " + toString(b));
  auto batch = broadcast(Shape(pa.begin(), pa.end() - 2), Shape(pb.begin(), pb.end() - 2));
  if (!batch)
    return ShapeResult::fail("batch dimensions: " + batch.error);
  Shape out = batch.shape;
  if (a.size() > 1)
    out.push_back(pa[pa.size() - 2]);
  if (b.size() > 1)
    out.push_back(pb.back());
  return ShapeResult::ok(out);
}

ShapeResult flatten(const Shape &x, int64_t axis) {
  if (auto e = checkStatic(x, "input"); !e.empty())
    return ShapeResult::fail(e);
  int64_t rank = int64_t(x.size());
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return ShapeResult::fail("axis must be in [-rank, rank], got " + std::to_string(axis));
  Shape out{*elementCount(Shape(x.begin(), x.begin() + axis)), *elementCount(Shape(x.begin() + axis, x.end()))};
  return ShapeResult::ok(out);
}

ShapeResult reshapeTarget(const Shape &x, const Shape &target, bool allowZero) {
  if (auto e = checkStatic(x, "input"); !e.empty())
    return ShapeResult::fail(e);
  Shape out = target;
  int inferred = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowZero) {
      if (i >= x.size())
        return ShapeResult::fail("target " + toString(target) + " copies dimension " + std::to_string(i) +
                                 " that the input " + toString(x) + " lacks");
      out[i] = x[i];
    } else if (out[i] == -1) {
      if (inferred >= 0)
        return ShapeResult::fail("target " + toString(target) + " has more than one -1");
      inferred = int(i);
    } else if (out[i] < -1) {
      return ShapeResult::fail("target " + toString(target) + " has a negative dimension");
    }
  }
  int64_t total = *elementCount(x);
  if (inferred >= 0) {
    out[inferred] = 1;
    auto known = elementCount(out);
    if (!known || *known == 0 || total % *known != 0)
      return ShapeResult::fail("cannot reshape " + toString(x) + " to " + toString(target));
    out[inferred] = total / *known;
  }
  return reshape(x, out);
}

ShapeResult reshape(const Shape &x, const Shape &result) {
  for (auto e : {checkStatic(x, "input"), checkStatic(result, "result")})
    if (!e.empty())
      return ShapeResult::fail(e);
  if (*elementCount(x) != *elementCount(result))
    return ShapeResult::fail("cannot reshape " + toString(x) + " (" + std::to_string(*elementCount(x)) +
                             " elements) to " + toString(result) + " (" +
                             std::to_string(*elementCount(result)) + " elements)");
  return ShapeResult::ok(result);
}

ShapeResult transpose(const Shape &input, const Shape &perm) {
  if (auto e = checkStatic(input, "input"); !e.empty())
    return ShapeResult::fail(e);
  if (perm.size() != input.size())
    return ShapeResult::fail("perm has " + std::to_string(perm.size()) + " entries for an input of rank " +
                             std::to_string(input.size()));
  std::vector<bool> seen(input.size(), false);
  Shape out(input.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= int64_t(input.size()) || seen[perm[i]])
      return ShapeResult::fail("perm " + toString(perm) + " is not a permutation of the input's dimensions");
    seen[perm[i]] = true;
    out[i] = input[perm[i]];
  }
  return ShapeResult::ok(out);
}

ShapeResult slice(const Shape &input, const Shape &starts, const Shape &ends, const Shape &steps, Shape *first) {
  if (auto e = checkStatic(input, "input"); !e.empty())
    return ShapeResult::fail(e);
  if (starts.size() != input.size() || ends.size() != input.size() || steps.size() != input.size())
    return ShapeResult::fail("starts, ends and steps need one entry per input dimension (rank " +
                             std::to_string(input.size()) + ")");
  Shape out(input.size()), begin(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const int64_t d = input[i], step = steps[i];
    if (step == 0 || step == std::numeric_limits<int64_t>::min())
      return ShapeResult::fail("step of dimension " + std::to_string(i) + " is " + std::to_string(step));
    // Saturating: ONNX exporters write INT64_MAX for "to the end".
    auto wrap = [d](int64_t v) { return v < 0 ? (v < -d ? -1 - d : v) + d : v; };
    int64_t s = wrap(starts[i]), e = wrap(ends[i]);
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      out[i] = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      out[i] = s > e ? (s - e - 1) / -step + 1 : 0;
    }
    begin[i] = out[i] > 0 ? s : 0;
  }
  if (first)
    *first = begin;
  return ShapeResult::ok(out);
}

std::vector<int64_t> rowMajorStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::optional<StridedView> transposeView(const Shape &input, const std::vector<int64_t> &inputStrides,
                                         const Shape &perm) {
  auto r = transpose(input, perm);
  if (!r || inputStrides.size() != input.size())
    return std::nullopt;
  StridedView v{r.shape, std::vector<int64_t>(perm.size()), 0};
  for (size_t i = 0; i < perm.size(); ++i)
    v.strides[i] = inputStrides[perm[i]];
  return v;
}

std::optional<StridedView> sliceView(const Shape &input, const std::vector<int64_t> &inputStrides,
                                     const Shape &starts, const Shape &ends, const Shape &steps) {
  Shape first;
  auto r = slice(input, starts, ends, steps, &first);
  if (!r || inputStrides.size() != input.size())
    return std::nullopt;
  StridedView v{r.shape, std::vector<int64_t>(input.size()), 0};
  for (size_t i = 0; i < input.size(); ++i) {
    v.strides[i] = inputStrides[i] * steps[i];
    v.offset += first[i] * inputStrides[i];
  }
  return v;
}

ShapeResult layerNorm(const Shape &input, const Shape &scale, const Shape &bias, int64_t axis, Shape *stats) {
  if (auto e = checkStatic(input, "input"); !e.empty())
    return ShapeResult::fail(e);
  auto ax = normalizeAxis(axis, int64_t(input.size()));
  if (!ax)
    return ShapeResult::fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(input.size()));
  const Shape normalized(input.begin() + *ax, input.end());
  if (scale != normalized || bias != normalized)
    return ShapeResult::fail("scale " + toString(scale) + " and bias " + toString(bias) +
                             " must have the normalised dimensions " + toString(normalized));
  if (stats) {
    *stats = Shape(input.begin(), input.begin() + *ax);
    stats->resize(input.size(), 1);
  }
  return ShapeResult::ok(input);
}

ShapeResult layerNormRows(const Shape &input, const Shape &scale, int64_t axis) {
  auto r = layerNorm(input, scale, scale, axis);
  if (!r)
    return r;
  const int64_t length = elementCount(scale).value_or(0);
  return ShapeResult::ok({length ? elementCount(input).value_or(0) / length : 0, length});
}

ShapeResult unsqueeze(const Shape &input, const std::vector<int64_t> &axes) {
  const int64_t rank = int64_t(input.size() + axes.size());
  std::vector<bool> inserted(size_t(rank), false);
  for (int64_t a : axes) {
    auto ax = normalizeAxis(a, rank);
    if (!ax || inserted[*ax])
      return ShapeResult::fail("axis " + std::to_string(a) + " is out of range or repeated");
    inserted[*ax] = true;
  }
  Shape out;
  for (int64_t i = 0, j = 0; i < rank; ++i)
    out.push_back(inserted[i] ? 1 : input[j++]);
  return ShapeResult::ok(out);
}

ShapeResult squeeze(const Shape &input, const std::vector<int64_t> &axes, bool axesGiven) {
  const int64_t rank = int64_t(input.size());
  std::vector<bool> drop(size_t(rank), false);
  for (int64_t i = 0; i < rank && !axesGiven; ++i)
    drop[i] = input[i] == 1;
  for (int64_t a : axes) {
    auto ax = normalizeAxis(a, rank);
    if (!ax || input[*ax] != 1)
      return ShapeResult::fail("axis " + std::to_string(a) + " is not a dimension of size 1");
    drop[*ax] = true;
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      out.push_back(input[i]);
  return ShapeResult::ok(out);
}

ShapeResult concat(const std::vector<Shape> &inputs, int64_t axis) {
  if (inputs.empty())
    return ShapeResult::fail("needs at least one input");
  const Shape &first = inputs.front();
  auto ax = normalizeAxis(axis, int64_t(first.size()));
  if (!ax)
    return ShapeResult::fail("axis " + std::to_string(axis) + " out of range for rank " +
                             std::to_string(first.size()));
  Shape out = first;
  out[*ax] = 0;
  for (const Shape &s : inputs) {
    if (auto e = checkStatic(s, "input"); !e.empty())
      return ShapeResult::fail(e);
    if (s.size() != first.size())
      return ShapeResult::fail("inputs have different ranks: " + toString(first) + " and " + toString(s));
    for (size_t i = 0; i < s.size(); ++i)
      if (int64_t(i) != *ax && s[i] != first[i])
        return ShapeResult::fail("inputs differ outside the concatenation axis: " + toString(first) +
                                 " and " + toString(s));
    if (__builtin_add_overflow(out[*ax], s[*ax], &out[*ax]))
      return ShapeResult::fail("concatenated dimension overflows");
  }
  if (!elementCount(out))
    return ShapeResult::fail("result has too many elements");
  return ShapeResult::ok(out);
}

ShapeResult softmax(const Shape &x, int64_t axis) {
  if (auto e = checkStatic(x, "input"); !e.empty())
    return ShapeResult::fail(e);
  if (!normalizeAxis(axis, int64_t(x.size())))
    return ShapeResult::fail("axis " + std::to_string(axis) + " out of range for rank " +
                             std::to_string(x.size()));
  return ShapeResult::ok(x);
}

ShapeResult softmaxCrossEntropy(const Shape &logits, const Shape &labels, Reduction reduction) {
  if (logits.size() != 2)
    return ShapeResult::fail("logits must be rank 2 [N, C], got " + toString(logits));
  if (labels.size() != 1 || labels[0] != logits[0])
    return ShapeResult::fail("labels must be [" + std::to_string(logits[0]) + "], got " + toString(labels));
  if (auto e = checkStatic(logits, "logits"); !e.empty())
    return ShapeResult::fail(e);
  return ShapeResult::ok(reduction == Reduction::None ? Shape{logits[0]} : Shape{});
}

ShapeResult attention(const Shape &q, const Shape &k, const Shape &v, Shape *stats) {
  const char *names[] = {"q", "k", "v"};
  const Shape *operands[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    if (operands[i]->size() != 4)
      return ShapeResult::fail(std::string(names[i]) + " must be rank 4 [B, H, S, D], got " + toString(*operands[i]));
    if (auto e = checkStatic(*operands[i], names[i]); !e.empty())
      return ShapeResult::fail(e);
  }
  if (k[0] != q[0] || k[1] != q[1] || v[0] != q[0] || v[1] != q[1])
    return ShapeResult::fail("q " + toString(q) + ", k " + toString(k) + " and v " + toString(v) +
                             " must share batch and head dimensions [B, H]");
  if (k[3] != q[3])
    return ShapeResult::fail("k " + toString(k) + " must have q's head dimension D = " + std::to_string(q[3]));
  if (v[2] != k[2])
    return ShapeResult::fail("v " + toString(v) + " must have k's sequence length Sk = " + std::to_string(k[2]));
  if (stats)
    *stats = {q[0], q[1], q[2], 1};
  return ShapeResult::ok({q[0], q[1], q[2], v[3]});
}

std::string attentionTypes(const std::vector<ElementType> &data, ElementType stats) {
  for (ElementType t : data)
    if (t == ElementType::Other)
      return "q, k, v and o must be floating-point (f64, f32, f16 or bf16)";
  for (ElementType t : data)
    if (t != data.front())
      return std::string("q, k, v, o and their gradients must share one element type, got ") +
             toString(data.front()) + " and " + toString(t);
  if (stats != ElementType::F32)
    return std::string("stats (the log-sum-exp of each row) must be f32, got ") + toString(stats);
  return {};
}

} // namespace castor::shape
