#include "plan/elementwise_program.h"

#include "plan/elementwise_ops.h"
#include "plan/op_attrs.h"
#include "plan/op_registry.h"
#include "plan/plan.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace castor::plan {

namespace {

enum class Arity { None, One, Two };

// How many operands a program op takes, and its attributes checked by the op's own parser.
Arity arityOf(const Kernel &k, Status &attrs) {
  const auto op = opFromName(k.op());
  if (!op)
    return Arity::None;
  switch (*op) {
  case OpId::Add:
  case OpId::Mul:
    attrs = parseNoAttrs(k);
    return Arity::Two;
  case OpId::Cast:
    attrs = parseNoAttrs(k);
    return Arity::One;
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                          \
  case OpId::id:                                                                                                 \
    attrs = parseElementwise<elementwise::id>(k).status();                                                       \
    return Arity::One;                                                                                           \
  case OpId::id##Backward:                                                                                       \
    attrs = parseElementwise<elementwise::id>(k).status();                                                       \
    return Arity::Two;
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  default:
    return Arity::None;
  }
}

bool isFloat(DType t) { return t == F32 || t == F16 || t == BF16 || t == F64; }

std::optional<DType> dtypeFromName(const std::string &name) {
  for (DType t : {F32, F16, BF16, F64})
    if (dtypeName(t) == name)
      return t;
  return std::nullopt;
}

// A line read left to right.
class Cursor {
public:
  explicit Cursor(const std::string &line) : s_(line) {}
  void skipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }
  bool done() {
    skipSpace();
    return i_ == s_.size();
  }
  bool eat(char c) {
    skipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  // [A-Za-z0-9_.+-]+: names, values, numbers.
  std::string word() {
    skipSpace();
    size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.' ||
                              s_[i_] == '+' || s_[i_] == '-'))
      ++i_;
    return s_.substr(start, i_ - start);
  }

private:
  const std::string &s_;
  size_t i_ = 0;
};

std::optional<ProgramValue> valueFromName(const std::string &w) {
  if (w.size() < 2 || (w[0] != 'i' && w[0] != 't'))
    return std::nullopt;
  for (size_t i = 1; i < w.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(w[i])))
      return std::nullopt;
  if (w.size() > 7)
    return std::nullopt;
  return ProgramValue{w[0] == 'i', std::atoi(w.c_str() + 1)};
}

// `{name=value, ...}` into the kernel's attributes: true/false, or a real number.
Status readAttrs(Cursor &c, Kernel &k) {
  if (!c.eat('{'))
    return Status::ok();
  if (c.eat('}'))
    return Status::ok();
  do {
    const std::string name = c.word();
    if (name.empty() || !c.eat('='))
      return Status::error("expected name=value in the attributes");
    const std::string value = c.word();
    if (value == "true" || value == "false") {
      (*k.mutable_attrs())[name] = boolAttr(value == "true");
      continue;
    }
    errno = 0;
    char *end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || errno == ERANGE)
      return Status::error("attribute '" + name + "' must be true, false or a real number, got '" + value + "'");
    (*k.mutable_attrs())[name] = floatAttr(v);
  } while (c.eat(','));
  if (!c.eat('}'))
    return Status::error("expected '}' after the attributes");
  return Status::ok();
}

// `)[a0,a1,...]` and, for a sum, an optional `{scale=s}`: the rest of a reduction output.
Status readReduction(Cursor &c, ProgramReduction &r) {
  if (!c.eat(')') || !c.eat('['))
    return Status::error("expected ')[axes]' after the reduced value");
  do {
    const std::string w = c.word();
    char *end = nullptr;
    const long axis = std::strtol(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || axis < 0 || axis > 64 || (!r.axes.empty() && axis <= r.axes.back()))
      return Status::error("the axes of a reduction are ascending integers from 0, got '" + w + "'");
    r.axes.push_back(axis);
  } while (c.eat(','));
  if (!c.eat(']'))
    return Status::error("expected ']' after the axes");
  Kernel attrs;
  CASTOR_RETURN_IF_ERROR(readAttrs(c, attrs));
  for (const auto &[name, a] : attrs.attrs()) {
    if (name != "scale" || r.kind != ReduceKind::Sum || a.value_case() == Attr::kB)
      return Status::error("a sum takes one attribute, scale (a real number); a mean none");
    r.scale = a.floats().values(0);
  }
  return Status::ok();
}

} // namespace

