#include "ShapeFolding.h"
#include "TensorData.h"

#include "castor/shape_rules.h"

#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <type_traits>

using onnx::TensorProto;

namespace castor::onnx_import {
namespace {

// Larger results stay in the graph: folding is for shapes, scales and masks.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 22;

bool isIntegerType(int32_t t) {
  return t == TensorProto::INT64 || t == TensorProto::INT32 || t == TensorProto::BOOL;
}
bool isRealType(int32_t t) {
  return t == TensorProto::FLOAT || t == TensorProto::DOUBLE || t == TensorProto::FLOAT16 ||
         t == TensorProto::BFLOAT16;
}

// A value known at import: integers (and booleans) exactly, floating-point values as doubles.
struct Known {
  int32_t type = TensorProto::INT64;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<double> reals;

  bool isInt() const { return isIntegerType(type); }
  int64_t count() const { return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<>()); }
  int64_t size() const { return isInt() ? int64_t(ints.size()) : int64_t(reals.size()); }
  double real(int64_t i) const { return isInt() ? double(ints[i]) : reals[i]; }
  int64_t integer(int64_t i) const { return isInt() ? ints[i] : int64_t(reals[i]); }
  // An empty value of the same type, with the given dims.
  Known like(std::vector<int64_t> d) const {
    Known k;
    k.type = type;
    k.dims = std::move(d);
    return k;
  }
  void push(const Known &from, int64_t i) {
    if (isInt())
      ints.push_back(from.integer(i));
    else
      reals.push_back(from.real(i));
  }
};

Known intVector(std::vector<int64_t> v) {
  Known k;
  k.dims = {int64_t(v.size())};
  k.ints = std::move(v);
  return k;
}

// The stored result: raw little-endian bytes of the output's type.
std::unique_ptr<TensorProto> toProto(const Known &k, const std::string &name) {
  auto t = std::make_unique<TensorProto>();
  t->set_name(name);
  t->set_data_type(k.type);
  for (int64_t d : k.dims)
    t->add_dims(d);
  std::string raw;
  auto put = [&](const auto &v) { raw.append(reinterpret_cast<const char *>(&v), sizeof(v)); };
  for (int64_t i = 0; i < k.size(); ++i) {
    switch (k.type) {
    case TensorProto::INT64: put(int64_t(k.integer(i))); break;
    case TensorProto::INT32: put(int32_t(k.integer(i))); break;
    case TensorProto::BOOL: put(uint8_t(k.integer(i) != 0)); break;
    case TensorProto::FLOAT: put(float(k.real(i))); break;
    case TensorProto::DOUBLE: put(double(k.real(i))); break;
    }
  }
  t->set_raw_data(raw);
  return t;
}

class Folder {
public:
  Folder(ImportState &state, const onnx::NodeProto &node) : state_(state), node_(node), n_(state, node) {}

  const onnx::NodeProto &node() const { return node_; }
  NodeImporter &importer() { return n_; }
  int inputCount() const {
    int c = node_.input_size();
    while (c > 0 && node_.input(c - 1).empty())
      --c;
    return c;
  }
  bool has(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }

  const std::string &resolved(int i) const {
    const std::string &name = node_.input(i);
    auto a = state_.aliases.find(name);
    return a == state_.aliases.end() ? name : a->second;
  }

  // The tensor behind input i when it is known at import. Floating-point initializers are
  // weights, which training changes, so they never count as known.
  const TensorProto *knownTensor(int i) const {
    if (!has(i))
      return nullptr;
    const std::string &name = resolved(i);
    if (auto c = state_.constants.find(name); c != state_.constants.end())
      return c->second;
    if (state_.values.count(name))
      return nullptr;
    auto init = state_.model.initializers.find(name);
    if (init != state_.model.initializers.end() && isIntegerType(init->second->data_type()))
      return init->second;
    return nullptr;
  }

