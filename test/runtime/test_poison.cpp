// The NaN-poison debug mode exposes plans whose live tensors alias in the arena.
#include "plan_builder.h"

#include "plan/plan_validator.h"

#include <cmath>
#include <cstdlib>

using namespace castor;
using castor::test::PlanBuilder;

namespace {

// x -> a = relu(x) -> b = mul(x, x) [b wrongly shares a's slot] -> c = identity(a) -> y = b + c.
// a is still live when b is written, so b clobbers it. Without poisoning the result is finite
// but wrong (2 x^2 instead of x^2 + relu(x)); with poisoning a's slot (= b's) is filled with NaN
// after a's last use, and y comes out NaN.
PlanBuilder aliasingPlan(uint32_t &x, uint32_t &y) {
  PlanBuilder b;
  x = b.tensor("x", {4}, plan::Tensor::INPUT);
  auto a = b.tensor("a", {4}, plan::Tensor::ACTIVATION);
  auto bb = b.tensor("b", {4}, plan::Tensor::ACTIVATION, plan::F32, int64_t(b.plan.tensors(1).offset()));
  auto c = b.tensor("c", {4}, plan::Tensor::ACTIVATION);
  y = b.tensor("y", {4}, plan::Tensor::OUTPUT);
  b.kernel("relu", {x}, {a});
  b.kernel("mul", {x, x}, {bb});
  b.kernel("identity", {a}, {c});
  b.kernel("add", {bb, c}, {y});
  return b;
}

std::vector<double> run(const plan::Plan &p, uint32_t x, uint32_t y, bool poison) {
  BackendOptions o;
  o.poison = poison;
  auto backend = createCpuBackend(o);
  REQUIRE(backend->load(p).isOk());
  castor::test::uploadValues(*backend, p, x, {1, -2, 3, -4});
  REQUIRE(backend->run().isOk());
  return castor::test::downloadValues(*backend, p, y);
}

} // namespace

TEST_CASE("the validator refuses the aliasing plan", "[poison]") {
  uint32_t x, y;
  PlanBuilder b = aliasingPlan(x, y);
  Status s = plan::validatePlan(b.plan);
  CHECK_THAT(s.message(), Catch::Matchers::Contains("overlap"));
}

TEST_CASE("poison mode turns silent aliasing into NaN", "[poison]") {
  uint32_t x, y;
  PlanBuilder b = aliasingPlan(x, y);

  auto plain = run(b.plan, x, y, false);
  for (double v : plain)
    CHECK(std::isfinite(v)); // wrong, but nothing shows it
  CHECK(plain[0] == 2.0);    // 2 * 1^2, where 1^2 + relu(1) = 2 by luck...
  CHECK(plain[1] == 8.0);    // ...but 2 * (-2)^2 = 8 instead of 4 + 0

  auto poisoned = run(b.plan, x, y, true);
  for (double v : poisoned)
    CHECK(std::isnan(v));
}

TEST_CASE("poison mode leaves a correct plan's results alone", "[poison]") {
  uint32_t x, y;
  PlanBuilder b = aliasingPlan(x, y);
  // Give b its own slot: now the plan is valid and poisoning changes nothing.
  b.plan.mutable_tensors(2)->set_offset(b.next);
  b.plan.set_arena_bytes(b.next + 256);
  REQUIRE(plan::validatePlan(b.plan).message() == "");
  auto plain = run(b.plan, x, y, false);
  auto poisoned = run(b.plan, x, y, true);
  CHECK(plain == std::vector<double>{2, 4, 12, 16});
  CHECK(poisoned == plain);
}

TEST_CASE("CASTOR_POISON=1 switches poisoning on", "[poison]") {
  uint32_t x, y;
  PlanBuilder b = aliasingPlan(x, y);
  ::setenv("CASTOR_POISON", "1", 1);
  CHECK(poisonRequestedByEnvironment());
  auto r = run(b.plan, x, y, false);
  ::unsetenv("CASTOR_POISON");
  CHECK(std::isnan(r[0]));
  CHECK_FALSE(poisonRequestedByEnvironment());
}
