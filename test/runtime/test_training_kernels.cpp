// The training step's CPU kernels: hand-computed values, and every backward kernel against
// central finite differences (in f64) of its forward kernel.
#include "plan_builder.h"
#include "test_helpers.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"
#include "plan/plan_validator.h"
#include "weights/dropout.h"

#include <cmath>
#include <functional>
#include <random>

using namespace castor;
using castor::test::count;
using castor::test::Operand;
using castor::test::numericGradient;
using castor::test::randomValues;
using castor::test::runKernel;
using Attrs = std::map<std::string, plan::Attr>;
using Vec = std::vector<double>;
using Shape = std::vector<int64_t>;

namespace {

Operand f64(Shape s, Vec v) { return {std::move(s), std::move(v), plan::F64}; }
Operand f64Out(Shape s) { return {std::move(s), {}, plan::F64}; }
Operand i64(Shape s, Vec v) { return {std::move(s), std::move(v), plan::I64}; }

void checkClose(const Vec &got, const Vec &want, double tol = 1e-9) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])));
  }
}

// Runs `op` on f64 operands, replacing input `which` with `x`, returning output `out`.
std::function<Vec(const Vec &)> forwardOf(const std::string &op, std::vector<Operand> inputs, Shape outShape,
                                          Attrs attrs, size_t which, std::vector<Operand> extraOutputs = {}) {
  return [=](const Vec &x) {
    auto in = inputs;
    in[which].values = x;
    std::vector<Operand> outs{f64Out(outShape)};
    outs.insert(outs.end(), extraOutputs.begin(), extraOutputs.end());
    return runKernel(op, in, outs, attrs)[0];
  };
}

} // namespace

TEST_CASE("conv2d backward kernels match finite differences", "[training-kernels]") {
  struct Case {
    Shape x, w;
    Attrs attrs;
  };
  std::vector<Case> cases = {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, {{"pads", plan::intsAttr({1, 1, 1, 1})}}},
      {{1, 4, 6, 7},
       {6, 2, 3, 2},
       {{"strides", plan::intsAttr({2, 1})},
        {"pads", plan::intsAttr({1, 0, 0, 1})},
        {"dilations", plan::intsAttr({1, 2})},
        {"groups", plan::intAttr(2)}}},
      {{2, 2, 5, 5}, {3, 2, 1, 1}, {{"strides", plan::intsAttr({2, 2})}}},
      {{1, 4, 4, 4}, {4, 1, 3, 3}, {{"groups", plan::intAttr(4)}, {"pads", plan::intsAttr({2, 2, 2, 2})},
                                    {"dilations", plan::intsAttr({2, 2})}, {"strides", plan::intsAttr({3, 3})}}},
  };
  std::mt19937_64 rng(1);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case &c = cases[ci];
    INFO("case " << ci);
    Vec x = randomValues(c.x, rng), w = randomValues(c.w, rng), bias = randomValues({c.w[0]}, rng);
    // Output shape from the forward kernel's own rule.
    castor::shape::Conv2dAttrs a;
    plan::Kernel k;
    for (auto &[n, v] : c.attrs)
      (*k.mutable_attrs())[n] = v;
    a = plan::parseConv2d(k)->shape;
    Shape y = castor::shape::conv2d(c.x, c.w, nullptr, a).shape;
    Vec dy = randomValues(y, rng);

    auto dx = runKernel("conv2d_backward_data", {f64(y, dy), f64(c.w, w)}, {f64Out(c.x)}, c.attrs)[0];
    checkClose(dx, numericGradient(forwardOf("conv2d", {f64(c.x, x), f64(c.w, w)}, y, c.attrs, 0), x, dy), 1e-7);
    // With an accumulated gradient (castor-fuse-gradient-add): the same gradient plus it.
    Vec other = randomValues(c.x, rng), sum(dx.size());
    for (size_t e = 0; e < dx.size(); ++e)
      sum[e] = dx[e] + other[e];
    checkClose(runKernel("conv2d_backward_data", {f64(y, dy), f64(c.w, w), f64(c.x, other)}, {f64Out(c.x)}, c.attrs)[0],
               sum, 1e-12);
    auto dw = runKernel("conv2d_backward_filter", {f64(c.x, x), f64(y, dy)}, {f64Out(c.w)}, c.attrs)[0];
    checkClose(dw, numericGradient(forwardOf("conv2d", {f64(c.x, x), f64(c.w, w)}, y, c.attrs, 1), w, dy), 1e-7);
    auto db = runKernel("conv2d_backward_bias", {f64(y, dy)}, {f64Out({c.w[0]})})[0];
    checkClose(db, numericGradient(forwardOf("conv2d", {f64(c.x, x), f64(c.w, w), f64({c.w[0]}, bias)}, y,
                                             c.attrs, 2),
                                   bias, dy),
               1e-7);
  }
}