  // Dims of input i: of a known tensor, or of a converted value's static type.
  std::optional<std::vector<int64_t>> dimsOf(int i) const {
    if (!has(i))
      return std::nullopt;
    const std::string &name = resolved(i);
    if (auto v = state_.values.find(name); v != state_.values.end()) {
      auto type = llvm::cast<mlir::RankedTensorType>(v->second.getType());
      return std::vector<int64_t>(type.getShape().begin(), type.getShape().end());
    }
    const TensorProto *t = state_.constants.count(name) ? state_.constants.at(name) : nullptr;
    if (!t)
      if (auto init = state_.model.initializers.find(name); init != state_.model.initializers.end())
        t = init->second;
    if (!t)
      return std::nullopt;
    return std::vector<int64_t>(t->dims().begin(), t->dims().end());
  }

  std::optional<Known> read(int i) {
    const TensorProto *t = knownTensor(i);
    if (!t)
      return std::nullopt;
    Known k;
    k.type = t->data_type();
    std::string why;
    auto dims = tensorShape(*t, why);
    bool ok = dims.has_value();
    if (ok) {
      k.dims = *dims;
      if (isIntegerType(k.type))
        ok = readInts(*t, state_.baseDir, k.ints, why);
      else if (isRealType(k.type))
        ok = readDoubles(*t, state_.baseDir, k.reals, why), k.type = TensorProto::FLOAT;
      else
        ok = false, why = "input " + std::to_string(i) + " has unsupported " + onnxTypeName(k.type);
      // 16-bit floats compute as f32, the type of every floating-point value folded here.
      if (ok && t->data_type() == TensorProto::DOUBLE)
        k.type = TensorProto::DOUBLE;
    }
    if (!ok) {
      (void)n_.fail(why);
      failed_ = true;
      return std::nullopt;
    }
    return k;
  }

  bool failed() const { return failed_; }
  FoldResult fail(const std::string &why) {
    (void)n_.fail(why);
    failed_ = true;
    return FoldResult::Failed;
  }

  FoldResult define(const Known &k, int output = 0) {
    if (k.count() != k.size())
      return fail("folding produced " + std::to_string(k.size()) + " values for a shape of " +
                  std::to_string(k.count()) + " elements");
    if (k.count() > kMaxFoldedElements)
      return fail("the folded value has " + std::to_string(k.count()) + " elements, more than import folds");
    if (output >= node_.output_size() || node_.output(output).empty())
      return FoldResult::Folded;
    auto proto = toProto(k, node_.output(output));
    state_.constants[node_.output(output)] = proto.get();
    state_.folded.insert(node_.output(output));
    state_.ownedConstants.push_back(std::move(proto));
    return FoldResult::Folded;
  }

private:
  ImportState &state_;
  const onnx::NodeProto &node_;
  NodeImporter n_;
  bool failed_ = false;
};

using FoldFn = FoldResult (*)(Folder &);

// NumPy broadcasting of several shapes (shape::broadcast pairwise); nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcastDims(const std::vector<const std::vector<int64_t> *> &shapes) {
  shape::Shape out;
  for (auto *s : shapes) {
    auto r = shape::broadcast(out, *s);
    if (!r)
      return std::nullopt;
    out = r.shape;
  }
  return out;
}

// The linear index into `in` (broadcast to `out`) of output element `linear`.
int64_t broadcastSource(const std::vector<int64_t> &out, const std::vector<int64_t> &in, int64_t linear) {
  int64_t index = 0, stride = 1;
  for (int64_t o = int64_t(out.size()) - 1, i = int64_t(in.size()) - 1; o >= 0; --o, --i) {
    int64_t coord = linear % out[o];
    linear /= out[o];
    if (i >= 0) {
      if (in[i] != 1)
        index += coord * stride;
      stride *= in[i];
    }
  }
  return index;
}

FoldResult foldShape(Folder &f) {
  auto dims = f.dimsOf(0);
  if (!dims)
    return FoldResult::NotConstant;
  auto &n = f.importer();
  int64_t rank = int64_t(dims->size());
  auto start = n.attrInt("start", 0), end = n.attrInt("end", rank);
  if (failed(start) || failed(end))
    return FoldResult::Failed;
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  int64_t s = clampAxis(*start), e = clampAxis(*end);
  return f.define(intVector(std::vector<int64_t>(dims->begin() + s, dims->begin() + std::max(s, e))));
}

FoldResult foldSize(Folder &f) {
  auto dims = f.dimsOf(0);
  if (!dims)
    return FoldResult::NotConstant;
  Known k;
  k.ints = {std::accumulate(dims->begin(), dims->end(), int64_t(1), std::multiplies<>())};
  return f.define(k);
}