bool ElementwiseProgram::reduces() const {
  return std::any_of(reductions.begin(), reductions.end(),
                     [](const ProgramReduction &r) { return r.kind != ReduceKind::None; });
}

const ProgramReduction &ElementwiseProgram::reduction(size_t j) const {
  static const ProgramReduction none;
  return j < reductions.size() ? reductions[j] : none;
}

std::vector<int64_t> ElementwiseProgram::reducedAxes() const {
  for (const ProgramReduction &r : reductions)
    if (r.kind != ReduceKind::None)
      return r.axes;
  return {};
}

bool isProgramOp(const std::string &op) {
  Kernel k;
  k.set_op(op);
  Status ignored;
  return arityOf(k, ignored) != Arity::None;
}

std::string programValueName(const ProgramValue &value) {
  return (value.isInput ? "i" : "t") + std::to_string(value.index);
}

Expected<ElementwiseProgram> parseElementwiseProgram(const std::string &text, const std::vector<DType> &inputTypes,
                                                     const std::vector<DType> *outputTypes) {
  ElementwiseProgram p;
  std::vector<DType> temps;
  auto typeOf = [&](const ProgramValue &v) { return v.isInput ? inputTypes[size_t(v.index)] : temps[size_t(v.index)]; };
  auto defined = [&](const ProgramValue &v) {
    return v.index >= 0 && size_t(v.index) < (v.isInput ? inputTypes.size() : temps.size());
  };
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  bool sawOut = false;
  while (std::getline(lines, line)) {
    ++number;
    auto fail = [&](const std::string &why) {
      return Status::error("program line " + std::to_string(number) + " \"" + line + "\": " + why);
    };
    Cursor c(line);
    if (c.done())
      continue;
    if (sawOut)
      return fail("nothing may follow the out line");
    const std::string first = c.word();
    if (first == "out") {
      sawOut = true;
      do {
        const std::string w = c.word();
        ProgramReduction r;
        r.kind = w == "sum" ? ReduceKind::Sum : w == "mean" ? ReduceKind::Mean : ReduceKind::None;
        auto v = valueFromName(r.kind == ReduceKind::None ? w : (c.eat('(') ? c.word() : ""));
        if (!v || !defined(*v))
          return fail("an output must be a value defined before it, or its sum(...) or mean(...)");
        if (r.kind != ReduceKind::None) {
          if (v->isInput)
            return fail("a reduction reduces a value the program computes, not an input");
          if (Status s = readReduction(c, r); !s)
            return fail(s.message());
          if (!p.reductions.empty() && p.reduces() && r.axes != p.reducedAxes())
            return fail("every reduction of a program reduces the same axes");
        }
        p.outputs.push_back(*v);
        p.reductions.push_back(std::move(r));
      } while (c.eat(','));
      if (!c.done())
        return fail("expected ',' between outputs");
      continue;
    }
    auto result = valueFromName(first);
    if (!result || result->isInput || size_t(result->index) != p.instructions.size())
      return fail("instruction " + std::to_string(p.instructions.size()) + " must define t" +
                  std::to_string(p.instructions.size()));
    if (!c.eat('='))
      return fail("expected '='");
    ProgramInstruction inst;
    inst.kernel.set_op(c.word());
    if (!c.eat('('))
      return fail("expected '(' after the op");
    do {
      auto v = valueFromName(c.word());
      if (!v || !defined(*v))
        return fail("operand " + std::to_string(inst.operands.size()) + " is not an input or an earlier value");
      inst.operands.push_back(*v);
    } while (c.eat(','));
    if (!c.eat(')'))
      return fail("expected ')' after the operands");
    if (Status s = readAttrs(c, inst.kernel); !s)
      return fail(s.message());
    if (!c.eat(':'))
      return fail("expected ': <element type>'");
    const std::string typeName = c.word();
    auto dtype = dtypeFromName(typeName);
    if (!dtype || !c.done())
      return fail("the result type must be f32, f16, bf16 or f64, got '" + typeName + "'");
    inst.dtype = *dtype;
    Status attrs;
    const Arity arity = arityOf(inst.kernel, attrs);
    if (arity == Arity::None)
      return fail("'" + inst.kernel.op() + "' cannot stand in a fused element-wise program");
    if (!attrs)
      return fail(inst.kernel.op() + ": " + attrs.message());
    if (inst.operands.size() != (arity == Arity::Two ? 2u : 1u))
      return fail(inst.kernel.op() + " takes " + (arity == Arity::Two ? "two operands" : "one operand"));
    const bool cast = inst.kernel.op() == "cast";
    for (const ProgramValue &v : inst.operands) {
      const DType t = typeOf(v);
      if (!isFloat(t))
        return fail(programValueName(v) + " is " + dtypeName(t) + ", not a float type");
      if (!cast && t != inst.dtype)
        return fail(programValueName(v) + " is " + dtypeName(t) + " where " + inst.kernel.op() + " gives " +
                    dtypeName(inst.dtype));
    }
    temps.push_back(inst.dtype);
    p.instructions.push_back(std::move(inst));
  }
  if (p.instructions.empty() || !sawOut || p.outputs.empty())
    return Status::error("a program needs at least one instruction and an out line");
  if (outputTypes) {
    if (outputTypes->size() != p.outputs.size())
      return Status::error("the program's out line lists " + std::to_string(p.outputs.size()) + " values for " +
                           std::to_string(outputTypes->size()) + " outputs");
    for (size_t j = 0; j < p.outputs.size(); ++j)
      if (typeOf(p.outputs[j]) != (*outputTypes)[j])
        return Status::error("output " + std::to_string(j) + " is " + dtypeName((*outputTypes)[j]) + " but " +
                             programValueName(p.outputs[j]) + " is " + dtypeName(typeOf(p.outputs[j])));
  }
  return p;
}