TEST_CASE("reduce_sum_to sums over broadcast dimensions", "[training-kernels]") {
  // [2, 3] -> [3], [2, 1], [] and the scale attribute.
  Vec x{1, 2, 3, 4, 5, 6};
  checkClose(runKernel("reduce_sum_to", {{{2, 3}, x}}, {{{3}}})[0], {5, 7, 9});
  checkClose(runKernel("reduce_sum_to", {{{2, 3}, x}}, {{{2, 1}}})[0], {6, 15});
  checkClose(runKernel("reduce_sum_to", {{{2, 3}, x}}, {{{}}}, {{"scale", plan::floatAttr(0.5)}})[0], {10.5});
  checkClose(runKernel("reduce_sum_to", {{{2, 3}, x}}, {{{1, 3}}})[0], {5, 7, 9});
  // As the VJP of a broadcasting add, against finite differences.
  std::mt19937_64 rng(2);
  Shape xs{2, 3, 2, 2};
  for (Shape bs : {Shape{1, 3, 1, 1}, Shape{3, 1, 1}, Shape{2}, Shape{}, Shape{2, 1, 1, 2}}) {
    Vec a = randomValues(xs, rng), bv = randomValues(bs, rng), dy = randomValues(xs, rng);
    auto got = runKernel("reduce_sum_to", {f64(xs, dy)}, {f64Out(bs)})[0];
    checkClose(got, numericGradient(forwardOf("add", {f64(xs, a), f64(bs, bv)}, xs, {}, 1), bv, dy), 1e-8);
  }
}

TEST_CASE("batch norm backward and running statistics", "[training-kernels]") {
  std::mt19937_64 rng(3);
  for (Shape xs : {Shape{3, 2, 2, 3}, Shape{4, 3}, Shape{2, 2, 3}}) {
    const int64_t C = xs[1];
    Vec x = randomValues(xs, rng), g = randomValues({C}, rng, 0.5, 1.5), be = randomValues({C}, rng);
    Vec dy = randomValues(xs, rng);
    Attrs attrs{{"epsilon", plan::floatAttr(1e-3)}};
    auto fwd = runKernel("batch_norm_training", {f64(xs, x), f64({C}, g), f64({C}, be)},
                         {f64Out(xs), f64Out({C}), f64Out({C})}, attrs);
    auto bwd = runKernel("batch_norm_training_backward",
                         {f64(xs, dy), f64(xs, x), f64({C}, g), f64({C}, fwd[1]), f64({C}, fwd[2])},
                         {f64Out(xs), f64Out({C}), f64Out({C})}, attrs);
    std::vector<Operand> in{f64(xs, x), f64({C}, g), f64({C}, be)};
    std::vector<Operand> extra{f64Out({C}), f64Out({C})};
    checkClose(bwd[0], numericGradient(forwardOf("batch_norm_training", in, xs, attrs, 0, extra), x, dy), 1e-6);
    checkClose(bwd[1], numericGradient(forwardOf("batch_norm_training", in, xs, attrs, 1, extra), g, dy), 1e-6);
    checkClose(bwd[2], numericGradient(forwardOf("batch_norm_training", in, xs, attrs, 2, extra), be, dy), 1e-6);
  }

  SECTION("5 inputs, 3 outputs: running statistics read-only; the update kernel matches the 5/5 form") {
    Shape xs{3, 2, 2, 2};
    Vec x = randomValues(xs, rng), rm{0.5, -0.25}, rv{2.0, 0.75};
    Attrs attrs{{"epsilon", plan::floatAttr(1e-5)}, {"momentum", plan::floatAttr(0.2)}};
    std::vector<Operand> in{f64(xs, x), f64({2}, {1, 1}), f64({2}, {0, 0}), f64({2}, rm), f64({2}, rv)};
    auto three = runKernel("batch_norm_training", in, {f64Out(xs), f64Out({2}), f64Out({2})}, attrs);
    auto five = runKernel("batch_norm_training", in, {f64Out(xs), f64Out({2}), f64Out({2}), f64Out({2}), f64Out({2})},
                          attrs);
    checkClose(three[0], five[0], 0);
    // batch_norm_running_update in place on state tensors.
    castor::test::PlanBuilder b;
    auto trm = b.tensor("rm", {2}, plan::Tensor::STATE, plan::F64);
    auto trv = b.tensor("rv", {2}, plan::Tensor::STATE, plan::F64);
    auto tm = b.tensor("mean", {2}, plan::Tensor::INPUT, plan::F64);
    auto ti = b.tensor("inv_std", {2}, plan::Tensor::INPUT, plan::F64);
    b.kernel("batch_norm_running_update", {trm, trv, tm, ti}, {trm, trv},
             {{"momentum", plan::floatAttr(0.2)}, {"epsilon", plan::floatAttr(1e-5)}, {"count", plan::intAttr(12)}});
    REQUIRE(plan::validatePlan(b.plan).message() == "");
    auto backend = createCpuBackend();
    REQUIRE(backend->load(b.plan).isOk());
    castor::test::uploadValues(*backend, b.plan, trm, rm);
    castor::test::uploadValues(*backend, b.plan, trv, rv);
    castor::test::uploadValues(*backend, b.plan, tm, three[1]);
    castor::test::uploadValues(*backend, b.plan, ti, three[2]);
    REQUIRE(backend->run().isOk());
    checkClose(castor::test::downloadValues(*backend, b.plan, trm), five[3], 1e-12);
    checkClose(castor::test::downloadValues(*backend, b.plan, trv), five[4], 1e-9);
  }
}

