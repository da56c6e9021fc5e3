// What a backend promises about INPUT tensors: an upload holds for every later run until the next
// upload, reads back as uploaded, and may arrive before the last step's outputs are read, even
// when the plan reuses the input's arena slot for an output (as the memory planner does once a
// step has read the input).
#include "plan_builder.h"

using namespace castor;
using castor::test::PlanBuilder;

namespace {

// y = relu(x), with y in x's arena slot.
PlanBuilder inPlacePlan(uint32_t &x, uint32_t &y) {
  PlanBuilder b;
  x = b.tensor("x", {4}, plan::Tensor::INPUT);
  y = b.tensor("y", {4}, plan::Tensor::OUTPUT, plan::F32, int64_t(b.plan.tensors(0).offset()));
  b.kernel("relu", {x}, {y});
  return b;
}

} // namespace

TEST_CASE("an input survives the step that reuses its slot", "[backend-inputs]") {
  uint32_t x, y;
  PlanBuilder b = inPlacePlan(x, y);
  auto backend = createCpuBackend();
  REQUIRE(backend->load(b.plan).isOk());

  castor::test::uploadValues(*backend, b.plan, x, {1, -2, 3, -4});
  castor::test::runOk(*backend);
  CHECK(castor::test::downloadValues(*backend, b.plan, x) == std::vector<double>{1, -2, 3, -4});
  // The next input arrives before this step's output is read: the output stays.
  castor::test::uploadValues(*backend, b.plan, x, {-5, 6, -7, 8});
  CHECK(castor::test::downloadValues(*backend, b.plan, y) == std::vector<double>{1, 0, 3, 0});
  castor::test::runOk(*backend);
  CHECK(castor::test::downloadValues(*backend, b.plan, y) == std::vector<double>{0, 6, 0, 8});
  // A run without a new upload reads the last one again.
  castor::test::runOk(*backend);
  CHECK(castor::test::downloadValues(*backend, b.plan, y) == std::vector<double>{0, 6, 0, 8});
}
