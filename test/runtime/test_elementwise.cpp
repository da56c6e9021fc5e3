// The unary element-wise ops of plan/elementwise_ops.h, each from its one description: its
// derivative against central differences of its formula, its attributes through the plan's
// parser, and its rows of ops.md. Every CASTOR_ELEMENTWISE_OP of ops.def is covered without being
// named here.
#include "plan/elementwise_ops.h"
#include "plan/op_attrs.h"
#include "plan/op_registry.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

using namespace castor;
namespace ew = castor::elementwise;

namespace {

// One variant of every op per attribute set: the defaults, and each bool attribute flipped.
template <class Op> std::vector<Op> variants() {
  std::vector<Op> ops{Op{}};
  Op probe;
  int bools = 0;
  probe.attrs([&](const char *, auto &field) { bools += std::is_same_v<std::decay_t<decltype(field)>, bool>; });
  for (int which = 0; which < bools; ++which) {
    Op flipped;
    int index = 0;
    flipped.attrs([&](const char *, auto &field) {
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, bool>)
        if (index++ == which)
          field = !field;
    });
    ops.push_back(flipped);
  }
  return ops;
}

// backward(dy, saved) against dy times the central difference of forward, at points of the
// formula's domain (sqrt's is x >= 0) where it is smooth (the differences at h and h/2 agree: a
// kink between them shows as a jump).
template <class Op> void checkDerivative(const std::string &name) {
  for (const Op &op : variants<Op>()) {
    int compared = 0, points = 0;
    for (double x = -4.9; x <= 4.9; x += 0.173) {
      const double h = 1e-5;
      if (std::isnan(op.forward(x - h)) || std::isnan(op.forward(x + h)))
        continue;
      ++points;
      const double d1 = (op.forward(x + h) - op.forward(x - h)) / (2 * h);
      const double d2 = (op.forward(x + h / 2) - op.forward(x - h / 2)) / h;
      if (std::fabs(d1 - d2) > 1e-6 * (1 + std::fabs(d1)))
        continue;
      const double dy = 0.75;
      const double saved = Op::saved == ew::Saved::Output ? op.forward(x) : x;
      INFO(name << " at x = " << x);
      CHECK(op.backward(dy, saved) == Approx(dy * d1).epsilon(1e-6).margin(1e-9));
      ++compared;
    }
    CHECK(compared > points / 2); // the formula is smooth almost everywhere
  }
}

// The text of an op's attributes in ops.md: "`alpha` float (0.2), `beta` float (0.5)", or "none".
template <class Op> std::string attrsText() {
  std::ostringstream text;
  Op op;
  op.attrs([&](const char *name, auto &field) {
    text << (text.tellp() > 0 ? ", " : "") << '`' << name << "` ";
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, bool>)
      text << "bool (" << (field ? "true" : "false") << ")";
    else if (std::isinf(field))
      text << "float (absent: " << (field < 0 ? "-inf" : "inf") << ")";
    else
      text << "float (" << field << ")";
  });
  return text.tellp() > 0 ? text.str() : "none";
}

// ops.md's rows of the op and its gradient, as elementwise_ops.h describes them.
template <class Op> std::vector<std::string> rows(const std::string &name) {
  const char *saved = Op::saved == ew::Saved::Output ? "y" : "x";
  return {"| `" + name + "` | x -> " + Op::formula + " | " + attrsText<Op>() + " |",
          "| `" + name + "_backward` | dy, " + saved + " -> " + Op::derivative + " | as the forward |"};
}

struct Entry {
  std::string name;
  std::function<void()> derivative;
  std::function<std::vector<std::string>()> rows;
  std::function<Status()> parseDefaults;
};

std::vector<Entry> entries() {
  return {
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                          \
  Entry{name, [] { checkDerivative<ew::id>(name); }, [] { return rows<ew::id>(name); },                         \
        [] {                                                                                                     \
          plan::Kernel k;                                                                                        \
          k.set_op(name);                                                                                        \
          return plan::parseElementwise<ew::id>(k).status();                                                     \
        }},
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  };
}

} // namespace

TEST_CASE("every element-wise op's derivative is the derivative of its formula", "[elementwise]") {
  const auto all = entries();
  REQUIRE(all.size() >= 7);
  for (const Entry &e : all) {
    INFO(e.name);
    e.derivative();
    CHECK(e.parseDefaults());
    CHECK(plan::opFromName(e.name));
    CHECK(plan::opFromName(e.name + "_backward"));
  }
}

namespace {
// A planted fault: sigmoid's gradient 1% off.
struct WrongSigmoid : ew::Sigmoid {
  template <class A> A backward(A dy, A y) const { return ew::Sigmoid::backward(dy, y) * 1.01; }
};
} // namespace

TEST_CASE("a derivative that is not its formula's fails the check", "[elementwise]") {
  const WrongSigmoid op;
  const double x = 0.3, h = 1e-5;
  const double d = (op.forward(x + h) - op.forward(x - h)) / (2 * h);
  CHECK(op.backward(1.0, op.forward(x)) != Approx(d).epsilon(1e-6));
}

TEST_CASE("element-wise attributes: unknown names, wrong types and refused values", "[elementwise]") {
  plan::Kernel k;
  k.set_op("hard_sigmoid");
  (*k.mutable_attrs())["alpha"] = plan::floatAttr(INFINITY);
  auto refused = plan::parseElementwise<ew::HardSigmoid>(k);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.status().message(), Catch::Contains("finite"));

  plan::Kernel gelu;
  gelu.set_op("gelu");
  (*gelu.mutable_attrs())["tanhh"] = plan::boolAttr(true);
  auto unknown = plan::parseElementwise<ew::Gelu>(gelu);
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.status().message(), Catch::Contains("unknown attribute 'tanhh'"));

  plan::Kernel clip;
  clip.set_op("clip");
  (*clip.mutable_attrs())["max"] = plan::floatAttr(6.0);
  auto parsed = plan::parseElementwise<ew::Clip>(clip);
  REQUIRE(parsed);
  CHECK(parsed->max == 6.0);
  CHECK(std::isinf(parsed->min));
  CHECK(parsed->forward(7.5) == 6.0);
}

TEST_CASE("ops.md specifies every element-wise op as elementwise_ops.h does", "[elementwise]") {
  std::ifstream in(CASTOR_OPS_MD);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string md = text.str();
  for (const Entry &e : entries())
    for (const std::string &row : e.rows()) {
      INFO("ops.md lacks this row (elementwise_ops.h's description of " << e.name << "):\n" << row);
      CHECK(md.find("\n" + row + "\n") != std::string::npos);
    }
}