TEST_CASE("elementwise backward kernels", "[training-kernels]") {
  checkClose(runKernel("relu_backward", {{{4}, {1, 2, 3, 4}}, {{4}, {0, 1, 0, 2}}}, {{{4}}})[0], {0, 2, 0, 4});
  checkClose(runKernel("sigmoid_backward", {{{2}, {1, 2}}, {{2}, {0.5, 0.25}}}, {{{2}}})[0], {0.25, 0.375});
  // Inclusive bounds, as PyTorch's clamp.
  checkClose(runKernel("clip_backward", {{{5}, {1, 1, 1, 1, 1}}, {{5}, {-1, 0, 3, 6, 7}}}, {{{5}}},
                       {{"min", plan::floatAttr(0)}, {"max", plan::floatAttr(6)}})[0],
             {0, 1, 1, 1, 0});
  checkClose(runKernel("clip_backward", {{{2}, {1, 1}}, {{2}, {-9, 9}}}, {{{2}}}, {{"max", plan::floatAttr(1)}})[0],
             {1, 0});

  // PyTorch's boundaries: hardsigmoid's gradient is alpha strictly inside (-3, 3); hardswish's is
  // x/3 + 1/2 on [-3, 3] (so -1/2 at -3 and 3/2 at 3), 0 below, 1 above.
  Attrs torchHardSigmoid{{"alpha", plan::floatAttr(1.0 / 6.0)}, {"beta", plan::floatAttr(0.5)}};
  checkClose(runKernel("hard_sigmoid_backward", {{{5}, {6, 6, 6, 6, 6}}, {{5}, {-4, -3, 0, 3, 4}}}, {{{5}}},
                       torchHardSigmoid)[0],
             {0, 0, 1, 0, 0});
  checkClose(runKernel("hard_swish_backward", {{{6}, {2, 2, 2, 2, 2, 2}}, {{6}, {-4, -3, 0, 1.5, 3, 4}}}, {{{6}}})[0],
             {0, -1, 1, 2, 3, 2});

  std::mt19937_64 rng(4);
  Shape s{3, 4};
  Vec x = randomValues(s, rng, -2, 2), dy = randomValues(s, rng);
  for (double &e : x)
    if (std::fabs(e) < 0.05 || std::fabs(std::fabs(e) - 1) < 0.05)
      e += 0.2; // away from the kinks of relu and clip
  auto y = runKernel("relu", {f64(s, x)}, {f64Out(s)})[0];
  checkClose(runKernel("relu_backward", {f64(s, dy), f64(s, y)}, {f64Out(s)})[0],
             numericGradient(forwardOf("relu", {f64(s, x)}, s, {}, 0), x, dy), 1e-8);
  auto sy = runKernel("sigmoid", {f64(s, x)}, {f64Out(s)})[0];
  checkClose(runKernel("sigmoid_backward", {f64(s, dy), f64(s, sy)}, {f64Out(s)})[0],
             numericGradient(forwardOf("sigmoid", {f64(s, x)}, s, {}, 0), x, dy), 1e-8);
  Attrs clip{{"min", plan::floatAttr(-1)}, {"max", plan::floatAttr(1)}};
  checkClose(runKernel("clip_backward", {f64(s, dy), f64(s, x)}, {f64Out(s)}, clip)[0],
             numericGradient(forwardOf("clip", {f64(s, x)}, s, clip, 0), x, dy), 1e-8);
  // hard_sigmoid and hard_swish over [-5, 5], off their kinks at +-3 (and ONNX's +-2.5).
  Vec wide = randomValues(s, rng, -5, 5);
  for (double &e : wide)
    if (std::fabs(std::fabs(e) - 3) < 0.05 || std::fabs(std::fabs(e) - 2.5) < 0.05)
      e += 0.2;
  for (const Attrs &hs : {Attrs{}, torchHardSigmoid})
    checkClose(runKernel("hard_sigmoid_backward", {f64(s, dy), f64(s, wide)}, {f64Out(s)}, hs)[0],
               numericGradient(forwardOf("hard_sigmoid", {f64(s, wide)}, s, hs, 0), wide, dy), 1e-8);
  checkClose(runKernel("hard_swish_backward", {f64(s, dy), f64(s, wide)}, {f64Out(s)})[0],
             numericGradient(forwardOf("hard_swish", {f64(s, wide)}, s, {}, 0), wide, dy), 1e-8);
  // gelu, exact and tanh forms, and erf: smooth everywhere.
  for (const Attrs &g : {Attrs{}, Attrs{{"tanh", plan::boolAttr(true)}}})
    checkClose(runKernel("gelu_backward", {f64(s, dy), f64(s, wide)}, {f64Out(s)}, g)[0],
               numericGradient(forwardOf("gelu", {f64(s, wide)}, s, g, 0), wide, dy), 1e-8);
  checkClose(runKernel("erf_backward", {f64(s, dy), f64(s, x)}, {f64Out(s)})[0],
             numericGradient(forwardOf("erf", {f64(s, x)}, s, {}, 0), x, dy), 1e-8);
}

