// Mixed-precision training on the CPU backend: dynamic loss scaling (unscale_gradients,
// update_loss_scale, the overflow-flag forms of the optimizers and counters), gradient clipping,
// gradient statistics, FILL initialization, their validator refusals, and castor-run train's
// reports of them.
#include "plan_builder.h"
#include "test_helpers.h"

#include "castor/float_convert.h"
#include "core/session.h"
#include "plan/op_attrs.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"
#include "weights/init.h"
#include "weights/json.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

using namespace castor;
using Attrs = std::map<std::string, plan::Attr>;
using Vec = std::vector<double>;
using K = plan::Tensor;
using Catch::Matchers::Contains;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A plan of state tensors updated in place by hand-written kernels, loaded on the CPU backend.
struct StatePlan {
  castor::test::PlanBuilder b;
  std::unique_ptr<Backend> backend;

  uint32_t add(const std::string &name, std::vector<int64_t> shape, plan::DType dtype = plan::F32) {
    return b.tensor(name, std::move(shape), K::STATE, dtype);
  }
  void load() { backend = castor::test::loadOnCpu(b.plan); }
  void set(uint32_t id, const Vec &v) { castor::test::uploadValues(*backend, b.plan, id, v); }
  Vec get(uint32_t id) { return castor::test::downloadValues(*backend, b.plan, id); }
  std::vector<uint8_t> raw(uint32_t id) {
    std::vector<uint8_t> bytes(b.plan.tensors(int(id)).bytes());
    REQUIRE(backend->download(id, bytes.data(), bytes.size()).isOk());
    return bytes;
  }
  void run() { castor::test::runOk(*backend); }
};

// Each element of `values` rounded into `dtype` and widened back.
Vec rounded(plan::DType dtype, const Vec &values) {
  return weights::decodeValues(dtype, weights::encodeValues(dtype, values));
}

bool same(const Vec &got, const Vec &want) {
  if (got.size() != want.size())
    return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))))
      return false;
  return true;
}

} // namespace

TEST_CASE("unscale_gradients multiplies by the f32 reciprocal and flags non-finite results", "[mixed-precision]") {
  StatePlan s;
  auto g0 = s.add("g0", {3}), g1 = s.add("g1", {3}, plan::F16), g2 = s.add("g2", {1}, plan::BF16);
  auto scale = s.add("scale", {}), found = s.add("found_inf", {});
  s.b.kernel("unscale_gradients", {g0, g1, g2, scale}, {g0, g1, g2, found});
  s.load();

  // Scale 4: exact quarters; the f16 gradient holds an inf.
  s.set(g0, {2, -4, 6});
  s.set(g1, {1024, kInf, -2});
  s.set(g2, {8});
  s.set(scale, {4});
  s.run();
  CHECK(same(s.get(g0), {0.5, -1, 1.5}));
  CHECK(same(s.get(g1), {256, kInf, -0.5}));
  CHECK(same(s.get(g2), {2}));
  CHECK(s.get(found) == Vec{1});

  // All finite: found_inf 0. inv = float(1/3), each product rounded once into the dtype.
  const double inv = double(float(1.0 / 3.0));
  s.set(g0, {3, 1, -7});
  s.set(g1, {3, 0.1, 65504});
  s.set(g2, {3});
  s.set(scale, {3});
  s.run();
  CHECK(same(s.get(g0), rounded(plan::F32, {3 * inv, 1 * inv, -7 * inv})));
  CHECK(same(s.get(g1), rounded(plan::F16, {3 * inv, double(halfToDouble(doubleToHalf(0.1))) * inv, 65504 * inv})));
  CHECK(same(s.get(g2), rounded(plan::BF16, {3 * inv})));
  CHECK(s.get(found) == Vec{0});

  // A finite f16 gradient that overflows after unscaling (scale < 1) is flagged too; a NaN is.
  s.set(g0, {1, 2, 3});
  s.set(g1, {40000, 1, 1});
  s.set(g2, {1});
  s.set(scale, {0.5});
  s.run();
  CHECK(s.get(g1)[0] == kInf);
  CHECK(s.get(found) == Vec{1});
  s.set(g1, {1, 1, 1});
  s.set(g0, {1, kNaN, 3});
  s.set(scale, {2});
  s.run();
  CHECK(std::isnan(s.get(g0)[1]));
  CHECK(s.get(found) == Vec{1});
}