FoldResult foldCast(Folder &f) {
  auto x = f.read(0);
  auto to = f.importer().attrInt("to", 0);
  if (!x || failed(to))
    return FoldResult::Failed;
  Known out = x->like(x->dims);
  out.type = int32_t(*to);
  if (!isIntegerType(out.type) && out.type != TensorProto::FLOAT && out.type != TensorProto::DOUBLE)
    return f.fail("folding a cast to " + onnxTypeName(out.type) + " is not supported");
  for (int64_t i = 0; i < x->size(); ++i) {
    if (out.type == TensorProto::BOOL)
      out.ints.push_back(x->real(i) != 0);
    else if (out.isInt())
      out.ints.push_back(x->integer(i));
    else
      out.reals.push_back(out.type == TensorProto::FLOAT ? double(float(x->real(i))) : x->real(i));
  }
  return f.define(out);
}

template <double (*Fn)(double)>
FoldResult foldUnary(Folder &f) {
  auto x = f.read(0);
  if (!x)
    return FoldResult::Failed;
  Known out = x->like(x->dims);
  for (int64_t i = 0; i < x->size(); ++i) {
    double v = Fn(x->real(i));
    if (out.isInt())
      out.ints.push_back(int64_t(v));
    else
      out.reals.push_back(out.type == TensorProto::FLOAT ? double(float(v)) : v);
  }
  return f.define(out);
}

double negate(double v) { return -v; }
double notOf(double v) { return v == 0; }
double reciprocal(double v) { return 1.0 / v; }
double squareRoot(double v) { return std::sqrt(v); }
double absolute(double v) { return std::fabs(v); }
double floorOf(double v) { return std::floor(v); }
double ceilOf(double v) { return std::ceil(v); }
double sine(double v) { return std::sin(v); }
double cosine(double v) { return std::cos(v); }

enum class Bin { Add, Sub, Mul, Div, Mod, Pow, Min, Max, Equal, Less, Greater, LessEq, GreaterEq, And, Or };