TEST_CASE("pooling backward kernels match finite differences", "[training-kernels]") {
  struct Case {
    Shape x;
    Attrs attrs;
  };
  auto ints = plan::intsAttr;
  std::vector<Case> cases = {
      {{2, 2, 5, 5}, {{"kernel", ints({2, 2})}, {"strides", ints({2, 2})}}},
      {{1, 2, 5, 5}, {{"kernel", ints({2, 2})}, {"strides", ints({2, 2})}, {"ceil_mode", plan::boolAttr(true)}}},
      {{1, 1, 6, 7}, {{"kernel", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}},
      {{1, 2, 7, 6},
       {{"kernel", ints({3, 2})}, {"strides", ints({2, 3})}, {"pads", ints({1, 0, 1, 1})}, {"ceil_mode", plan::boolAttr(true)}}},
  };
  std::mt19937_64 rng(5);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case &c = cases[ci];
    INFO("case " << ci);
    plan::Kernel k;
    k.set_op("avg_pool2d");
    for (auto &[n, v] : c.attrs)
      (*k.mutable_attrs())[n] = v;
    Shape y = castor::shape::pool2d(c.x, plan::parsePool2d(k)->shape).shape;
    // Distinct values so that each window's maximum is unique and stable under the step.
    Vec x(size_t(count(c.x)));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = double(i);
    std::shuffle(x.begin(), x.end(), rng);
    for (double &e : x)
      e *= 0.01;
    Vec dy = randomValues(y, rng);
    checkClose(runKernel("max_pool2d_backward", {f64(y, dy), f64(c.x, x)}, {f64Out(c.x)}, c.attrs)[0],
               numericGradient(forwardOf("max_pool2d", {f64(c.x, x)}, y, c.attrs, 0), x, dy), 1e-7);
    for (bool include : {false, true}) {
      Attrs a = c.attrs;
      a["count_include_pad"] = plan::boolAttr(include);
      checkClose(runKernel("avg_pool2d_backward", {f64(y, dy)}, {f64Out(c.x)}, a)[0],
                 numericGradient(forwardOf("avg_pool2d", {f64(c.x, x)}, y, a, 0), x, dy), 1e-7);
    }
  }
  SECTION("max pool with dilation") {
    Attrs a{{"kernel", ints({2, 2})}, {"dilations", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}};
    Shape xs{1, 1, 5, 5}, ys{1, 1, 5, 5};
    Vec x(25);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = double((i * 7) % 25) * 0.1;
    Vec dy = randomValues(ys, rng);
    checkClose(runKernel("max_pool2d_backward", {f64(ys, dy), f64(xs, x)}, {f64Out(xs)}, a)[0],
               numericGradient(forwardOf("max_pool2d", {f64(xs, x)}, ys, a, 0), x, dy), 1e-7);
  }
  SECTION("ties: the first maximum in row-major window order takes the gradient, overlaps accumulate") {
    // 1x3 input [5, 5, 5], kernel 1x2, stride 1: windows {0,1} and {1,2}; first maxima 0 and 1.
    auto dx = runKernel("max_pool2d_backward", {{{1, 1, 1, 2}, {1, 10}}, {{1, 1, 1, 3}, {5, 5, 5}}},
                        {{{1, 1, 1, 3}}}, {{"kernel", ints({1, 2})}})[0];
    checkClose(dx, {1, 10, 0});
    // Overlapping windows sharing one maximum accumulate.
    auto acc = runKernel("max_pool2d_backward", {{{1, 1, 1, 2}, {1, 10}}, {{1, 1, 1, 3}, {0, 9, 0}}},
                         {{{1, 1, 1, 3}}}, {{"kernel", ints({1, 2})}})[0];
    checkClose(acc, {0, 11, 0});
  }
  SECTION("global average pool") {
    Shape xs{2, 3, 2, 3}, ys{2, 3, 1, 1};
    Vec x = randomValues(xs, rng), dy = randomValues(ys, rng);
    auto dx = runKernel("global_avg_pool_backward", {f64(ys, dy)}, {f64Out(xs)})[0];
    CHECK(dx[0] == Approx(dy[0] / 6));
    checkClose(dx, numericGradient(forwardOf("global_avg_pool", {f64(xs, x)}, ys, {}, 0), x, dy), 1e-8);
  }
}