TEST_CASE("clip_grad_norm scales by max_norm / (total + 1e-6) when that is below 1", "[mixed-precision]") {
  auto clip = [](double maxNorm, Vec &a, Vec &b) {
    StatePlan s;
    auto g0 = s.add("g0", {2}, plan::F64), g1 = s.add("g1", {1}, plan::F64), total = s.add("total_norm", {});
    s.b.kernel("clip_grad_norm", {g0, g1}, {g0, g1, total}, {{"max_norm", plan::floatAttr(maxNorm)}});
    s.load();
    s.set(g0, a);
    s.set(g1, b);
    s.run();
    a = s.get(g0);
    b = s.get(g1);
    return s.get(total)[0];
  };
  // Norm 5 over both tensors; max_norm 1: coefficient 1 / (5 + 1e-6).
  Vec a{3, 0}, b{4};
  CHECK(clip(1.0, a, b) == 5.0);
  const double coef = 1.0 / (5.0 + 1e-6);
  CHECK(a == Vec{3 * coef, 0});
  CHECK(b == Vec{4 * coef});
  // max_norm 10: coefficient above 1, gradients untouched.
  a = {3, 0}, b = {4};
  CHECK(clip(10.0, a, b) == 5.0);
  CHECK(a == Vec{3, 0});
  CHECK(b == Vec{4});
  // max_norm 5: 5 / (5 + 1e-6) < 1 still clips (as PyTorch).
  a = {3, 0}, b = {4};
  clip(5.0, a, b);
  CHECK(b[0] == 4 * (5.0 / (5.0 + 1e-6)));
  // The total norm is rounded into its f32 output.
  a = {1, 1}, b = {1};
  CHECK(clip(100.0, a, b) == double(float(std::sqrt(3.0))));
}

TEST_CASE("update_loss_scale backs off on overflow and grows after interval clean steps", "[mixed-precision]") {
  StatePlan s;
  auto scale = s.add("scale", {}), tracker = s.add("tracker", {}, plan::I64), found = s.add("found_inf", {});
  s.b.kernel("update_loss_scale", {scale, tracker, found}, {scale, tracker}, {{"interval", plan::intAttr(3)}});
  s.load();
  s.set(scale, {65536});
  s.set(tracker, {0});
  const std::vector<std::tuple<double, double, int64_t>> steps = {
      // found_inf, scale after, tracker after
      {0, 65536, 1}, {0, 65536, 2}, {1, 32768, 0}, {0, 32768, 1}, {0, 32768, 2},
      {0, 65536, 0}, {0, 65536, 1}, {1, 32768, 0}, {1, 16384, 0}, {0, 16384, 1},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    auto [f, want, tr] = steps[i];
    INFO("step " << i + 1);
    s.set(found, {f});
    s.run();
    CHECK(s.get(scale)[0] == want);
    CHECK(s.get(tracker)[0] == double(tr));
  }
  // Defaults are GradScaler's.
  plan::Kernel k;
  k.set_op("update_loss_scale");
  auto p = plan::parseUpdateLossScale(k);
  REQUIRE(p.isOk());
  CHECK(p->growth == 2.0);
  CHECK(p->backoff == 0.5);
  CHECK(p->interval == 2000);
  // Custom factors, no clamping below 1.
  StatePlan t;
  auto sc = t.add("scale", {}), tr = t.add("tracker", {}, plan::I64), fi = t.add("found_inf", {});
  t.b.kernel("update_loss_scale", {sc, tr, fi}, {sc, tr},
             {{"growth", plan::floatAttr(4.0)}, {"backoff", plan::floatAttr(0.25)}, {"interval", plan::intAttr(1)}});
  t.load();
  t.set(sc, {1});
  t.set(tr, {0});
  t.set(fi, {1});
  t.run();
  CHECK(t.get(sc)[0] == 0.25);
  t.set(fi, {0});
  t.run();
  CHECK(t.get(sc)[0] == 1.0);
  CHECK(t.get(tr)[0] == 0);
}