// Integers divide truncating (as onnxruntime does) and take the divisor's sign in Mod unless
// fmod; reals use C's fmod.
template <typename T>
T applyBinary(Bin op, T a, T b, bool fmod) {
  switch (op) {
  case Bin::Add: return a + b;
  case Bin::Sub: return a - b;
  case Bin::Mul: return a * b;
  case Bin::Div: return a / b;
  case Bin::Mod:
    if constexpr (std::is_integral_v<T>) {
      T r = a % b;
      return (!fmod && r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    } else {
      return std::fmod(a, b);
    }
  case Bin::Pow: return T(std::pow(double(a), double(b)));
  case Bin::Min: return std::min(a, b);
  case Bin::Max: return std::max(a, b);
  case Bin::Equal: return a == b;
  case Bin::Less: return a < b;
  case Bin::Greater: return a > b;
  case Bin::LessEq: return a <= b;
  case Bin::GreaterEq: return a >= b;
  case Bin::And: return a && b;
  case Bin::Or: return a || b;
  }
  return 0;
}

bool isComparison(Bin op) {
  return op == Bin::Equal || op == Bin::Less || op == Bin::Greater || op == Bin::LessEq || op == Bin::GreaterEq ||
         op == Bin::And || op == Bin::Or;
}

template <Bin Op>
FoldResult foldBinary(Folder &f) {
  if (f.inputCount() != 2)
    return f.fail("folding expects 2 inputs");
  auto a = f.read(0), b = f.read(1);
  if (!a || !b)
    return FoldResult::Failed;
  auto fmod = f.importer().attrInt("fmod", 0);
  if (failed(fmod))
    return FoldResult::Failed;
  auto dims = broadcastDims({&a->dims, &b->dims});
  if (!dims)
    return f.fail("input shapes do not broadcast");
  Known out = a->like(*dims);
  bool integer = a->isInt() && b->isInt();
  if (isComparison(Op))
    out.type = TensorProto::BOOL;
  for (int64_t i = 0, n = out.count(); i < n; ++i) {
    int64_t ia = broadcastSource(*dims, a->dims, i), ib = broadcastSource(*dims, b->dims, i);
    if (integer) {
      int64_t y = b->integer(ib);
      if ((Op == Bin::Div || Op == Bin::Mod) && y == 0)
        return f.fail("integer division by zero");
      int64_t v = applyBinary<int64_t>(Op, a->integer(ia), y, *fmod != 0);
      if (out.isInt())
        out.ints.push_back(v);
      else
        out.reals.push_back(double(v));
    } else {
      double v = applyBinary<double>(Op, a->real(ia), b->real(ib), *fmod != 0);
      if (out.isInt())
        out.ints.push_back(int64_t(v));
      else
        out.reals.push_back(out.type == TensorProto::FLOAT ? double(float(v)) : v);
    }
  }
  return f.define(out);
}

FoldResult foldWhere(Folder &f) {
  auto c = f.read(0), x = f.read(1), y = f.read(2);
  if (!c || !x || !y)
    return FoldResult::Failed;
  auto dims = broadcastDims({&c->dims, &x->dims, &y->dims});
  if (!dims)
    return f.fail("input shapes do not broadcast");
  Known out = x->like(*dims);
  for (int64_t i = 0, n = out.count(); i < n; ++i) {
    bool pick = c->integer(broadcastSource(*dims, c->dims, i)) != 0;
    const Known &src = pick ? *x : *y;
    out.push(src, broadcastSource(*dims, src.dims, i));
  }
  return f.define(out);
}

// Clip on known values (timm's SAME padding clamps its pads at 0): min and max, each optional,
// are scalars; the attribute form of opsets before 11 is not imported.
FoldResult foldClip(Folder &f) {
  auto x = f.read(0);
  if (!x)
    return FoldResult::Failed;
  std::optional<Known> lo, hi;
  for (int i : {1, 2}) {
    if (!f.has(i))
      continue;
    auto bound = f.read(i);
    if (!bound)
      return FoldResult::Failed;
    if (bound->count() != 1)
      return f.fail("Clip's min and max must be scalars");
    (i == 1 ? lo : hi) = *bound;
  }
  Known out = x->like(x->dims);
  for (int64_t i = 0, n = out.count(); i < n; ++i) {
    if (x->isInt()) {
      int64_t v = x->integer(i);
      if (lo)
        v = std::max(v, lo->integer(0));
      if (hi)
        v = std::min(v, hi->integer(0));
      out.ints.push_back(v);
    } else {
      double v = x->real(i);
      if (lo)
        v = std::max(v, lo->real(0));
      if (hi)
        v = std::min(v, hi->real(0));
      out.reals.push_back(v);
    }
  }
  return f.define(out);
}

FoldResult foldExpand(Folder &f) {
  auto x = f.read(0), shape = f.read(1);
  if (!x || !shape)
    return FoldResult::Failed;
  auto dims = broadcastDims({&x->dims, &shape->ints});
  if (!dims)
    return f.fail("the input does not broadcast to the target shape");
  Known out = x->like(*dims);
  for (int64_t i = 0, n = out.count(); i < n; ++i)
    out.push(*x, broadcastSource(*dims, x->dims, i));
  return f.define(out);
}

FoldResult foldConstantOfShape(Folder &f) {
  auto shape = f.read(0);
  if (!shape)
    return FoldResult::Failed;
  Known fill;
  fill.type = TensorProto::FLOAT;
  fill.reals = {0.0};
  if (const auto *a = f.importer().findAttr("value")) {
    if (!a->has_t())
      return f.fail("attribute 'value' must be a tensor");
    fill.type = a->t().data_type();
    std::string why;
    bool ok = isIntegerType(fill.type)   ? readInts(a->t(), "", fill.ints, why)
              : isRealType(fill.type)    ? readDoubles(a->t(), "", fill.reals, why)
                                         : (why = "value of " + onnxTypeName(fill.type) + " is not supported", false);
    if (!ok || fill.size() != 1)
      return f.fail(ok ? "attribute 'value' must hold one element" : why);
    if (fill.type != TensorProto::DOUBLE && !fill.isInt())
      fill.type = TensorProto::FLOAT;
  }
  for (int64_t d : shape->ints)
    if (d < 0)
      return f.fail("negative dimension in the shape");
  Known out = fill.like(shape->ints);
  if (out.count() > kMaxFoldedElements)
    return f.fail("the folded value has " + std::to_string(out.count()) + " elements, more than import folds");
  for (int64_t i = 0, n = out.count(); i < n; ++i)
    out.push(fill, 0);
  return f.define(out);
}

FoldResult foldRange(Folder &f) {
  auto start = f.read(0), limit = f.read(1), delta = f.read(2);
  if (!start || !limit || !delta)
    return FoldResult::Failed;
  if (start->size() != 1 || limit->size() != 1 || delta->size() != 1 || delta->real(0) == 0)
    return f.fail("start, limit and delta must be scalars, delta non-zero");
  double s = start->real(0), l = limit->real(0), d = delta->real(0);
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil((l - s) / d)));
  if (n > kMaxFoldedElements)
    return f.fail("the range has " + std::to_string(n) + " elements, more than import folds");
  Known out = start->like({n});
  for (int64_t i = 0; i < n; ++i) {
    if (out.isInt())
      out.ints.push_back(start->integer(0) + i * delta->integer(0));
    else
      out.reals.push_back(s + double(i) * d);
  }
  return f.define(out);
}

