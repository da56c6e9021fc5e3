// attention and attention_backward on the CPU reference: the forward against a naive f64
// computation, the backward against central finite differences (in f64) of the forward, and the
// validator's refusals.
#include "plan_builder.h"
#include "test_helpers.h"

#include "castor/float_convert.h"
#include "plan/plan_validator.h"

#include <cmath>
#include <functional>
#include <random>

using namespace castor;
using castor::test::Operand;
using castor::test::PlanBuilder;
using castor::test::numericGradient;
using castor::test::randomValues;
using castor::test::runKernel;
using Catch::Matchers::Contains;
using Attrs = std::map<std::string, plan::Attr>;
using Vec = std::vector<double>;
using Shape = std::vector<int64_t>;

namespace {

// One attention problem: q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv].
struct Dims {
  int64_t B, H, Sq, Sk, D, Dv;
  Shape q() const { return {B, H, Sq, D}; }
  Shape k() const { return {B, H, Sk, D}; }
  Shape v() const { return {B, H, Sk, Dv}; }
  Shape o() const { return {B, H, Sq, Dv}; }
  Shape stats() const { return {B, H, Sq, 1}; }
};

Attrs scaleAttr(double scale) { return {{"scale", plan::floatAttr(scale)}}; }

// The textbook formula, without the max shift of the kernel: o = softmax(scale q k^T) v and the
// log of each row's sum of exponentials.
std::pair<Vec, Vec> naiveAttention(const Dims &d, const Vec &q, const Vec &k, const Vec &v, double scale) {
  Vec o(size_t(d.B * d.H * d.Sq * d.Dv), 0.0), lse(size_t(d.B * d.H * d.Sq));
  for (int64_t h = 0; h < d.B * d.H; ++h)
    for (int64_t i = 0; i < d.Sq; ++i) {
      Vec e(size_t(d.Sk));
      double sum = 0;
      for (int64_t j = 0; j < d.Sk; ++j) {
        double s = 0;
        for (int64_t c = 0; c < d.D; ++c)
          s += q[size_t((h * d.Sq + i) * d.D + c)] * k[size_t((h * d.Sk + j) * d.D + c)];
        e[size_t(j)] = std::exp(scale * s);
        sum += e[size_t(j)];
      }
      lse[size_t(h * d.Sq + i)] = std::log(sum);
      for (int64_t j = 0; j < d.Sk; ++j)
        for (int64_t c = 0; c < d.Dv; ++c)
          o[size_t((h * d.Sq + i) * d.Dv + c)] += e[size_t(j)] / sum * v[size_t((h * d.Sk + j) * d.Dv + c)];
    }
  return {o, lse};
}

void checkClose(const Vec &got, const Vec &want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])));
  }
}

// Values as a tensor of `dtype` holds them.
Vec rounded(Vec v, plan::DType dtype) {
  for (double &e : v)
    e = dtype == plan::F16    ? halfToDouble(doubleToHalf(e))
        : dtype == plan::BF16 ? bfloat16ToDouble(doubleToBFloat16(e))
        : dtype == plan::F32  ? double(float(e))
                              : e;
  return v;
}

} // namespace

TEST_CASE("attention matches the textbook formula", "[attention]") {
  std::mt19937_64 rng(7);
  // Sq != Sk and Dv != D, so that a transposed index would show.
  for (const Dims d : {Dims{2, 3, 3, 5, 4, 6}, Dims{1, 1, 1, 1, 2, 1}, Dims{1, 2, 7, 4, 8, 8}}) {
    for (plan::DType dtype : {plan::F64, plan::F32, plan::F16, plan::BF16}) {
      INFO("B,H,Sq,Sk,D,Dv = " << d.B << "," << d.H << "," << d.Sq << "," << d.Sk << "," << d.D << "," << d.Dv
                               << ", dtype " << plan::dtypeName(dtype));
      const Vec q = rounded(randomValues(d.q(), rng, -2, 2), dtype), k = rounded(randomValues(d.k(), rng, -2, 2), dtype),
                v = rounded(randomValues(d.v(), rng), dtype);
      const double scale = 1 / std::sqrt(double(d.D));
      auto got = runKernel("attention", {{d.q(), q, dtype}, {d.k(), k, dtype}, {d.v(), v, dtype}},
                           {{d.o(), {}, dtype}, {d.stats(), {}, plan::F32}}, scaleAttr(scale));
      auto [o, lse] = naiveAttention(d, q, k, v, scale);
      // The kernel computes in f64 and rounds once into o's dtype, and into f32 for stats.
      const double oTol = dtype == plan::F64 ? 1e-12 : dtype == plan::F32 ? 1e-7 : dtype == plan::F16 ? 1e-3 : 8e-3;
      checkClose(got[0], o, oTol);
      checkClose(got[1], lse, 1e-7);
    }
  }
}