std::string printElementwiseProgram(const ElementwiseProgram &program) {
  std::string text;
  for (size_t k = 0; k < program.instructions.size(); ++k) {
    const ProgramInstruction &inst = program.instructions[k];
    text += "t" + std::to_string(k) + " = " + inst.kernel.op() + "(";
    for (size_t i = 0; i < inst.operands.size(); ++i)
      text += (i ? ", " : "") + programValueName(inst.operands[i]);
    text += ")";
    // protobuf maps have no order; print by name so that the text is deterministic.
    std::map<std::string, Attr> attrs(inst.kernel.attrs().begin(), inst.kernel.attrs().end());
    if (!attrs.empty()) {
      text += " {";
      bool firstAttr = true;
      for (const auto &[name, a] : attrs) {
        char number[32];
        if (a.value_case() == Attr::kB)
          std::snprintf(number, sizeof number, "%s", a.b() ? "true" : "false");
        else
          std::snprintf(number, sizeof number, "%.17g", a.floats().values_size() ? a.floats().values(0) : 0.0);
        text += (firstAttr ? "" : ", ") + name + "=" + number;
        firstAttr = false;
      }
      text += "}";
    }
    text += " : " + dtypeName(inst.dtype) + "\n";
  }
  text += "out ";
  for (size_t j = 0; j < program.outputs.size(); ++j) {
    const ProgramReduction &r = program.reduction(j);
    const std::string value = programValueName(program.outputs[j]);
    text += j ? ", " : "";
    if (r.kind == ReduceKind::None) {
      text += value;
      continue;
    }
    text += (r.kind == ReduceKind::Sum ? "sum(" : "mean(") + value + ")[";
    for (size_t a = 0; a < r.axes.size(); ++a)
      text += (a ? "," : "") + std::to_string(r.axes[a]);
    text += "]";
    if (r.kind == ReduceKind::Sum && r.scale != 1.0) {
      char number[32];
      std::snprintf(number, sizeof number, "%.17g", r.scale);
      text += std::string("{scale=") + number + "}";
    }
  }
  text += "\n";
  return text;
}

} // namespace castor::plan