// Axes from input 1 (opset 13 and later) or the `axes` attribute (earlier opsets).
std::optional<std::vector<int64_t>> axesOf(Folder &f, bool &present) {
  present = false;
  if (f.has(1)) {
    auto a = f.read(1);
    if (!a)
      return std::nullopt;
    present = true;
    return a->ints;
  }
  if (const auto *attr = f.importer().findAttr("axes")) {
    present = true;
    return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
  }
  return std::vector<int64_t>{};
}

template <bool Unsqueeze>
FoldResult foldSqueezeOrUnsqueeze(Folder &f) {
  auto x = f.read(0);
  bool present;
  auto axes = axesOf(f, present);
  if (!x || !axes)
    return FoldResult::Failed;
  auto rule = Unsqueeze ? shape::unsqueeze(x->dims, *axes) : shape::squeeze(x->dims, *axes, present);
  if (!rule)
    return f.fail(rule.error);
  Known out = *x;
  out.dims = rule.shape;
  return f.define(out);
}

FoldResult foldConcat(Folder &f) {
  auto axis = f.importer().attrInt("axis", 0);
  if (failed(axis))
    return FoldResult::Failed;
  std::vector<Known> parts;
  for (int i = 0; i < f.inputCount(); ++i) {
    auto k = f.read(i);
    if (!k)
      return FoldResult::Failed;
    parts.push_back(std::move(*k));
  }
  if (parts.empty())
    return f.fail("expects at least one input");
  int64_t rank = int64_t(parts[0].dims.size());
  auto ax = shape::normalizeAxis(*axis, rank);
  if (!ax)
    return f.fail("axis " + std::to_string(*axis) + " is out of range");
  std::vector<int64_t> dims = parts[0].dims;
  dims[*ax] = 0;
  for (const auto &p : parts) {
    if (int64_t(p.dims.size()) != rank || p.isInt() != parts[0].isInt())
      return f.fail("inputs differ in rank or type");
    for (int64_t d = 0; d < rank; ++d)
      if (d != *ax && p.dims[d] != parts[0].dims[d])
        return f.fail("inputs differ outside the concatenation axis");
    dims[*ax] += p.dims[*ax];
  }
  Known out = parts[0].like(dims);
  int64_t outer = std::accumulate(dims.begin(), dims.begin() + *ax, int64_t(1), std::multiplies<>());
  for (int64_t o = 0; o < outer; ++o)
    for (const auto &p : parts) {
      int64_t block = p.count() / std::max<int64_t>(outer, 1);
      for (int64_t i = 0; i < block; ++i)
        out.push(p, o * block + i);
    }
  return f.define(out);
}

