#include "plan/plan.h"

#include <cstdio>
#include <sstream>

namespace castor::plan {

uint64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case F32:
    return 4;
  case F16:
  case BF16:
    return 2;
  case F64:
  case I64:
    return 8;
  default:
    return 0;
  }
}

std::string dtypeName(DType dtype) {
  switch (dtype) {
  case F32:
    return "f32";
  case F16:
    return "f16";
  case BF16:
    return "bf16";
  case F64:
    return "f64";
  case I64:
    return "i64";
  default:
    return "dtype(" + std::to_string(int(dtype)) + ")";
  }
}

std::string kindName(Tensor::Kind kind) {
  switch (kind) {
  case Tensor::ACTIVATION:
    return "activation";
  case Tensor::PARAMETER:
    return "parameter";
  case Tensor::INPUT:
    return "input";
  case Tensor::OUTPUT:
    return "output";
  case Tensor::STATE:
    return "state";
  default:
    return "kind(" + std::to_string(int(kind)) + ")";
  }
}

std::string initName(Parameter::Init init) {
  switch (init) {
  case Parameter::FILE:
    return "file";
  case Parameter::KAIMING_NORMAL:
    return "kaiming_normal";
  case Parameter::LINEAR_UNIFORM:
    return "linear_uniform";
  case Parameter::ZEROS:
    return "zeros";
  case Parameter::ONES:
    return "ones";
  case Parameter::FILL:
    return "fill";
  default:
    return "init(" + std::to_string(int(init)) + ")";
  }
}

std::optional<int64_t> elementCount(const Tensor &tensor) {
  int64_t n = 1;
  for (int64_t d : tensor.shape())
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  return n;
}

std::string slotError(const Tensor &t, uint64_t arenaBytes) {
  auto count = elementCount(t);
  uint64_t size = dtypeSize(t.dtype());
  if (!count || size == 0 || t.bytes() != uint64_t(*count) * size || t.offset() > arenaBytes ||
      t.bytes() > arenaBytes - t.offset())
    return "tensor " + std::to_string(t.id()) + " '" + t.name() + "' does not fit the arena (validate the plan first)";
  return {};
}

std::string shapeString(const Tensor &tensor) {
  std::string s = "[";
  for (int i = 0; i < tensor.shape_size(); ++i)
    s += (i ? ", " : "") + std::to_string(tensor.shape(i));
  return s + "]";
}

Attr intsAttr(std::vector<int64_t> values) {
  Attr a;
  for (int64_t v : values)
    a.mutable_ints()->add_values(v);
  if (values.empty())
    a.mutable_ints();
  return a;
}

Attr floatsAttr(std::vector<double> values) {
  Attr a;
  for (double v : values)
    a.mutable_floats()->add_values(v);
  if (values.empty())
    a.mutable_floats();
  return a;
}

Attr floatAttr(double value) { return floatsAttr({value}); }
Attr intAttr(int64_t value) { return intsAttr({value}); }

Attr stringAttr(std::string value) {
  Attr a;
  a.set_s(std::move(value));
  return a;
}

Attr boolAttr(bool value) {
  Attr a;
  a.set_b(value);
  return a;
}

std::string attrString(const Attr &attr) {
  std::ostringstream os;
  auto list = [&](const auto &values) {
    if (values.size() == 1) {
      os << values[0];
      return;
    }
    os << "[";
    for (int i = 0; i < values.size(); ++i)
      os << (i ? ", " : "") << values[i];
    os << "]";
  };
  switch (attr.value_case()) {
  case Attr::kInts:
    list(attr.ints().values());
    break;
  case Attr::kFloats:
    os.precision(9);
    list(attr.floats().values());
    break;
  case Attr::kS:
    os << '"' << attr.s() << '"';
    break;
  case Attr::kB:
    os << (attr.b() ? "true" : "false");
    break;
  default:
    os << "<unset>";
  }
  return os.str();
}

} // namespace castor::plan