TEST_CASE("sgd_update and adamw_update leave every byte alone when found_inf is set", "[mixed-precision]") {
  // (op, attrs, buffers, step input, dtype)
  struct Case {
    std::string op;
    Attrs attrs;
    int buffers;
    bool withStep;
    plan::DType dtype;
  };
  const std::vector<Case> cases = {
      {"sgd_update", {{"momentum", plan::floatAttr(0.9)}, {"weight_decay", plan::floatAttr(0.01)}}, 1, true, plan::F32},
      {"sgd_update", {}, 1, false, plan::F16},
      {"adamw_update", {}, 2, true, plan::F32},
      {"adamw_update", {{"weight_decay", plan::floatAttr(0.1)}}, 2, true, plan::BF16},
  };
  for (const Case &c : cases) {
    INFO(c.op << " with " << c.buffers << " buffers, dtype " << plan::dtypeName(c.dtype));
    StatePlan s;
    auto param = s.add("param", {3}, c.dtype), grad = s.add("grad", {3}, c.dtype);
    std::vector<uint32_t> bufs;
    for (int i = 0; i < c.buffers; ++i)
      bufs.push_back(s.add("buf" + std::to_string(i), {3}, c.dtype));
    auto lr = s.add("lr", {}), step = s.add("step", {}, plan::I64), found = s.add("found_inf", {});
    s.b.kernel("increment", {step, found}, {step});
    std::vector<uint32_t> in{param, grad}, out{param};
    in.insert(in.end(), bufs.begin(), bufs.end());
    out.insert(out.end(), bufs.begin(), bufs.end());
    in.push_back(lr);
    if (c.withStep)
      in.push_back(step);
    in.push_back(found);
    s.b.kernel(c.op, in, out, c.attrs);
    s.load();
    s.set(param, {1, -2, 0.5});
    s.set(lr, {0.1});
    s.set(step, {0});

    // A clean step moves the parameter and fills the buffers.
    s.set(grad, {0.5, 0.25, -1});
    s.set(found, {0});
    s.run();
    CHECK(s.get(param) != Vec{1, -2, 0.5});
    CHECK(s.get(step)[0] == 1);
    auto before = s.raw(param);
    std::vector<std::vector<uint8_t>> buffersBefore;
    for (uint32_t b : bufs)
      buffersBefore.push_back(s.raw(b));

    // An overflow step: non-finite gradients, found_inf 1: nothing changes, the step counter
    // (incremented only when clear) neither.
    s.set(grad, {kInf, kNaN, 3});
    s.set(found, {1});
    s.run();
    CHECK(s.raw(param) == before);
    for (size_t i = 0; i < bufs.size(); ++i)
      CHECK(s.raw(bufs[i]) == buffersBefore[i]);
    CHECK(s.get(step)[0] == 1);

    // The next clean step goes on from there.
    s.set(grad, {0.5, 0.25, -1});
    s.set(found, {0});
    s.run();
    CHECK(s.raw(param) != before);
    CHECK(s.get(step)[0] == 2);
  }

  // With the flag clear, the result equals the optimizer's without the flag (bit for bit).
  auto runSgd = [](bool flagged) {
    StatePlan s;
    auto param = s.add("param", {2}), grad = s.add("grad", {2}), buf = s.add("buf", {2}), lr = s.add("lr", {});
    auto step = s.add("step", {}, plan::I64), found = s.add("found_inf", {});
    std::vector<uint32_t> in{param, grad, buf, lr, step};
    if (flagged)
      in.push_back(found);
    s.b.kernel("sgd_update", in, {param, buf}, {{"momentum", plan::floatAttr(0.9)}, {"nesterov", plan::boolAttr(true)}});
    s.load();
    s.set(param, {1, -2});
    s.set(grad, {0.3, 0.7});
    s.set(lr, {0.05});
    s.set(step, {1});
    s.set(found, {0});
    s.run();
    return std::make_pair(s.raw(param), s.raw(buf));
  };
  CHECK(runSgd(true) == runSgd(false));
}

