// Transposed views (plan/storage_order.h): a transpose between [N,C,H,W] stored channels-last and
// [N,H,W,C] row-major that reads its operand's bytes in place.
#include "plan_builder.h"

#include "plan/plan_validator.h"
#include "plan/storage_order.h"

using namespace castor;
using castor::test::PlanBuilder;
using Catch::Matchers::Contains;

namespace {

plan::Attr ints(std::vector<int64_t> values) {
  plan::Attr a;
  for (int64_t v : values)
    a.mutable_ints()->add_values(v);
  return a;
}

// x -> conv2d (1x1) -> c [2,4,3,5]; t = transpose(c, 0,2,3,1) [2,3,5,4], a view of c when `view`;
// y = relu(t); z = sigmoid(c), read after the view's reader.
struct TransposePlan {
  PlanBuilder b;
  uint32_t x, w, c, t, y, z;
  explicit TransposePlan(bool view, std::vector<int64_t> perm = {0, 2, 3, 1}) {
    x = b.tensor("x", {2, 3, 3, 5}, plan::Tensor::INPUT);
    w = b.tensor("w", {4, 3, 1, 1}, plan::Tensor::PARAMETER);
    c = b.tensor("c", {2, 4, 3, 5}, plan::Tensor::ACTIVATION);
    std::vector<int64_t> shape{2, 4, 3, 5};
    std::vector<int64_t> permuted;
    for (int64_t d : perm)
      permuted.push_back(shape[size_t(d)]);
    t = b.tensor("t", permuted, plan::Tensor::ACTIVATION, plan::F32,
                 view ? int64_t(b.plan.tensors(int(c)).offset()) : -1);
    if (view)
      b.plan.mutable_tensors(int(t))->set_view_of(c);
    y = b.tensor("y", permuted, plan::Tensor::OUTPUT);
    z = b.tensor("z", {2, 4, 3, 5}, plan::Tensor::OUTPUT);
    b.parameter("w", w, plan::Parameter::FILE);
    b.kernel("conv2d", {x, w}, {c});
    b.kernel("transpose", {c}, {t}, {{"perm", ints(perm)}});
    b.kernel("relu", {t}, {y});
    b.kernel("sigmoid", {c}, {z});
  }
};

std::vector<double> ramp(size_t n, double scale) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * (double(i % 13) - 6);
  return v;
}

} // namespace

TEST_CASE("a transposed view's [N,C,H,W] side is stored channels-last, its [N,H,W,C] side row-major",
          "[plan][views][layout]") {
  TransposePlan p(true);
  REQUIRE(plan::validatePlan(p.b.plan).message() == "");
  auto views = plan::transposedViews(p.b.plan);
  REQUIRE(views.size() == 1);
  CHECK(views[0].kernel == 1);
  CHECK(views[0].channelsLast == p.c);
  CHECK(views[0].rowMajor == p.t);
  for (auto preference : {plan::OrderPreference::ConvolutionsChannelsLast, plan::OrderPreference::RowMajor}) {
    auto rowMajor = plan::rowMajorTensors(p.b.plan, preference);
    CHECK_FALSE(rowMajor.count(p.c));
    CHECK_FALSE(rowMajor.count(p.x)); // the convolution's group shares c's order
    CHECK(rowMajor.count(p.t));
  }
  // Without the view, a row-major backend keeps every tensor row-major.
  TransposePlan copy(false);
  CHECK(plan::rowMajorTensors(copy.b.plan, plan::OrderPreference::RowMajor).count(copy.c));
  CHECK(plan::channelsLastForViews(p.b.plan) == std::unordered_set<uint32_t>{p.c});
  CHECK(plan::conflictingTransposedViews(p.b.plan).empty());
}

TEST_CASE("the validator refuses transposed views that cannot be the same bytes", "[plan][views][layout]") {
  std::string expected;
  std::unique_ptr<TransposePlan> p;
  SECTION("another perm") {
    p = std::make_unique<TransposePlan>(true, std::vector<int64_t>{0, 2, 1, 3});
    expected = "or a transpose between [N,C,H,W] and [N,H,W,C]";
  }
  SECTION("a [N,C,H,W] side that a matmul reads as rows") {
    p = std::make_unique<TransposePlan>(true);
    auto m = p->b.tensor("m", {5, 2}, plan::Tensor::PARAMETER);
    auto r = p->b.tensor("r", {2, 4, 3, 2}, plan::Tensor::OUTPUT);
    p->b.kernel("matmul", {p->c, m}, {r});
    CHECK(plan::conflictingTransposedViews(p->b.plan) == std::vector<int>{1});
    expected = "is a transposed view, but its [N,C,H,W] side cannot be stored channels-last";
  }
  Status s = plan::validatePlan(p->b.plan);
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Contains(expected));
}

TEST_CASE("the CPU reference computes a transposed view as the transpose it replaces", "[plan][views][layout]") {
  std::vector<std::vector<double>> results[2];
  for (bool view : {true, false}) {
    TransposePlan p(view);
    auto backend = test::loadOnCpu(p.b.plan);
    test::uploadValues(*backend, p.b.plan, p.x, ramp(90, 0.25));
    test::uploadValues(*backend, p.b.plan, p.w, ramp(12, 0.5));
    test::runOk(*backend);
    results[view] = {test::downloadValues(*backend, p.b.plan, p.y), test::downloadValues(*backend, p.b.plan, p.z),
                     test::downloadValues(*backend, p.b.plan, p.c)}; // c read back in the plan's order
  }
  CHECK(results[1] == results[0]);
  // The values really are the transpose: y[n,h,w,c] = relu(c[n,c,h,w]).
  const auto &y = results[1][0], &c = results[1][2];
  for (int n = 0; n < 2; ++n)
    for (int ch = 0; ch < 4; ++ch)
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 5; ++w)
          CHECK(y[size_t(((n * 3 + h) * 5 + w) * 4 + ch)] == std::max(c[size_t(((n * 4 + ch) * 3 + h) * 5 + w)], 0.0));
}