FoldResult foldGather(Folder &f) {
  auto x = f.read(0), idx = f.read(1);
  auto axis = f.importer().attrInt("axis", 0);
  if (!x || !idx || failed(axis))
    return FoldResult::Failed;
  int64_t rank = int64_t(x->dims.size());
  auto ax = shape::normalizeAxis(*axis, rank);
  if (!ax)
    return f.fail("axis " + std::to_string(*axis) + " is out of range");
  std::vector<int64_t> dims(x->dims.begin(), x->dims.begin() + *ax);
  dims.insert(dims.end(), idx->dims.begin(), idx->dims.end());
  dims.insert(dims.end(), x->dims.begin() + *ax + 1, x->dims.end());
  int64_t outer = std::accumulate(x->dims.begin(), x->dims.begin() + *ax, int64_t(1), std::multiplies<>());
  int64_t inner = std::accumulate(x->dims.begin() + *ax + 1, x->dims.end(), int64_t(1), std::multiplies<>());
  int64_t extent = x->dims[*ax];
  Known out = x->like(dims);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < idx->size(); ++j) {
      int64_t k = idx->integer(j);
      if (k < -extent || k >= extent)
        return f.fail("index " + std::to_string(k) + " is out of range for a dimension of " + std::to_string(extent));
      k = k < 0 ? k + extent : k;
      for (int64_t i = 0; i < inner; ++i)
        out.push(*x, (o * extent + k) * inner + i);
    }
  return f.define(out);
}

// ScatterND (reduction none) of known values: a copy of data with each index tuple's slice
// replaced by its update (Swin's shifted-window mask is built this way from shapes).
FoldResult foldScatterND(Folder &f) {
  auto reduction = f.importer().attrString("reduction", "none");
  if (failed(reduction))
    return FoldResult::Failed;
  if (*reduction != "none")
    return f.fail("ScatterND with reduction '" + *reduction + "' is not folded (none only)");
  auto data = f.read(0), idx = f.read(1), updates = f.read(2);
  if (!data || !idx || !updates)
    return FoldResult::Failed;
  if (idx->dims.empty() || !idx->isInt())
    return f.fail("indices must be an integer tensor of rank 1 or more");
  const int64_t k = idx->dims.back(), rank = int64_t(data->dims.size());
  if (k < 1 || k > rank)
    return f.fail("index tuples of " + std::to_string(k) + " for data of rank " + std::to_string(rank));
  const int64_t tuples = idx->count() / k;
  const int64_t slice = std::accumulate(data->dims.begin() + k, data->dims.end(), int64_t(1), std::multiplies<>());
  if (updates->count() != tuples * slice)
    return f.fail("updates hold " + std::to_string(updates->count()) + " elements, not " +
                  std::to_string(tuples * slice));
  Known out = *data;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t at = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = idx->integer(t * k + d), extent = data->dims[size_t(d)];
      if (i < -extent || i >= extent)
        return f.fail("index " + std::to_string(i) + " is out of range for a dimension of " + std::to_string(extent));
      at = at * extent + (i < 0 ? i + extent : i);
    }
    for (int64_t e = 0; e < slice; ++e) {
      if (out.isInt())
        out.ints[size_t(at * slice + e)] = updates->integer(t * slice + e);
      else
        out.reals[size_t(at * slice + e)] = updates->real(t * slice + e);
    }
  }
  return f.define(out);
}

// The elements of x a strided view reads (shape::StridedView, the kernels' own index rule).
Known gather(const Known &x, const shape::StridedView &view) {
  Known out = x.like(view.dims);
  const int64_t rank = int64_t(view.dims.size());
  for (int64_t i = 0, n = out.count(); i < n; ++i) {
    int64_t rem = i, src = view.offset;
    for (int64_t d = rank - 1; d >= 0; --d) {
      src += (rem % view.dims[d]) * view.strides[d];
      rem /= view.dims[d];
    }
    out.push(x, src);
  }
  return out;
}