TEST_CASE("softmax and cross-entropy backward", "[training-kernels]") {
  std::mt19937_64 rng(6);
  for (auto [s, axis] : std::vector<std::pair<Shape, int64_t>>{{{3, 4}, -1}, {{2, 3, 4}, 1}, {{3, 2}, 0}}) {
    Vec x = randomValues(s, rng, -2, 2), dy = randomValues(s, rng);
    Attrs a{{"axis", plan::intAttr(axis)}};
    auto y = runKernel("softmax", {f64(s, x)}, {f64Out(s)}, a)[0];
    checkClose(runKernel("softmax_backward", {f64(s, dy), f64(s, y)}, {f64Out(s)}, a)[0],
               numericGradient(forwardOf("softmax", {f64(s, x)}, s, a, 0), x, dy), 1e-8);
  }
  Shape ls{3, 4};
  Vec logits = randomValues(ls, rng, -2, 2), labels{3, 0, 2};
  for (const char *reduction : {"mean", "sum", "none"}) {
    for (double smoothing : {0.0, 0.1}) {
      INFO(reduction << " smoothing " << smoothing);
      Attrs a{{"reduction", plan::stringAttr(reduction)}, {"label_smoothing", plan::floatAttr(smoothing)}};
      Shape lossShape = std::string(reduction) == "none" ? Shape{3} : Shape{};
      Vec dloss = std::string(reduction) == "none" ? Vec{0.7, -1.3, 2.0} : Vec{0.7};
      auto got = runKernel("softmax_cross_entropy_backward", {f64(lossShape, dloss), f64(ls, logits), i64({3}, labels)},
                           {f64Out(ls)}, a)[0];
      checkClose(got,
                 numericGradient(forwardOf("softmax_cross_entropy", {f64(ls, logits), i64({3}, labels)}, lossShape, a, 0),
                                 logits, dloss),
                 1e-8);
    }
  }
  SECTION("mean: (softmax - target) / N by hand") {
    // Uniform logits over 2 classes: softmax 0.5; label 1; N = 1; smoothing 0.2: target (0.1, 0.9).
    auto g = runKernel("softmax_cross_entropy_backward", {{{}, {1}}, {{1, 2}, {0, 0}}, {{1}, {1}, plan::I64}},
                       {{{1, 2}}}, {{"label_smoothing", plan::floatAttr(0.2)}})[0];
    checkClose(g, {0.4, -0.4}, 1e-7);
  }
}

TEST_CASE("dropout masks", "[training-kernels]") {
  const int n = 20000;
  Vec x(n, 1.0);
  Attrs a{{"ratio", plan::floatAttr(0.3)}, {"seed", plan::intAttr(42)}, {"salt", plan::intAttr(7)}};
  auto run = [&](int64_t iteration, Attrs attrs) {
    return runKernel("dropout", {f64({n}, x), i64({}, {double(iteration)})}, {f64Out({n})}, attrs)[0];
  };
  Vec m0 = run(0, a), again = run(0, a), m1 = run(1, a);
  CHECK(m0 == again);
  CHECK(m0 != m1);
  Attrs otherSalt = a;
  otherSalt["salt"] = plan::intAttr(8);
  CHECK(run(0, otherSalt) != m0);
  int kept = 0, same = 0;
  for (int i = 0; i < n; ++i) {
    REQUIRE((m0[i] == 0.0 || m0[i] == Approx(1 / 0.7)));
    kept += m0[i] != 0;
    same += (m0[i] != 0) == (m1[i] != 0);
    // The documented mapping.
    CHECK((m0[i] != 0) == (weights::dropoutUniform(42, 7, 0, uint64_t(i)) >= 0.3));
  }
  CHECK(double(kept) / n == Approx(0.7).margin(0.015));
  CHECK(double(same) / n == Approx(0.7 * 0.7 + 0.3 * 0.3).margin(0.02)); // independent across iterations
  // The backward applies the same mask and scale.
  Vec dy(n);
  for (int i = 0; i < n; ++i)
    dy[i] = double(i % 5) - 2;
  auto dx = runKernel("dropout_backward", {f64({n}, dy), i64({}, {0})}, {f64Out({n})}, a)[0];
  for (int i = 0; i < n; ++i)
    REQUIRE(dx[i] == dy[i] * m0[i]);
  // Inference form (no iteration): the identity, whatever the attributes.
  CHECK(runKernel("dropout", {f64({3}, {1, 2, 3})}, {f64Out({3})}, a)[0] == Vec{1, 2, 3});
  // ratio 0 keeps everything unscaled; ratio 1 drops everything.
  Attrs none{{"ratio", plan::floatAttr(0.0)}};
  CHECK(runKernel("dropout", {f64({3}, {1, 2, 3}), i64({}, {5})}, {f64Out({3})}, none)[0] == Vec{1, 2, 3});
  Attrs all{{"ratio", plan::floatAttr(1.0)}};
  CHECK(runKernel("dropout", {f64({3}, {1, 2, 3}), i64({}, {5})}, {f64Out({3})}, all)[0] == Vec{0, 0, 0});
}

