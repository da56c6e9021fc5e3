// fused_elementwise: the validator's refusals (malformed programs, shapes, types), and the CPU
// reference against the same program run as separate kernels, bit for bit, in f32, f16 and bf16.
#include "../common/fused_elementwise_cases.h"
#include "plan_builder.h"
#include "test_helpers.h"

#include "core/session.h"
#include "plan/plan_validator.h"
#include "weights/init.h"

#include <random>

using namespace castor;
using castor::test::PlanBuilder;
using Catch::Matchers::Contains;

namespace {

plan::Attr programAttr(const std::string &text) {
  plan::Attr a;
  a.set_s(text);
  return a;
}

// Runs the case's plan (fused or not) on the CPU with the inputs of `seed`; the outputs' bytes.
std::vector<std::vector<uint8_t>> runCase(const test::FusedProgramCase &c, plan::DType t, bool fused, uint64_t seed,
                                          const std::string &program = "") {
  PlanBuilder b;
  const test::BuiltFusedCase built = test::addFusedCase(b, c, t, fused, program);
  auto backend = test::loadOnCpu(b.plan);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < built.inputs.size(); ++i)
    test::uploadValues(*backend, b.plan, built.inputs[i], test::randomValues(c.inputs[i].shape, rng, c.lo, c.hi));
  test::runOk(*backend);
  std::vector<std::vector<uint8_t>> outs;
  for (uint32_t id : built.outputs) {
    std::vector<uint8_t> bytes(b.plan.tensors(int(id)).bytes());
    REQUIRE(backend->download(id, bytes.data(), bytes.size()).isOk());
    outs.push_back(std::move(bytes));
  }
  return outs;
}

} // namespace

TEST_CASE("the CPU reference of a fused element-wise group is its ops run one by one, bit for bit",
          "[fused-elementwise]") {
  for (const std::vector<int64_t> &domain : {std::vector<int64_t>{2, 3, 5, 7}, std::vector<int64_t>{1, 16, 9, 9}})
    for (const test::FusedProgramCase &c : test::fusedProgramCases(domain))
      for (plan::DType t : {plan::F32, plan::F16, plan::BF16}) {
        INFO(c.name << " " << plan::dtypeName(t) << " over " << domain[0] << "x" << domain[1] << "x" << domain[2]);
        const auto fused = runCase(c, t, true, 7), unfused = runCase(c, t, false, 7);
        REQUIRE(fused.size() == unfused.size());
        for (size_t o = 0; o < fused.size(); ++o)
          CHECK(fused[o] == unfused[o]);
      }
}

// The comparison above can fail: a program that differs in one op gives other bytes.
TEST_CASE("a fused group that computes another op than the unfused one differs from it", "[fused-elementwise]") {
  const test::FusedProgramCase c = test::fusedProgramCases({2, 3, 5, 7})[0]; // silu
  for (plan::DType t : {plan::F32, plan::F16, plan::BF16})
    CHECK(runCase(c, t, true, 7, "t0 = sigmoid(i0) : {T}\nt1 = add(i0, t0) : {T}\nout t1\n") !=
          runCase(c, t, false, 7));
}

// An output that updates its input in place (the same tensor id) reads each element first.
TEST_CASE("a fused group may update an input in place", "[fused-elementwise]") {
  PlanBuilder b;
  const uint32_t x = b.tensor("x", {3, 4000}, plan::Tensor::INPUT, plan::F16);
  const uint32_t s = b.tensor("s", {3, 4000}, plan::Tensor::STATE, plan::F16);
  const uint32_t y = b.tensor("y", {3, 4000}, plan::Tensor::OUTPUT, plan::F16);
  b.parameter("s", s, plan::Parameter::ONES);
  b.kernel("fused_elementwise", {s, x}, {s, y},
           {{"program", programAttr("t0 = mul(i0, i1) : f16\nt1 = add(t0, i0) : f16\nout t1, t0\n")}});
  auto backend = test::loadOnCpu(b.plan);
  std::mt19937_64 rng(3);
  const std::vector<double> xs = test::randomValues(12000, rng);
  test::uploadValues(*backend, b.plan, x, xs);
  test::uploadValues(*backend, b.plan, s, std::vector<double>(12000, 2.0));
  test::runOk(*backend);
  const std::vector<double> got = test::downloadValues(*backend, b.plan, s), product = test::downloadValues(*backend, b.plan, y);
  for (size_t i = 0; i < got.size(); i += 997) {
    CHECK(product[i] == weights::decodeValues(plan::F16, weights::encodeValues(plan::F16, {2.0 * xs[i]}))[0]);
    CHECK(got[i] == weights::decodeValues(plan::F16, weights::encodeValues(plan::F16, {product[i] + 2.0}))[0]);
  }
}