FoldResult foldSlice(Folder &f) {
  auto x = f.read(0), starts = f.read(1), ends = f.read(2);
  if (!x || !starts || !ends)
    return FoldResult::Failed;
  const int64_t rank = int64_t(x->dims.size());
  std::vector<int64_t> axes(starts->ints.size()), steps(starts->ints.size(), 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (f.has(3)) {
    auto a = f.read(3);
    if (!a)
      return FoldResult::Failed;
    axes = a->ints;
  }
  if (f.has(4)) {
    auto st = f.read(4);
    if (!st)
      return FoldResult::Failed;
    steps = st->ints;
  }
  if (axes.size() != starts->ints.size() || ends->ints.size() != axes.size() || steps.size() != axes.size())
    return f.fail("starts, ends, axes and steps differ in length");
  // Every dimension, the ones ONNX leaves out taken whole.
  shape::Shape s(rank, 0), e(rank, std::numeric_limits<int64_t>::max()), st(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto ax = shape::normalizeAxis(axes[i], rank);
    if (!ax)
      return f.fail("axis " + std::to_string(axes[i]) + " is out of range");
    s[*ax] = starts->ints[i], e[*ax] = ends->ints[i], st[*ax] = steps[i];
  }
  auto view = shape::sliceView(x->dims, shape::rowMajorStrides(x->dims), s, e, st);
  if (!view)
    return f.fail(shape::slice(x->dims, s, e, st).error);
  return f.define(gather(*x, *view));
}

FoldResult foldReshape(Folder &f) {
  auto x = f.read(0), shape = f.read(1);
  auto allowZero = f.importer().attrInt("allowzero", 0);
  if (!x || !shape || failed(allowZero))
    return FoldResult::Failed;
  std::vector<int64_t> dims = shape->ints;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !*allowZero) {
      if (i >= x->dims.size())
        return f.fail("a 0 in the target shape has no input dimension to copy");
      dims[i] = x->dims[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0)
        return f.fail("the target shape has more than one -1");
      infer = int64_t(i);
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0)
    dims[infer] = known ? x->count() / known : 0;
  Known out = *x;
  out.dims = dims;
  if (out.count() != x->count())
    return f.fail("the target shape does not hold the input's elements");
  return f.define(out);
}

FoldResult foldTranspose(Folder &f) {
  auto x = f.read(0);
  if (!x)
    return FoldResult::Failed;
  const int64_t rank = int64_t(x->dims.size());
  std::vector<int64_t> reversed(rank);
  for (int64_t i = 0; i < rank; ++i)
    reversed[i] = rank - 1 - i;
  auto perm = f.importer().attrInts("perm", reversed);
  if (failed(perm))
    return FoldResult::Failed;
  auto view = shape::transposeView(x->dims, shape::rowMajorStrides(x->dims), *perm);
  if (!view)
    return f.fail(shape::transpose(x->dims, *perm).error);
  return f.define(gather(*x, *view));
}

// CumSum along a known axis (a scalar or one-element input 1), inclusive or exclusive (each sum
// leaves out its own element), forward or reversed (sums from the end); sums in the input's type
// (doubles for reals, rounded to f32 as each is stored). EdgeNeXt's positional encoding counts
// positions so, on a constant mask.
FoldResult foldCumSum(Folder &f) {
  auto x = f.read(0), axisIn = f.read(1);
  auto exclusive = f.importer().attrInt("exclusive", 0), reverse = f.importer().attrInt("reverse", 0);
  if (!x || !axisIn || failed(exclusive) || failed(reverse))
    return FoldResult::Failed;
  if (!axisIn->isInt() || axisIn->size() != 1)
    return f.fail("the axis must be one integer");
  const int64_t rank = int64_t(x->dims.size());
  auto ax = shape::normalizeAxis(axisIn->integer(0), rank);
  if (!ax)
    return f.fail("axis " + std::to_string(axisIn->integer(0)) + " is out of range for an input of rank " +
                  std::to_string(rank));
  const int64_t extent = x->dims[*ax];
  const int64_t inner = std::accumulate(x->dims.begin() + *ax + 1, x->dims.end(), int64_t(1), std::multiplies<>());
  const int64_t outer = extent == 0 ? 0 : x->count() / (extent * inner);
  Known out = *x;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t isum = 0;
      double rsum = 0;
      for (int64_t step = 0; step < extent; ++step) {
        const int64_t k = *reverse ? extent - 1 - step : step;
        const int64_t at = (o * extent + k) * inner + i;
        if (out.isInt()) {
          const int64_t v = x->ints[size_t(at)];
          if (!*exclusive)
            isum += v;
          out.ints[size_t(at)] = isum;
          if (*exclusive)
            isum += v;
        } else {
          const double v = x->reals[size_t(at)];
          if (!*exclusive)
            rsum += v;
          out.reals[size_t(at)] = out.type == TensorProto::FLOAT ? double(float(rsum)) : rsum;
          if (*exclusive)
            rsum += v;
          if (out.type == TensorProto::FLOAT)
            rsum = double(float(rsum));
        }
      }
    }
  return f.define(out);
}