TEST_CASE("per-sample dropout (drop path)", "[training-kernels]") {
  // 400 samples of [3, 2]: each sample is kept whole (scaled) or dropped whole, by draw e = sample.
  const int samples = 400, per = 6;
  Vec x(samples * per);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 1.0 + double(i % per);
  Attrs a{{"ratio", plan::floatAttr(0.25)}, {"seed", plan::intAttr(3)}, {"salt", plan::intAttr(1)},
          {"per_sample", plan::boolAttr(true)}};
  auto y = runKernel("dropout", {f64({samples, 3, 2}, x), i64({}, {4})}, {f64Out({samples, 3, 2})}, a)[0];
  int kept = 0;
  for (int s = 0; s < samples; ++s) {
    const bool keep = weights::dropoutUniform(3, 1, 4, uint64_t(s)) >= 0.25;
    kept += keep;
    for (int j = 0; j < per; ++j)
      REQUIRE(y[s * per + j] == Approx(keep ? x[s * per + j] / 0.75 : 0.0));
  }
  CHECK(double(kept) / samples == Approx(0.75).margin(0.07));
  auto dx = runKernel("dropout_backward", {f64({samples, 3, 2}, x), i64({}, {4})}, {f64Out({samples, 3, 2})}, a)[0];
  CHECK(dx == y);
}

TEST_CASE("split and count_correct", "[training-kernels]") {
  auto parts = runKernel("split", {{{2, 3}, {1, 2, 3, 4, 5, 6}}}, {{{2, 1}}, {{2, 2}}}, {{"axis", plan::intAttr(1)}});
  checkClose(parts[0], {1, 4});
  checkClose(parts[1], {2, 3, 5, 6});
  auto rows = runKernel("split", {{{3, 2}, {1, 2, 3, 4, 5, 6}}}, {{{1, 2}}, {{2, 2}}});
  checkClose(rows[0], {1, 2});
  checkClose(rows[1], {3, 4, 5, 6});
  // Row 0: argmax 2 = label; row 1: tie between 0 and 1, first wins (0) != label 1; row 2: argmax 0.
  auto c = runKernel("count_correct", {{{3, 3}, {0, 1, 2, 5, 5, 1, 9, 1, 1}}, {{3}, {2, 1, 0}, plan::I64}},
                     {{{}, {}, plan::I64}});
  CHECK(c[0][0] == 2);
}

namespace {

// An optimizer plan: one f64 parameter and its buffers as state, updated in place each run.
struct OptimizerRun {
  castor::test::PlanBuilder b;
  std::unique_ptr<Backend> backend;
  uint32_t param, grad, lr, step;
  std::vector<uint32_t> buffers;

  OptimizerRun(const std::string &op, Attrs attrs, size_t nBuffers, bool withStep = true, size_t n = 2) {
    Shape s{int64_t(n)};
    param = b.tensor("param", s, plan::Tensor::STATE, plan::F64);
    grad = b.tensor("grad", s, plan::Tensor::INPUT, plan::F64);
    for (size_t i = 0; i < nBuffers; ++i)
      buffers.push_back(b.tensor("buf" + std::to_string(i), s, plan::Tensor::STATE, plan::F64));
    lr = b.tensor("lr", {}, plan::Tensor::INPUT, plan::F64);
    step = b.tensor("step", {}, plan::Tensor::STATE, plan::I64);
    b.kernel("increment", {step}, {step});
    std::vector<uint32_t> in{param, grad}, out{param};
    in.insert(in.end(), buffers.begin(), buffers.end());
    out.insert(out.end(), buffers.begin(), buffers.end());
    in.push_back(lr);
    if (withStep)
      in.push_back(step);
    b.kernel(op, in, out, attrs);
    Status v = plan::validatePlan(b.plan);
    INFO(v.message());
    REQUIRE(v.isOk());
    backend = createCpuBackend();
    REQUIRE(backend->load(b.plan).isOk());
  }
  void set(uint32_t id, Vec v) { castor::test::uploadValues(*backend, b.plan, id, v); }
  Vec get(uint32_t id) { return castor::test::downloadValues(*backend, b.plan, id); }
  void stepWith(Vec g, double rate) {
    set(grad, g);
    set(lr, {rate});
    Status s = backend->run();
    INFO(s.message());
    REQUIRE(s.isOk());
  }
};

} // namespace

TEST_CASE("sgd_update follows torch.optim.SGD", "[training-kernels]") {
  auto three = [](Attrs a, size_t buffers, bool withStep = true) {
    OptimizerRun r("sgd_update", a, buffers, withStep);
    r.set(r.param, {1, -2});
    Vec p;
    for (int i = 0; i < 3; ++i) {
      r.stepWith({0.5, 0.25}, 0.1);
      p.push_back(r.get(r.param)[0]);
    }
    return std::make_pair(p, r.get(r.buffers[0]));
  };
  // Plain momentum: buf = g on step 1, then 0.9 buf + g.
  auto [p, buf] = three({{"momentum", plan::floatAttr(0.9)}}, 1);
  checkClose(p, {0.95, 0.855, 0.7195}, 1e-12);
  CHECK(buf[0] == Approx(1.355));
  // Nesterov: g + 0.9 buf.
  checkClose(three({{"momentum", plan::floatAttr(0.9)}, {"nesterov", plan::boolAttr(true)}}, 1).first,
             {0.905, 0.7695, 0.7695 - 0.1 * (0.5 + 0.9 * 1.355)}, 1e-12);
  // Weight decay joins the gradient before the momentum.
  auto wd = three({{"momentum", plan::floatAttr(0.9)}, {"weight_decay", plan::floatAttr(0.1)}}, 1).first;
  checkClose({wd[0], wd[1]}, {0.94, 0.8266}, 1e-12);
  // Dampening does not apply on the first step (PyTorch initialises the buffer with g).
  auto damp = three({{"momentum", plan::floatAttr(0.9)}, {"dampening", plan::floatAttr(0.5)}}, 1).first;
  checkClose({damp[0], damp[1]}, {0.95, 0.88}, 1e-12);
  // Without momentum: p -= lr g, the buffer untouched, the step input optional.
  auto [plain, untouched] = three({}, 1, false);
  checkClose(plain, {0.95, 0.9, 0.85}, 1e-12);
  checkClose(untouched, {0, 0}, 0);
}

