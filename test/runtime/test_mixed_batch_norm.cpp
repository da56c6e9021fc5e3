// Mixed BatchNorm on the CPU backend: f16 or bf16 data (x, y, dy, dx) with f32 scale, bias and
// statistics, as the autocast pass emits it. The kernels compute in fp64 from the stored values,
// so each result must be the fp64 result on the same inputs, rounded once into its tensor's
// dtype. Also the validator's refusals of the combinations shape::batchNormTypes forbids.
#include "plan_builder.h"
#include "test_helpers.h"

#include "plan/plan_validator.h"
#include "weights/init.h"

#include <functional>

using namespace castor;
using castor::test::Operand;
using castor::test::runKernel;
using Vec = std::vector<double>;
using K = plan::Tensor;
using Catch::Matchers::Contains;

namespace {

Vec rounded(plan::DType dtype, const Vec &values) {
  return weights::decodeValues(dtype, weights::encodeValues(dtype, values));
}

// `values` as an operand of `dtype`, and the same stored values as an f64 operand.
std::pair<Operand, Operand> operand(std::vector<int64_t> shape, plan::DType dtype, const Vec &values) {
  Vec stored = rounded(dtype, values);
  return {Operand{shape, stored, dtype}, Operand{shape, stored, plan::F64}};
}

Operand out(std::vector<int64_t> shape, plan::DType dtype) { return Operand{std::move(shape), {}, dtype}; }

} // namespace

TEST_CASE("mixed batch norm: low-precision data, f32 statistics, fp64 arithmetic", "[mixed-precision]") {
  const std::vector<int64_t> xs{3, 4, 2, 3}, cs{4};
  std::mt19937_64 rng(7);
  for (plan::DType low : {plan::F16, plan::BF16}) {
    INFO("data dtype " << plan::dtypeName(low));
    auto [x, x64] = operand(xs, low, castor::test::randomValues(xs, rng, -3, 5));
    auto [g, g64] = operand(cs, plan::F32, castor::test::randomValues(cs, rng, 0.5, 2));
    auto [be, be64] = operand(cs, plan::F32, castor::test::randomValues(cs, rng));
    auto [dy, dy64] = operand(xs, low, castor::test::randomValues(xs, rng));

    auto fwd = runKernel("batch_norm_training", {x, g, be}, {out(xs, low), out(cs, plan::F32), out(cs, plan::F32)});
    auto ref = runKernel("batch_norm_training", {x64, g64, be64},
                         {out(xs, plan::F64), out(cs, plan::F64), out(cs, plan::F64)});
    CHECK(fwd[0] == rounded(low, ref[0]));
    CHECK(fwd[1] == rounded(plan::F32, ref[1]));
    CHECK(fwd[2] == rounded(plan::F32, ref[2]));

    // The backward reads the statistics as stored (f32) in both runs.
    Operand mean{cs, fwd[1], plan::F32}, invStd{cs, fwd[2], plan::F32};
    Operand mean64{cs, fwd[1], plan::F64}, invStd64{cs, fwd[2], plan::F64};
    auto bwd = runKernel("batch_norm_training_backward", {dy, x, g, mean, invStd},
                         {out(xs, low), out(cs, plan::F32), out(cs, plan::F32)});
    auto bref = runKernel("batch_norm_training_backward", {dy64, x64, g64, mean64, invStd64},
                          {out(xs, plan::F64), out(cs, plan::F64), out(cs, plan::F64)});
    CHECK(bwd[0] == rounded(low, bref[0]));
    CHECK(bwd[1] == rounded(plan::F32, bref[1]));
    CHECK(bwd[2] == rounded(plan::F32, bref[2]));

    auto [var, var64] = operand(cs, plan::F32, castor::test::randomValues(cs, rng, 0.5, 2));
    auto inf = runKernel("batch_norm_inference", {x, g, be, mean, var}, {out(xs, low)});
    auto iref = runKernel("batch_norm_inference", {x64, g64, be64, mean64, var64}, {out(xs, plan::F64)});
    CHECK(inf[0] == rounded(low, iref[0]));
  }
}

TEST_CASE("validator refuses batch norms whose element types do not combine", "[mixed-precision]") {
  auto refuse = [](const std::function<void(castor::test::PlanBuilder &)> &build, const std::string &why) {
    castor::test::PlanBuilder b;
    build(b);
    Status s = plan::validatePlan(b.plan);
    INFO(s.message());
    CHECK_THAT(s.message(), Contains(why));
  };
  auto forward = [](plan::DType x, plan::DType y, plan::DType params) {
    return [=](castor::test::PlanBuilder &b) {
      auto tx = b.tensor("x", {2, 4, 3}, K::INPUT, x), tg = b.tensor("g", {4}, K::PARAMETER, params);
      auto tb = b.tensor("b", {4}, K::PARAMETER, params), ty = b.tensor("y", {2, 4, 3}, K::OUTPUT, y);
      auto tm = b.tensor("mean", {4}, K::OUTPUT, params), ti = b.tensor("inv_std", {4}, K::OUTPUT, params);
      b.kernel("batch_norm_training", {tx, tg, tb}, {ty, tm, ti});
    };
  };
  refuse(forward(plan::F16, plan::F16, plan::BF16), "scale, bias and statistics of f16 data must be f32 or f16, got bf16");
  refuse(forward(plan::F32, plan::F32, plan::F16), "scale, bias and statistics of f32 data must be f32, got f16");
  refuse(forward(plan::F16, plan::F32, plan::F32), "x, y, dy and dx must share one element type, got f16 and f32");
  refuse(
      [](auto &b) {
        auto dy = b.tensor("dy", {2, 4}, K::INPUT, plan::F16), x = b.tensor("x", {2, 4}, K::INPUT, plan::F16);
        auto g = b.tensor("g", {4}, K::PARAMETER), m = b.tensor("m", {4}, K::INPUT), i = b.tensor("i", {4}, K::INPUT);
        auto dx = b.tensor("dx", {2, 4}, K::OUTPUT, plan::F16), dg = b.tensor("dg", {4}, K::OUTPUT, plan::F16);
        auto db = b.tensor("db", {4}, K::OUTPUT);
        b.kernel("batch_norm_training_backward", {dy, x, g, m, i}, {dx, dg, db});
      },
      "must share one element type, got f32 and f16");
  refuse(
      [](auto &b) {
        auto rm = b.tensor("rm", {4}, K::STATE), rv = b.tensor("rv", {4}, K::STATE);
        auto m = b.tensor("m", {4}, K::INPUT, plan::F16), i = b.tensor("i", {4}, K::INPUT, plan::F16);
        b.kernel("batch_norm_running_update", {rm, rv, m, i}, {rm, rv}, {{"count", plan::intAttr(6)}});
      },
      "must share one element type, got f32 and f16");
}