struct FoldEntry {
  FoldFn fn;
  bool foldOnly;
};

const llvm::StringMap<FoldEntry> &folders() {
  static const llvm::StringMap<FoldEntry> table = {
      {"Shape", {foldShape, true}},
      {"Size", {foldSize, true}},
      {"ConstantOfShape", {foldConstantOfShape, true}},
      {"Range", {foldRange, true}},
      {"Equal", {foldBinary<Bin::Equal>, true}},
      {"Less", {foldBinary<Bin::Less>, true}},
      {"Greater", {foldBinary<Bin::Greater>, true}},
      {"LessOrEqual", {foldBinary<Bin::LessEq>, true}},
      {"GreaterOrEqual", {foldBinary<Bin::GreaterEq>, true}},
      {"And", {foldBinary<Bin::And>, true}},
      {"Or", {foldBinary<Bin::Or>, true}},
      {"Not", {foldUnary<notOf>, true}},
      {"Where", {foldWhere, true}},
      {"Mod", {foldBinary<Bin::Mod>, true}},
      {"Min", {foldBinary<Bin::Min>, true}},
      {"Max", {foldBinary<Bin::Max>, true}},
      {"Pow", {foldBinary<Bin::Pow>, true}},
      {"Neg", {foldUnary<negate>, true}},
      {"Abs", {foldUnary<absolute>, true}},
      {"Floor", {foldUnary<floorOf>, true}},
      {"Ceil", {foldUnary<ceilOf>, true}},
      {"Reciprocal", {foldUnary<reciprocal>, false}},
      {"ScatterND", {foldScatterND, true}},
      // Computed on constants only (EdgeNeXt's Fourier positional encoding).
      {"Sin", {foldUnary<sine>, true}},
      {"Cos", {foldUnary<cosine>, true}},
      {"CumSum", {foldCumSum, true}},
      // Ops that also exist as tensor math: folded when their inputs are known.
      {"Cast", {foldCast, false}},
      {"Add", {foldBinary<Bin::Add>, false}},
      {"Sub", {foldBinary<Bin::Sub>, false}},
      {"Mul", {foldBinary<Bin::Mul>, false}},
      {"Div", {foldBinary<Bin::Div>, false}},
      {"Sqrt", {foldUnary<squareRoot>, false}},
      {"Clip", {foldClip, false}},
      {"Expand", {foldExpand, false}},
      {"Unsqueeze", {foldSqueezeOrUnsqueeze<true>, false}},
      {"Squeeze", {foldSqueezeOrUnsqueeze<false>, false}},
      {"Concat", {foldConcat, false}},
      {"Gather", {foldGather, false}},
      {"Slice", {foldSlice, false}},
      {"Reshape", {foldReshape, false}},
      {"Transpose", {foldTranspose, false}},
  };
  return table;
}

} // namespace

bool hasFolder(const std::string &opType) { return folders().count(opType) != 0; }

bool isFoldOnly(const std::string &opType) {
  auto it = folders().find(opType);
  return it != folders().end() && it->second.foldOnly;
}

std::string firstUnknownInput(ImportState &state, const onnx::NodeProto &node) {
  Folder f(state, node);
  bool sizeOnly = node.op_type() == "Shape" || node.op_type() == "Size";
  for (int i = 0; i < f.inputCount(); ++i)
    if (f.has(i) && !(sizeOnly ? f.dimsOf(i).has_value() : f.knownTensor(i) != nullptr))
      return node.input(i);
  return "";
}

FoldResult foldNode(ImportState &state, const onnx::NodeProto &node) {
  auto it = folders().find(node.op_type());
  if (it == folders().end())
    return FoldResult::NotConstant;
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  if (!defaultDomain || !firstUnknownInput(state, node).empty())
    return FoldResult::NotConstant;
  Folder f(state, node);
  return it->second.fn(f);
}

} // namespace castor::onnx_import