TEST_CASE("attention keeps large scores finite (the max shift)", "[attention]") {
  // Scores of 1000 overflow a plain exp; the log-sum-exp is exact.
  const Dims d{1, 1, 1, 2, 1, 1};
  auto got = runKernel("attention", {{d.q(), {1000.0}, plan::F64}, {d.k(), {1.0, 1.0}, plan::F64},
                                     {d.v(), {2.0, 4.0}, plan::F64}},
                       {{d.o(), {}, plan::F64}, {d.stats(), {}, plan::F32}}, scaleAttr(1.0));
  CHECK(got[0][0] == Approx(3.0));
  CHECK(got[1][0] == Approx(1000.0 + std::log(2.0)));
}

TEST_CASE("attention_backward matches finite differences of attention", "[attention]") {
  std::mt19937_64 rng(11);
  for (const Dims d : {Dims{2, 2, 3, 5, 4, 6}, Dims{1, 1, 4, 2, 3, 2}}) {
    INFO("B,H,Sq,Sk,D,Dv = " << d.B << "," << d.H << "," << d.Sq << "," << d.Sk << "," << d.D << "," << d.Dv);
    const Vec q = randomValues(d.q(), rng, -1.5, 1.5), k = randomValues(d.k(), rng, -1.5, 1.5),
              v = randomValues(d.v(), rng), dO = randomValues(d.o(), rng);
    const double scale = 0.7;
    const Attrs attrs = scaleAttr(scale);
    std::vector<Operand> inputs{{d.q(), q, plan::F64}, {d.k(), k, plan::F64}, {d.v(), v, plan::F64}};
    const std::vector<Operand> outputs{{d.o(), {}, plan::F64}, {d.stats(), {}, plan::F32}};
    auto forward = runKernel("attention", inputs, outputs, attrs);
    auto grads = runKernel("attention_backward",
                           {inputs[0], inputs[1], inputs[2], {d.o(), forward[0], plan::F64},
                            {d.stats(), forward[1], plan::F32}, {d.o(), dO, plan::F64}},
                           {{d.q(), {}, plan::F64}, {d.k(), {}, plan::F64}, {d.v(), {}, plan::F64}}, attrs);
    for (size_t which = 0; which < 3; ++which) {
      INFO("gradient of input " << which << " (q, k, v)");
      auto o = [&](const Vec &x) {
        auto in = inputs;
        in[which].values = x;
        return runKernel("attention", in, outputs, attrs)[0];
      };
      // stats is stored in f32, so P carries a relative error of about 1e-7.
      checkClose(grads[which], numericGradient(o, inputs[which].values, dO), 1e-6);
    }
  }
}

