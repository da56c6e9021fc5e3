// The op registry (plan/ops.def) against everything that dispatches on it: names round-trip, the
// validator has a rule for every op and refuses names outside the registry, and each backend
// implements a subset of the registry (the CPU reference all of it); what a backend lacks is
// listed in the test's output.
#include "plan_builder.h"

#include "castor/backend.h"
#include "plan/op_registry.h"
#include "plan/plan_validator.h"
#if CASTOR_RUN_HAS_CUDA
#include "castor/cuda_backend.h"
#endif

#include <algorithm>
#include <set>
#include <string>

using namespace castor;
using castor::test::PlanBuilder;
using Catch::Matchers::Contains;

namespace {

// The registry's ops that `implemented` lacks, as "a, b, c" ("" when none).
std::string lacking(const std::vector<plan::OpId> &implemented) {
  const std::set<plan::OpId> have(implemented.begin(), implemented.end());
  std::string missing;
  for (plan::OpId op : plan::allOps())
    if (!have.count(op))
      missing += (missing.empty() ? "" : ", ") + std::string(plan::opName(op));
  return missing;
}

} // namespace

TEST_CASE("every op of the registry has one name that maps back to it", "[op-registry]") {
  std::set<std::string> names;
  REQUIRE(plan::allOps().size() == plan::kOpCount);
  for (plan::OpId op : plan::allOps()) {
    const std::string name(plan::opName(op));
    CHECK(!name.empty());
    CHECK(names.insert(name).second); // no name twice
    auto back = plan::opFromName(name);
    REQUIRE(back.has_value());
    CHECK(*back == op);
    CHECK(!plan::categoryName(plan::opCategory(op)).empty());
  }
  CHECK_FALSE(plan::opFromName("").has_value());
  CHECK_FALSE(plan::opFromName("Relu").has_value()); // names are case-sensitive
  CHECK_FALSE(plan::opFromName("relu ").has_value());
}

// The fused ops are ops.def's last section: isFusedOp holds from the first of them to the end,
// so that a fused op added there is one isFusedOp names (castor-run bench reports them).
TEST_CASE("the fused ops are the registry's last section", "[op-registry]") {
  const std::vector<plan::OpId> ops = plan::allOps();
  const auto first = std::find_if(ops.begin(), ops.end(), plan::isFusedOp);
  REQUIRE(first != ops.end());
  CHECK(*first == plan::OpId::BatchNormReluTraining);
  for (auto it = ops.begin(); it != ops.end(); ++it) {
    INFO(plan::opName(*it));
    CHECK(plan::isFusedOp(*it) == (it >= first));
  }
  CHECK(plan::isFusedOp(plan::OpId::BatchNormReluTrainingBackward));
  CHECK_FALSE(plan::isFusedOp(plan::OpId::BatchNormTraining));
}

TEST_CASE("the validator has a rule for every op of the registry", "[op-registry]") {
  INFO("ops without a validator rule: " << lacking(plan::opsWithRules()));
  CHECK(lacking(plan::opsWithRules()).empty());
}

TEST_CASE("the validator refuses an op outside the registry, naming it", "[op-registry]") {
  PlanBuilder b;
  auto x = b.tensor("x", {2, 3}, plan::Tensor::INPUT);
  auto y = b.tensor("y", {2, 3}, plan::Tensor::OUTPUT);
  b.kernel("gelu_tanh", {x}, {y});
  const Status s = plan::validatePlan(b.plan);
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Contains("unknown op 'gelu_tanh'"));
  CHECK_THAT(s.message(), Contains("kernel #0"));
}

TEST_CASE("the CPU reference backend implements every op of the registry", "[op-registry]") {
  const std::string missing = lacking(cpuBackendOps());
  INFO("the cpu backend lacks: " << missing);
  CHECK(missing.empty());
}

#if CASTOR_RUN_HAS_CUDA
TEST_CASE("the CUDA backend implements a subset of the registry and lists what it lacks", "[op-registry]") {
  const auto ops = cudaBackendOps();
  const std::string missing = lacking(ops);
  WARN("the cuda backend lacks: " << (missing.empty() ? "nothing" : missing));
  const std::set<plan::OpId> unique(ops.begin(), ops.end());
  CHECK(unique.size() == ops.size());
  CHECK(ops.size() <= plan::kOpCount);
  // A backend may lack an op; the plans Castor compiles for a GPU today use all of these.
  for (const char *name : {"conv2d", "conv2d_backward_data", "conv2d_backward_filter", "batch_norm_training",
                           "batch_norm_training_backward", "relu", "relu_backward", "add", "softmax_cross_entropy",
                           "softmax_cross_entropy_backward", "adamw_update", "sgd_update", "unscale_gradients",
                           "update_loss_scale"}) {
    INFO(name);
    CHECK(unique.count(*plan::opFromName(name)) == 1);
  }
}
#endif