TEST_CASE("adamw_update follows torch.optim.AdamW", "[training-kernels]") {
  OptimizerRun r("adamw_update", {{"weight_decay", plan::floatAttr(0.01)}}, 2);
  r.set(r.param, {1, -2});
  // Step 1 by hand: p = 0.999 - 1 * 0.05 / (0.5 + 1e-8).
  r.stepWith({0.5, 0.25}, 0.1);
  CHECK(r.get(r.param)[0] == Approx(0.999 - 0.05 / (0.5 + 1e-8)).epsilon(1e-14));
  // Further steps against the formula, written out independently.
  double p = 0.999 - 0.05 / (0.5 + 1e-8), m = 0.05, v = 0.00025;
  const double grads[] = {-0.3, 0.8, 0.1}, lrs[] = {0.05, 0.02, 0.01};
  for (int t = 2; t <= 4; ++t) {
    const double g = grads[t - 2], lr = lrs[t - 2];
    r.stepWith({g, 0}, lr);
    p = p * (1 - lr * 0.01);
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    p -= lr / (1 - std::pow(0.9, t)) * m / (std::sqrt(v) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8);
    CHECK(r.get(r.param)[0] == Approx(p).epsilon(1e-13));
    CHECK(r.get(r.buffers[0])[0] == Approx(m).epsilon(1e-13));
    CHECK(r.get(r.buffers[1])[0] == Approx(v).epsilon(1e-13));
  }
}

TEST_CASE("lr_schedule, increment and fill", "[training-kernels]") {
  auto lr = [](Attrs a, int64_t it) {
    return runKernel("lr_schedule", {{{}, {double(it)}, plan::I64}}, {f64Out({})}, a)[0][0];
  };
  Attrs constant{{"kind", plan::stringAttr("constant")}, {"base_lr", plan::floatAttr(0.4)},
                 {"warmup_steps", plan::intAttr(4)}};
  CHECK(lr(constant, 0) == Approx(0.1));
  CHECK(lr(constant, 2) == Approx(0.3));
  CHECK(lr(constant, 3) == Approx(0.4));
  CHECK(lr(constant, 100) == Approx(0.4));
  Attrs step{{"kind", plan::stringAttr("step")}, {"base_lr", plan::floatAttr(1.0)}, {"step_size", plan::intAttr(3)},
             {"gamma", plan::floatAttr(0.1)}};
  CHECK(lr(step, 0) == 1.0);
  CHECK(lr(step, 2) == 1.0);
  CHECK(lr(step, 3) == Approx(0.1));
  CHECK(lr(step, 7) == Approx(0.01));
  Attrs cosine{{"kind", plan::stringAttr("cosine")}, {"base_lr", plan::floatAttr(0.1)},
               {"warmup_steps", plan::intAttr(2)}, {"total_steps", plan::intAttr(12)}, {"min_lr", plan::floatAttr(0.01)}};
  CHECK(lr(cosine, 0) == Approx(0.05));
  CHECK(lr(cosine, 1) == Approx(0.1));
  CHECK(lr(cosine, 2) == Approx(0.1));
  CHECK(lr(cosine, 7) == Approx(0.055));
  CHECK(lr(cosine, 12) == Approx(0.01));
  CHECK(lr(cosine, 1000) == Approx(0.01));
  // f32 output: the double rounded once.
  auto f = runKernel("lr_schedule", {{{}, {0}, plan::I64}}, {{{}}},
                     {{"base_lr", plan::floatAttr(0.1)}})[0][0];
  CHECK(f == double(0.1f));

  checkClose(runKernel("fill", {}, {{{2, 2}}}, {{"value", plan::floatAttr(1.5)}})[0], {1.5, 1.5, 1.5, 1.5});
}