TEST_CASE("increment with a flag counts clean or overflow steps", "[mixed-precision]") {
  auto count = [](std::optional<std::string> when, std::optional<double> flag) {
    StatePlan s;
    auto c = s.add("counter", {}, plan::I64), f = s.add("flag", {});
    Attrs a;
    if (when)
      a["when"] = plan::stringAttr(*when);
    s.b.kernel("increment", flag ? std::vector<uint32_t>{c, f} : std::vector<uint32_t>{c}, {c}, a);
    s.load();
    s.set(c, {41});
    s.set(f, {flag.value_or(0)});
    s.run();
    return s.get(c)[0];
  };
  CHECK(count(std::nullopt, std::nullopt) == 42);
  CHECK(count(std::nullopt, 0.0) == 42);
  CHECK(count(std::nullopt, 1.0) == 41);
  CHECK(count("clear", 0.0) == 42);
  CHECK(count("clear", 1.0) == 41);
  CHECK(count("set", 1.0) == 42);
  CHECK(count("set", 0.0) == 41);
}

TEST_CASE("gradient_stats: mean and max of |g| over finite values, non-finite count", "[mixed-precision]") {
  using castor::test::runKernel;
  auto stats = runKernel("gradient_stats", {{{5}, {1, -3, kInf, kNaN, 2}, plan::F16}}, {{{3}}})[0];
  CHECK(stats == Vec{2, 3, 2});
  stats = runKernel("gradient_stats", {{{2, 2}, {0.5, -0.25, 0, 0.25}, plan::F32}}, {{{3}}})[0];
  CHECK(stats == Vec{0.25, 0.5, 0});
  stats = runKernel("gradient_stats", {{{2}, {-kInf, kNaN}, plan::BF16}}, {{{3}}})[0];
  CHECK(stats == Vec{0, 0, 2});
}

TEST_CASE("FILL initializes every element to init_value", "[mixed-precision]") {
  plan::Parameter p;
  p.set_name("castor.loss_scale");
  p.set_init(plan::Parameter::FILL);
  p.set_init_value(65536);
  auto v = weights::initialValues(p, 3, 7);
  REQUIRE(v.isOk());
  CHECK(*v == Vec{65536, 65536, 65536});
  CHECK(plan::initName(plan::Parameter::FILL) == "fill");

  castor::test::PlanBuilder b;
  auto scale = b.tensor("castor.loss_scale", {}, K::STATE);
  auto h = b.tensor("h", {2}, K::STATE, plan::F16);
  auto y = b.tensor("y", {}, K::OUTPUT);
  b.parameter("castor.loss_scale", scale, plan::Parameter::FILL).set_init_value(65536);
  b.parameter("h", h, plan::Parameter::FILL).set_init_value(0.1);
  b.kernel("identity", {scale}, {y});
  auto s = Session::create(b.plan, createCpuBackend(), {});
  INFO(s.message());
  REQUIRE(s.isOk());
  REQUIRE((*s)->run().isOk());
  auto out = (*s)->output("y");
  REQUIRE(out.isOk());
  CHECK(weights::decodeValues(out->dtype, out->data) == Vec{65536});
  auto hv = (*s)->tensor(h);
  REQUIRE(hv.isOk());
  CHECK(weights::decodeValues(hv->dtype, hv->data) == rounded(plan::F16, {0.1, 0.1}));
}