TEST_CASE("the validator refuses attention operands that do not fit", "[attention]") {
  struct Case {
    const char *what;
    Shape k, v, o, stats;
    plan::DType oType, statsType;
    Attrs attrs;
    const char *message;
  };
  const Attrs ok = scaleAttr(0.5);
  const Case cases[] = {
      {"k's head dimension", {2, 3, 5, 8}, {2, 3, 5, 6}, {2, 3, 4, 6}, {2, 3, 4, 1}, plan::F32, plan::F32, ok,
       "q's head dimension D = 4"},
      {"v's sequence length", {2, 3, 5, 4}, {2, 3, 6, 6}, {2, 3, 4, 6}, {2, 3, 4, 1}, plan::F32, plan::F32, ok,
       "k's sequence length Sk = 5"},
      {"k's heads", {2, 1, 5, 4}, {2, 3, 5, 6}, {2, 3, 4, 6}, {2, 3, 4, 1}, plan::F32, plan::F32, ok,
       "batch and head dimensions"},
      {"rank", {2, 3, 5, 4}, {3, 5, 6}, {2, 3, 4, 6}, {2, 3, 4, 1}, plan::F32, plan::F32, ok, "v must be rank 4"},
      {"o's shape", {2, 3, 5, 4}, {2, 3, 5, 6}, {2, 3, 4, 4}, {2, 3, 4, 1}, plan::F32, plan::F32, ok,
       "the operands give [2, 3, 4, 6]"},
      {"stats' shape", {2, 3, 5, 4}, {2, 3, 5, 6}, {2, 3, 4, 6}, {2, 3, 4}, plan::F32, plan::F32, ok,
       "the operands give [2, 3, 4, 1]"},
      {"o's dtype", {2, 3, 5, 4}, {2, 3, 5, 6}, {2, 3, 4, 6}, {2, 3, 4, 1}, plan::F16, plan::F32, ok,
       "share one element type, got f32 and f16"},
      {"stats' dtype", {2, 3, 5, 4}, {2, 3, 5, 6}, {2, 3, 4, 6}, {2, 3, 4, 1}, plan::F32, plan::F16, ok,
       "stats (the log-sum-exp of each row) must be f32"},
      {"no scale", {2, 3, 5, 4}, {2, 3, 5, 6}, {2, 3, 4, 6}, {2, 3, 4, 1}, plan::F32, plan::F32, {},
       "attribute 'scale' is required"},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    PlanBuilder b;
    auto q = b.tensor("q", {2, 3, 4, 4}, plan::Tensor::INPUT);
    auto k = b.tensor("k", c.k, plan::Tensor::INPUT);
    auto v = b.tensor("v", c.v, plan::Tensor::INPUT);
    auto o = b.tensor("o", c.o, plan::Tensor::OUTPUT, c.oType);
    auto stats = b.tensor("stats", c.stats, plan::Tensor::OUTPUT, c.statsType);
    b.kernel("attention", {q, k, v}, {o, stats}, c.attrs);
    const Status s = plan::validatePlan(b.plan);
    REQUIRE_FALSE(s.isOk());
    CHECK_THAT(s.message(), Contains(c.message));
    CHECK_THAT(s.message(), Contains("(attention)"));
  }
}

TEST_CASE("the validator refuses attention_backward gradients unlike their operands", "[attention]") {
  const Dims d{1, 2, 3, 5, 4, 6};
  for (int wrong = 0; wrong < 4; ++wrong) {
    PlanBuilder b;
    auto q = b.tensor("q", d.q(), plan::Tensor::INPUT), k = b.tensor("k", d.k(), plan::Tensor::INPUT),
         v = b.tensor("v", d.v(), plan::Tensor::INPUT), o = b.tensor("o", d.o(), plan::Tensor::INPUT),
         stats = b.tensor("stats", d.stats(), plan::Tensor::INPUT),
         dO = b.tensor("dO", wrong == 0 ? d.q() : d.o(), plan::Tensor::INPUT);
    auto dq = b.tensor("dq", wrong == 1 ? d.k() : d.q(), plan::Tensor::OUTPUT),
         dk = b.tensor("dk", wrong == 2 ? d.q() : d.k(), plan::Tensor::OUTPUT),
         dv = b.tensor("dv", d.v(), plan::Tensor::OUTPUT, wrong == 3 ? plan::BF16 : plan::F32);
    b.kernel("attention_backward", {q, k, v, o, stats, dO}, {dq, dk, dv}, scaleAttr(0.5));
    const Status s = plan::validatePlan(b.plan);
    INFO("case " << wrong << ": " << s.message());
    REQUIRE_FALSE(s.isOk());
    CHECK_THAT(s.message(), Contains(wrong == 0 ? "dO" : wrong == 1 ? "dq" : wrong == 2 ? "dk" : "element type"));
  }
  // And takes the right ones.
  PlanBuilder b;
  auto q = b.tensor("q", d.q(), plan::Tensor::INPUT), k = b.tensor("k", d.k(), plan::Tensor::INPUT),
       v = b.tensor("v", d.v(), plan::Tensor::INPUT), o = b.tensor("o", d.o(), plan::Tensor::INPUT),
       stats = b.tensor("stats", d.stats(), plan::Tensor::INPUT), dO = b.tensor("dO", d.o(), plan::Tensor::INPUT);
  auto dq = b.tensor("dq", d.q(), plan::Tensor::OUTPUT), dk = b.tensor("dk", d.k(), plan::Tensor::OUTPUT),
       dv = b.tensor("dv", d.v(), plan::Tensor::OUTPUT);
  b.kernel("attention_backward", {q, k, v, o, stats, dO}, {dq, dk, dv}, scaleAttr(0.5));
  const Status s = plan::validatePlan(b.plan);
  INFO(s.message());
  CHECK(s.isOk());
}
