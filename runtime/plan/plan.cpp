#include "plan/plan.h"

#include <cctype>
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

namespace {

// The schema's own name of an enum value, lower-cased ("KAIMING_NORMAL" -> "kaiming_normal"), so
// that names shown to users cannot drift from plan.proto; "<what>(<n>)" for 0 or unknown values.
std::string lowerEnumName(const google::protobuf::EnumDescriptor *descriptor, int value, const char *what) {
  const google::protobuf::EnumValueDescriptor *v = value == 0 ? nullptr : descriptor->FindValueByNumber(value);
  if (!v)
    return std::string(what) + "(" + std::to_string(value) + ")";
  std::string name(v->name());
  for (char &c : name)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

} // namespace

std::string dtypeName(DType dtype) { return lowerEnumName(DType_descriptor(), dtype, "dtype"); }

std::string kindName(Tensor::Kind kind) { return lowerEnumName(Tensor::Kind_descriptor(), kind, "kind"); }

std::string initName(Parameter::Init init) { return lowerEnumName(Parameter::Init_descriptor(), init, "init"); }

Expected<LayerNormRows> layerNormRows(const Tensor &x, const Tensor &scale, int64_t axis) {
  auto r = shape::layerNormRows(shape::Shape(x.shape().begin(), x.shape().end()),
                                shape::Shape(scale.shape().begin(), scale.shape().end()), axis);
  if (!r)
    return Status::error(r.error);
  return LayerNormRows{r.shape[0], r.shape[1]};
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