TEST_CASE("validator refuses malformed mixed-precision kernels and FILL parameters", "[mixed-precision]") {
  auto refuse = [](const std::function<void(castor::test::PlanBuilder &)> &build, const std::string &why) {
    castor::test::PlanBuilder b;
    build(b);
    Status s = plan::validatePlan(b.plan);
    INFO(s.message());
    CHECK_THAT(s.message(), Contains(why));
  };
  refuse(
      [](auto &b) {
        auto c = b.tensor("c", {}, K::STATE, plan::I64);
        b.parameter("c", c, plan::Parameter::FILL).set_init_value(1);
      },
      "fill needs a floating-point tensor");
  refuse(
      [](auto &b) {
        auto c = b.tensor("c", {}, K::STATE);
        b.parameter("c", c, plan::Parameter::FILL).set_init_value(kInf);
      },
      "finite init_value");
  refuse(
      [](auto &b) {
        auto s = b.tensor("scale", {}, K::STATE), f = b.tensor("found", {}, K::OUTPUT);
        b.kernel("unscale_gradients", {s}, {f});
      },
      "n + 1 inputs and n + 1 outputs");
  refuse(
      [](auto &b) {
        auto g = b.tensor("g", {3}, K::STATE), s = b.tensor("scale", {}, K::STATE);
        b.kernel("unscale_gradients", {g, s}, {g});
      },
      "n + 1 inputs and n + 1 outputs");
  refuse(
      [](auto &b) {
        auto g = b.tensor("g", {3}, K::STATE), h = b.tensor("h", {3}, K::STATE), s = b.tensor("scale", {}, K::STATE);
        auto f = b.tensor("found", {}, K::OUTPUT);
        b.kernel("unscale_gradients", {g, s}, {h, f});
      },
      "in place");
  refuse(
      [](auto &b) {
        auto g = b.tensor("g", {3}, K::STATE), s = b.tensor("scale", {}, K::STATE, plan::F16);
        auto f = b.tensor("found", {}, K::OUTPUT);
        b.kernel("unscale_gradients", {g, s}, {g, f});
      },
      "scale");
  refuse(
      [](auto &b) {
        auto g = b.tensor("g", {3}, K::STATE), s = b.tensor("scale", {}, K::STATE);
        auto f = b.tensor("found", {}, K::OUTPUT);
        b.kernel("unscale_gradients", {g, g, s}, {g, g, f});
      },
      "listed twice");
  refuse(
      [](auto &b) {
        auto g = b.tensor("g", {3}, K::STATE), t = b.tensor("total", {}, K::OUTPUT);
        b.kernel("clip_grad_norm", {g}, {g, t});
      },
      "max_norm' is required");
  refuse(
      [](auto &b) {
        auto g = b.tensor("g", {3}, K::STATE);
        b.kernel("clip_grad_norm", {g}, {g}, {{"max_norm", plan::floatAttr(1.0)}});
      },
      "n + 1");
  refuse(
      [](auto &b) {
        auto s = b.tensor("scale", {}, K::STATE), t = b.tensor("tracker", {}, K::STATE);
        auto f = b.tensor("found", {}, K::STATE);
        b.kernel("update_loss_scale", {s, t, f}, {s, t});
      },
      "growth_tracker");
  refuse(
      [](auto &b) {
        auto s = b.tensor("scale", {}, K::STATE), t = b.tensor("tracker", {}, K::STATE, plan::I64);
        b.kernel("update_loss_scale", {s, t}, {s, t});
      },
      "takes 3 inputs");
  refuse(
      [](auto &b) {
        auto s = b.tensor("scale", {}, K::STATE), t = b.tensor("tracker", {}, K::STATE, plan::I64);
        auto f = b.tensor("found", {}, K::STATE);
        b.kernel("update_loss_scale", {s, t, f}, {s, t}, {{"interval", plan::intAttr(0)}});
      },
      "interval");
  refuse(
      [](auto &b) {
        auto p = b.tensor("p", {3}, K::STATE), g = b.tensor("g", {3}, K::STATE), m = b.tensor("m", {3}, K::STATE);
        auto v = b.tensor("v", {3}, K::STATE), lr = b.tensor("lr", {}, K::STATE);
        auto st = b.tensor("st", {}, K::STATE, plan::I64), f = b.tensor("f", {}, K::STATE);
        b.kernel("adamw_update", {p, g, m, v, lr, st, f, f}, {p, m, v});
      },
      "takes 6 to 7 inputs");
  refuse(
      [](auto &b) {
        auto p = b.tensor("p", {3}, K::STATE), g = b.tensor("g", {3}, K::STATE), m = b.tensor("m", {3}, K::STATE);
        auto lr = b.tensor("lr", {}, K::STATE), f = b.tensor("f", {}, K::STATE, plan::F64);
        b.kernel("sgd_update", {p, g, m, lr, f}, {p, m});
      },
      "found_inf");
  refuse(
      [](auto &b) {
        auto p = b.tensor("p", {3}, K::STATE), g = b.tensor("g", {3}, K::STATE), m = b.tensor("m", {3}, K::STATE);
        auto lr = b.tensor("lr", {}, K::STATE), f = b.tensor("f", {}, K::STATE);
        b.kernel("sgd_update", {p, g, m, lr, f}, {p, m}, {{"momentum", plan::floatAttr(0.9)}});
      },
      "step counter");
  refuse(
      [](auto &b) {
        auto c = b.tensor("c", {}, K::STATE, plan::I64), f = b.tensor("f", {}, K::STATE);
        b.kernel("increment", {c, f}, {c}, {{"when", plan::stringAttr("always")}});
      },
      "when must be");
  refuse(
      [](auto &b) {
        auto c = b.tensor("c", {}, K::STATE, plan::I64), f = b.tensor("f", {}, K::STATE);
        b.kernel("increment", {c, f, f}, {c});
      },
      "takes 1 to 2 inputs");
  refuse(
      [](auto &b) {
        auto g = b.tensor("g", {3}, K::STATE), y = b.tensor("y", {2}, K::OUTPUT);
        b.kernel("gradient_stats", {g}, {y});
      },
      "f32 [3]");
}