TEST_CASE("validator refuses malformed training kernels", "[training-kernels]") {
  auto refuse = [](const std::function<void(castor::test::PlanBuilder &)> &build, const std::string &why) {
    castor::test::PlanBuilder b;
    build(b);
    Status s = plan::validatePlan(b.plan);
    INFO(s.message());
    CHECK_THAT(s.message(), Catch::Matchers::Contains(why));
  };
  using K = plan::Tensor;
  refuse(
      [](auto &b) {
        auto c = b.tensor("c", {}, K::STATE, plan::I64);
        auto d = b.tensor("d", {}, K::STATE, plan::I64);
        b.kernel("increment", {c}, {d});
      },
      "in place");
  refuse(
      [](auto &b) {
        auto c = b.tensor("c", {}, K::STATE, plan::F32);
        b.kernel("increment", {c}, {c});
      },
      "must be an i64 scalar");
  refuse(
      [](auto &b) {
        auto p = b.tensor("p", {3}, K::STATE), g = b.tensor("g", {3}, K::INPUT), m = b.tensor("m", {3}, K::STATE);
        auto lr = b.tensor("lr", {}, K::INPUT);
        b.kernel("sgd_update", {p, g, m, lr}, {p, m}, {{"momentum", plan::floatAttr(0.9)}});
      },
      "step counter");
  refuse(
      [](auto &b) {
        auto x = b.tensor("x", {4}, K::INPUT), it = b.tensor("it", {1}, K::INPUT, plan::I64);
        auto y = b.tensor("y", {4}, K::OUTPUT);
        b.kernel("dropout", {x, it}, {y}, {{"ratio", plan::floatAttr(0.5)}});
      },
      "iteration");
  refuse(
      [](auto &b) {
        auto x = b.tensor("x", {2, 3}, K::INPUT), y = b.tensor("y", {2}, K::OUTPUT);
        b.kernel("reduce_sum_to", {x}, {y});
      },
      "does not broadcast");
  refuse(
      [](auto &b) {
        auto dy = b.tensor("dy", {1, 2, 3, 3}, K::INPUT), w = b.tensor("w", {2, 1, 3, 3}, K::INPUT);
        auto dx = b.tensor("dx", {1, 1, 4, 4}, K::OUTPUT);
        b.kernel("conv2d_backward_data", {dy, w}, {dx});
      },
      "dy");
  refuse(
      [](auto &b) {
        auto dy = b.tensor("dy", {1, 2, 3, 3}, K::INPUT), w = b.tensor("w", {2, 1, 3, 3}, K::INPUT);
        auto acc = b.tensor("acc", {1, 1, 3, 4}, K::INPUT), dx = b.tensor("dx", {1, 1, 3, 3}, K::OUTPUT);
        b.kernel("conv2d_backward_data", {dy, w, acc}, {dx}, {{"pads", plan::intsAttr({1, 1, 1, 1})}});
      },
      "accumulate");
  refuse(
      [](auto &b) {
        auto dy = b.tensor("dy", {1, 2, 3, 3}, K::INPUT), w = b.tensor("w", {2, 1, 3, 3}, K::INPUT);
        auto acc = b.tensor("acc", {1, 1, 3, 3}, K::INPUT, plan::F16), dx = b.tensor("dx", {1, 1, 3, 3}, K::OUTPUT);
        b.kernel("conv2d_backward_data", {dy, w, acc}, {dx}, {{"pads", plan::intsAttr({1, 1, 1, 1})}});
      },
      "dx's dtype");
  refuse(
      [](auto &b) {
        auto rm = b.tensor("rm", {2}, K::STATE), rv = b.tensor("rv", {2}, K::STATE);
        auto m = b.tensor("m", {2}, K::INPUT), i = b.tensor("i", {2}, K::INPUT);
        b.kernel("batch_norm_running_update", {rm, rv, m, i}, {rm, rv});
      },
      "count");
  refuse(
      [](auto &b) {
        auto x = b.tensor("x", {2, 3}, K::INPUT), y0 = b.tensor("y0", {2, 1}, K::OUTPUT);
        auto y1 = b.tensor("y1", {2, 1}, K::OUTPUT);
        b.kernel("split", {x}, {y0, y1}, {{"axis", plan::intAttr(1)}});
      },
      "concatenate to [2, 2]");
  refuse(
      [](auto &b) {
        auto it = b.tensor("it", {}, K::STATE, plan::I64), lr = b.tensor("lr", {}, K::OUTPUT);
        b.kernel("lr_schedule", {it}, {lr}, {{"kind", plan::stringAttr("linear")}});
      },
      "kind must be");
}

TEST_CASE("layer norm walks rows of the normalised dimensions", "[training-kernels]") {
  // The one rule both backends' layer-norm kernels take their geometry from.
  auto r = castor::shape::layerNormRows({2, 197, 768}, {768}, -1);
  REQUIRE(r);
  CHECK(r.shape == Shape{394, 768});
  r = castor::shape::layerNormRows({2, 3, 4, 5}, {4, 5}, 2);
  REQUIRE(r);
  CHECK(r.shape == Shape{6, 20});
  CHECK_FALSE(castor::shape::layerNormRows({2, 3, 4}, {3, 4}, -1)); // scale is not the normalised shape
  CHECK_FALSE(castor::shape::layerNormRows({2, 3}, {3}, 2));       // axis out of range
}
