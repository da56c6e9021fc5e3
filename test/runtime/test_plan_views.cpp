// Views (Tensor.view_of): a reshape that reads its source's bytes in another shape.
#include "plan_builder.h"

#include "plan/plan_validator.h"
#include "plan/storage_order.h"

using namespace castor;
using castor::test::PlanBuilder;
using Catch::Matchers::Contains;

namespace {

// x -> relu -> a [4, 8]; v = a seen as [32] (a view); y = sigmoid(v); z = a + a: a is read after
// the view's reader.
struct ViewPlan {
  PlanBuilder b;
  uint32_t x, a, v, y, z;
  ViewPlan() {
    x = b.tensor("x", {4, 8}, plan::Tensor::INPUT);
    a = b.tensor("a", {4, 8}, plan::Tensor::ACTIVATION);
    v = b.tensor("v", {32}, plan::Tensor::ACTIVATION, plan::F32, int64_t(b.plan.tensors(int(a)).offset()));
    b.plan.mutable_tensors(int(v))->set_view_of(a);
    y = b.tensor("y", {32}, plan::Tensor::OUTPUT);
    z = b.tensor("z", {4, 8}, plan::Tensor::OUTPUT);
    b.kernel("relu", {x}, {a});
    b.kernel("reshape", {a}, {v});
    b.kernel("sigmoid", {v}, {y});
    b.kernel("add", {a, a}, {z});
  }
};

} // namespace

TEST_CASE("a view shares its source's bytes and live range", "[plan][views]") {
  ViewPlan p;
  REQUIRE(plan::validatePlan(p.b.plan).message() == "");
  auto r = plan::computeLiveRanges(p.b.plan);
  CHECK(r[p.a].begin == 0);
  CHECK(r[p.a].end == 3); // read by the add
  CHECK(r[p.v].begin == r[p.a].begin);
  CHECK(r[p.v].end == r[p.a].end);
  auto roots = plan::viewRoots(p.b.plan);
  CHECK(roots.at(p.v) == p.a);
  CHECK(roots.at(p.a) == p.a);
  CHECK_FALSE(roots.count(p.x));

  auto backend = test::loadOnCpu(p.b.plan);
  std::vector<double> in(32);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = double(i) - 16;
  test::uploadValues(*backend, p.b.plan, p.x, in);
  test::runOk(*backend);
  auto y = test::downloadValues(*backend, p.b.plan, p.y);
  auto z = test::downloadValues(*backend, p.b.plan, p.z);
  for (size_t i = 0; i < in.size(); ++i) {
    const double relu = std::max(in[i], 0.0);
    CHECK(y[i] == Approx(1 / (1 + std::exp(-relu))).epsilon(1e-6));
    CHECK(z[i] == 2 * relu);
  }
}

TEST_CASE("the validator refuses views that are not the same bytes", "[plan][views]") {
  ViewPlan p;
  std::string expected;
  SECTION("another offset") {
    p.b.plan.mutable_tensors(int(p.v))->set_offset(p.b.plan.tensors(int(p.y)).offset());
    expected = "differs in offset, bytes or dtype";
  }
  SECTION("a missing source") {
    p.b.plan.mutable_tensors(int(p.v))->set_view_of(99);
    expected = "which does not exist";
  }
  SECTION("a view of an input") {
    p.b.plan.mutable_tensors(int(p.v))->set_offset(p.b.plan.tensors(int(p.x)).offset());
    p.b.plan.mutable_tensors(int(p.v))->set_view_of(p.x);
    expected = "views join activations only";
  }
  SECTION("written by a kernel other than a reshape of its source") {
    p.b.plan.mutable_kernels(1)->set_op("relu");
    expected = "only a reshape, flatten or identity of that tensor may";
  }
  SECTION("its source written again") {
    p.b.kernel("relu", {p.x}, {p.a});
    expected = "again, but views share its bytes";
  }
  Status s = plan::validatePlan(p.b.plan);
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Contains(expected));
}

TEST_CASE("a tensor of another size may not share a view's bytes while the view's source lives",
          "[plan][views]") {
  ViewPlan p;
  // w takes y's place: written by a kernel between the view's reader and the source's last reader.
  auto w = p.b.tensor("w", {4, 8}, plan::Tensor::ACTIVATION, plan::F32, int64_t(p.b.plan.tensors(int(p.a)).offset()));
  auto &k = *p.b.plan.mutable_kernels();
  k.Add()->CopyFrom(k.Get(3));
  k.Mutable(3)->set_op("relu");
  k.Mutable(3)->clear_inputs();
  k.Mutable(3)->add_inputs(p.x);
  k.Mutable(3)->clear_outputs();
  k.Mutable(3)->add_outputs(w);
  Status s = plan::validatePlan(p.b.plan);
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Contains("overlap in the arena while both are live"));
}

TEST_CASE("storage order: a view of another shape is row-major where the orders differ",
          "[plan][views][layout]") {
  PlanBuilder b;
  auto x = b.tensor("x", {2, 3, 8, 8}, plan::Tensor::INPUT);
  auto w = b.tensor("w", {4, 3, 3, 3}, plan::Tensor::PARAMETER);
  auto c = b.tensor("c", {2, 4, 8, 8}, plan::Tensor::ACTIVATION);
  auto f = b.tensor("f", {2, 256}, plan::Tensor::ACTIVATION, plan::F32, int64_t(b.plan.tensors(int(c)).offset()));
  auto g = b.tensor("g", {2, 4, 1, 1}, plan::Tensor::ACTIVATION);
  auto h = b.tensor("h", {2, 4}, plan::Tensor::ACTIVATION, plan::F32, int64_t(b.plan.tensors(int(g)).offset()));
  b.kernel("conv2d", {x, w}, {c});
  b.kernel("global_avg_pool", {c}, {g});
  b.kernel("flatten", {g}, {h});
  b.kernel("reshape", {c}, {f});

  // Without views: the convolution's group is channels-last.
  CHECK_FALSE(plan::rowMajorTensors(b.plan).count(c));
  CHECK(plan::ordersDiffer(b.plan.tensors(int(c))));
  CHECK_FALSE(plan::ordersDiffer(b.plan.tensors(int(g))));

  // A view of the pooled [2, 4, 1, 1] output leaves it so (one pixel: both orders are the same
  // bytes); a view of the convolution's output as [2, 256] makes its group row-major.
  b.plan.mutable_tensors(int(h))->set_view_of(g);
  CHECK_FALSE(plan::rowMajorTensors(b.plan).count(c));
  b.plan.mutable_tensors(int(f))->set_view_of(c);
  CHECK(plan::rowMajorTensors(b.plan).count(c));
  CHECK(plan::rowMajorTensors(b.plan).count(x));
}