namespace {

using castor::test::castorRun;

// A linear classifier trained with dynamic loss scaling and f16 weight gradients: the backward
// starts from dloss = loss_scale; the gradient is unscaled, its statistics reported, the SGD step
// and the optimizer step counter skipped on overflow, the scale updated (interval 3).
plan::Plan lossScaledPlan(double initScale) {
  castor::test::PlanBuilder b;
  const int64_t N = 2, C = 3;
  auto images = b.tensor("images", {N, 1, 2, 2}, K::INPUT), labels = b.tensor("labels", {N}, K::INPUT, plan::I64);
  auto fw = b.tensor("fc.weight", {C, 4}, K::PARAMETER), buf = b.tensor("fc.weight.momentum_buffer", {C, 4}, K::STATE);
  auto step = b.tensor("castor.optimizer_step", {}, K::STATE, plan::I64);
  auto scale = b.tensor("castor.loss_scale", {}, K::STATE);
  auto tracker = b.tensor("castor.loss_scale.growth_tracker", {}, K::STATE, plan::I64);
  auto skipped = b.tensor("castor.skipped_steps", {}, K::STATE, plan::I64);
  b.parameter("fc.weight", fw, plan::Parameter::LINEAR_UNIFORM, 4, C);
  b.parameter("fc.weight.momentum_buffer", buf, plan::Parameter::ZEROS).set_trainable(false);
  b.parameter("castor.optimizer_step", step, plan::Parameter::ZEROS).set_trainable(false);
  b.parameter("castor.loss_scale", scale, plan::Parameter::FILL).set_init_value(initScale);
  b.parameter("castor.loss_scale.growth_tracker", tracker, plan::Parameter::ZEROS).set_trainable(false);
  b.parameter("castor.skipped_steps", skipped, plan::Parameter::ZEROS).set_trainable(false);
  auto flat = b.tensor("flat", {N, 4}, K::ACTIVATION), logits = b.tensor("logits", {N, C}, K::ACTIVATION);
  auto loss = b.tensor("loss", {}, K::OUTPUT);
  auto dlogits = b.tensor("dlogits", {N, C}, K::ACTIVATION);
  auto grad = b.tensor("fc.weight.grad", {C, 4}, K::ACTIVATION, plan::F16);
  auto found = b.tensor("found_inf", {}, K::ACTIVATION), lr = b.tensor("lr", {}, K::ACTIVATION);
  auto stats = b.tensor("grad_stats:fc.weight", {3}, K::OUTPUT);
  b.kernel("flatten", {images}, {flat});
  b.kernel("gemm", {flat, fw}, {logits}, {{"trans_b", plan::boolAttr(true)}});
  b.kernel("softmax_cross_entropy", {logits, labels}, {loss});
  b.kernel("softmax_cross_entropy_backward", {scale, logits, labels}, {dlogits});
  b.kernel("gemm", {dlogits, flat}, {grad}, {{"trans_a", plan::boolAttr(true)}, {"alpha", plan::floatAttr(100.0)}});
  b.kernel("unscale_gradients", {grad, scale}, {grad, found});
  b.kernel("gradient_stats", {grad}, {stats});
  b.kernel("increment", {step, found}, {step});
  b.kernel("fill", {}, {lr}, {{"value", plan::floatAttr(0.01)}});
  b.kernel("sgd_update", {fw, grad, buf, lr, step, found}, {fw, buf}, {{"momentum", plan::floatAttr(0.9)}});
  b.kernel("update_loss_scale", {scale, tracker, found}, {scale, tracker}, {{"interval", plan::intAttr(3)}});
  b.kernel("increment", {skipped, found}, {skipped}, {{"when", plan::stringAttr("set")}});
  for (auto [name, id] : {std::pair{"loss_scale", scale}, {"steps_since_overflow", tracker}, {"skipped_steps", skipped}}) {
    auto *o = b.plan.add_outputs();
    o->set_name(name);
    o->set_tensor(id);
  }
  return b.plan;
}

} // namespace