TEST_CASE("the validator refuses a fused_elementwise kernel whose program, shapes or types are wrong", "[plan]") {
  PlanBuilder b;
  const uint32_t x = b.tensor("x", {2, 4, 3, 3}, plan::Tensor::INPUT, plan::F16);
  const uint32_t g = b.tensor("g", {2, 4, 1, 1}, plan::Tensor::INPUT, plan::F16);
  const uint32_t y = b.tensor("y", {2, 4, 3, 3}, plan::Tensor::OUTPUT, plan::F16);
  plan::Kernel &k = b.kernel("fused_elementwise", {x, g}, {y},
                             {{"program", programAttr("t0 = mul(i0, i1) : f16\nt1 = sigmoid(t0) : f16\nout t1\n")}});
  k.set_name("se");
  REQUIRE(plan::validatePlan(b.plan).isOk());
  plan::Plan p = b.plan;
  plan::Kernel &bad = *p.mutable_kernels(0);
  auto setProgram = [&](const std::string &text) { (*bad.mutable_attrs())["program"] = programAttr(text); };
  std::vector<std::string> expected;

  SECTION("no program") {
    bad.mutable_attrs()->erase("program");
    expected = {"needs its element-wise program"};
  }
  SECTION("a program that is not a string") {
    (*bad.mutable_attrs())["program"] = plan::floatAttr(1.0);
    expected = {"'program' must be a string"};
  }
  SECTION("an attribute besides the program") {
    (*bad.mutable_attrs())["axis"] = plan::intsAttr({1});
    expected = {"unknown attribute 'axis'"};
  }
  SECTION("a malformed line, named with its number") {
    setProgram("t0 = mul(i0, i1) : f16\nt1 = sigmoid(t0 : f16\nout t1\n");
    expected = {"program line 2", "sigmoid(t0 : f16", "expected ')'"};
  }
  SECTION("an op that cannot stand in a program") {
    setProgram("t0 = conv2d(i0, i1) : f16\nout t0\n");
    expected = {"program line 1", "'conv2d' cannot stand in"};
  }
  SECTION("a value used before it is defined") {
    setProgram("t0 = mul(i0, t1) : f16\nt1 = sigmoid(t0) : f16\nout t1\n");
    expected = {"program line 1", "operand 1 is not an input or an earlier value"};
  }
  SECTION("an input the kernel lacks") {
    setProgram("t0 = mul(i0, i2) : f16\nout t0\n");
    expected = {"operand 1 is not an input"};
  }
  SECTION("an operand of another type") {
    setProgram("t0 = mul(i0, i1) : f32\nout t0\n");
    expected = {"i0 is f16 where mul gives f32"};
  }
  SECTION("an op's attribute refused by its own parser") {
    setProgram("t0 = mul(i0, i1) : f16\nt1 = hard_sigmoid(t0) {slope=0.1} : f16\nout t1\n");
    expected = {"program line 2", "unknown attribute 'slope'"};
  }
  SECTION("an output whose type is not its value's") {
    p.mutable_tensors(int(y))->set_dtype(plan::F32);
    p.mutable_tensors(int(y))->set_bytes(2 * 4 * 3 * 3 * 4);
    p.set_arena_bytes(p.arena_bytes() + 256); // y, the last slot, grows
    expected = {"output 0 is f32 but t1 is f16"};
  }
  SECTION("more outputs than the out line lists") {
    const uint32_t z = b.tensor("z", {2, 4, 3, 3}, plan::Tensor::OUTPUT, plan::F16);
    p = b.plan;
    p.mutable_kernels(0)->add_outputs(z);
    expected = {"lists 1 values for 2 outputs"};
  }
  SECTION("no out line") {
    setProgram("t0 = mul(i0, i1) : f16\n");
    expected = {"an out line"};
  }
  SECTION("an input that does not broadcast to the domain") {
    p.mutable_tensors(int(g))->set_shape(1, 3);
    p.mutable_tensors(int(g))->set_bytes(2 * 3 * 2);
    expected = {"input 1 [2, 3, 1, 1] does not broadcast to the domain"};
  }
  SECTION("an input of higher rank than the domain") {
    p.mutable_tensors(int(g))->clear_shape();
    for (int64_t d : {1, 2, 4, 1, 1})
      p.mutable_tensors(int(g))->add_shape(d);
    expected = {"input 1 [1, 2, 4, 1, 1] does not broadcast to the domain"};
  }
  SECTION("outputs of two shapes") {
    const uint32_t z = b.tensor("z", {2, 4, 1, 1}, plan::Tensor::OUTPUT, plan::F16);
    p = b.plan;
    p.mutable_kernels(0)->add_outputs(z);
    (*p.mutable_kernels(0)->mutable_attrs())["program"] = programAttr("t0 = mul(i0, i1) : f16\nout t0, t0\n");
    expected = {"output 1", "not the domain"};
  }
  Status s = plan::validatePlan(p);
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Contains("kernel #0 (fused_elementwise 'se')"));
  for (const std::string &e : expected)
    CHECK_THAT(s.message(), Contains(e));
  // A session refuses it before anything runs.
  auto session = Session::create(p, createCpuBackend(), {});
  REQUIRE_FALSE(session.isOk());
  CHECK_THAT(session.message(), Contains("invalid plan"));
}