TEST_CASE("castor-run train reports the loss scale, its counters and gradient statistics", "[mixed-precision]") {
  const std::string dir = "/tmp/castor_mp_test_" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0755);
  // The weight gradient is amplified (alpha 100) so that the default scale 2^16 overflows f16.
  REQUIRE(plan::writePlanFile(lossScaledPlan(65536.0), dir + "/mp.plan").isOk());
  auto [rc, out] = castorRun("train " + dir + "/mp.plan --steps 12 --grad-stats 4 --log-json " + dir + "/log.jsonl");
  INFO(out);
  REQUIRE(rc == 0);
  std::ifstream in(dir + "/log.jsonl");
  std::vector<json::Value> rows;
  for (std::string line; std::getline(in, line);) {
    auto v = json::parse(line);
    REQUIRE(v.isOk());
    rows.push_back(*v);
  }
  REQUIRE(rows.size() == 12);
  // Step 1 overflows: the scale halves, the step is skipped.
  CHECK(rows[0].get("loss_scale")->number == 32768.0);
  CHECK(rows[0].get("skipped_steps")->number == 1);
  CHECK(rows[0].get("steps_since_overflow")->number == 0);
  // The scale halves until the gradient fits, then grows again after 3 clean steps.
  double previous = 65536.0;
  int64_t skippedCount = 0, clean = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double scale = rows[i].get("loss_scale")->number;
    const double skippedNow = rows[i].get("skipped_steps")->number;
    const bool overflow = skippedNow > double(skippedCount);
    INFO("step " << i + 1);
    if (overflow) {
      CHECK(scale == previous / 2);
      clean = 0;
    } else {
      clean = (clean + 1) % 3;
      CHECK(scale == (clean == 0 ? previous * 2 : previous));
    }
    CHECK(rows[i].get("steps_since_overflow")->number == double(clean));
    skippedCount = int64_t(skippedNow);
    previous = scale;
    // Gradient statistics on steps 4, 8, 12 only.
    const json::Value *gs = rows[i].get("grad_stats");
    CHECK((gs != nullptr) == ((i + 1) % 4 == 0));
    if (gs) {
      const json::Value *fc = gs->get("fc.weight");
      REQUIRE(fc);
      REQUIRE(fc->array.size() == 3);
    }
  }
  CHECK(skippedCount >= 1);
  CHECK(skippedCount < 12);
  CHECK_THAT(out, Contains("gradient statistics after step 4"));
  CHECK_THAT(out, Contains("fc.weight"));
  CHECK_THAT(out, Contains("non-finite"));

  // --grad-stats on a plan without grad_stats outputs is refused.
  auto noStats = lossScaledPlan(65536.0);
  for (int i = 0; i < noStats.outputs_size(); ++i)
    if (noStats.outputs(i).name() == "grad_stats:fc.weight")
      noStats.mutable_outputs()->DeleteSubrange(i, 1);
  REQUIRE(plan::writePlanFile(noStats, dir + "/nostats.plan").isOk());
  auto [rc2, out2] = castorRun("train " + dir + "/nostats.plan --steps 1 --grad-stats 1");
  CHECK(rc2 != 0);
  CHECK_THAT(out2, Contains("grad_stats:<param>"));
  std::remove((dir + "/mp.plan").c_str());
  std::remove((dir + "/nostats.plan").c_str());
  std::remove((dir + "/log.jsonl").c_str());
  ::rmdir(dir.c_str());
}
