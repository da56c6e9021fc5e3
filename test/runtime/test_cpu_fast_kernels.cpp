// The CPU backend's optimized kernels against plain reference loops: bit-identical results in
// f64 (every output sums the same terms in the same order), the same bits for any thread count,
// and (hidden, tag [.bench]) timings of the heavy kernels.
#include "plan_builder.h"
#include "test_helpers.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"
#include "plan/plan_validator.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

using namespace castor;
using castor::test::count;
using castor::test::PlanBuilder;
using castor::test::randomValues;
using Attrs = std::map<std::string, plan::Attr>;
using Vec = std::vector<double>;
using Shape = std::vector<int64_t>;

namespace {

// Sets CASTOR_CPU_THREADS for the lifetime of the object.
struct ThreadsEnv {
  explicit ThreadsEnv(int n) { setenv("CASTOR_CPU_THREADS", std::to_string(n).c_str(), 1); }
  ~ThreadsEnv() { unsetenv("CASTOR_CPU_THREADS"); }
};

// A one-kernel plan on the CPU backend, loaded once and run as often as needed.
struct OneKernel {
  PlanBuilder pb;
  std::vector<uint32_t> in, out;
  std::unique_ptr<Backend> backend;

  OneKernel(const std::string &op, const std::vector<Shape> &ins, const std::vector<Shape> &outs, Attrs attrs,
            plan::DType dtype, std::vector<plan::DType> inTypes = {}) {
    for (size_t i = 0; i < ins.size(); ++i)
      in.push_back(pb.tensor("in" + std::to_string(i), ins[i], plan::Tensor::INPUT,
                             i < inTypes.size() ? inTypes[i] : dtype));
    for (size_t i = 0; i < outs.size(); ++i)
      out.push_back(pb.tensor("out" + std::to_string(i), outs[i], plan::Tensor::OUTPUT, dtype));
    pb.kernel(op, in, out, attrs);
    backend = test::loadOnCpu(pb.plan);
  }
  void set(size_t i, const Vec &v) { test::uploadValues(*backend, pb.plan, in[i], v); }
  void run() { test::runOk(*backend); }
  Vec get(size_t i) { return test::downloadValues(*backend, pb.plan, out[i]); }
};

// Seconds per run of k after a warm-up run, timed over at least 0.3 s (or 1000 runs).
double secondsPerRun(OneKernel &k) {
  k.run();
  int reps = 0;
  auto t0 = std::chrono::steady_clock::now();
  double sec = 0;
  do {
    k.run();
    ++reps;
    sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (sec < 0.3 && reps < 1000);
  return sec / reps;
}

void requireSameBits(const Vec &got, const Vec &want) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(double)) != 0 && bad++ == 0)
      first = i;
  INFO("first differing element " << first << ": got " << (bad ? got[first] : 0) << ", want "
                                  << (bad ? want[first] : 0));
  CHECK(bad == 0);
}

// --- Reference loops (the backend's original, unoptimized formulations) ----------------------

struct Geo {
  int64_t N, C, H, W, K, Cg, R, S, P, Q, G, Kg;
  shape::Conv2dAttrs a;
};

Geo geometry(const Shape &x, const Shape &w, const Attrs &attrs) {
  plan::Kernel k;
  for (auto &[n, v] : attrs)
    (*k.mutable_attrs())[n] = v;
  shape::Conv2dAttrs a = plan::parseConv2d(k)->shape;
  Shape y = shape::conv2d(x, w, nullptr, a).shape;
  return {x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], y[2], y[3], a.groups, w[0] / a.groups, a};
}

// f(x index, w index, y index) for every valid tap of the convolution, in order over n, k, ci,
// r, s, then the output position.
template <typename F> void refTaps(const Geo &g, F &&f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t ci = 0; ci < g.Cg; ++ci) {
        const int64_t cc = (k / g.Kg) * g.Cg + ci;
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s)
            for (int64_t op = 0; op < g.P; ++op) {
              const int64_t h = op * g.a.strides[0] - g.a.pads[0] + r * g.a.dilations[0];
              if (h < 0 || h >= g.H)
                continue;
              for (int64_t oq = 0; oq < g.Q; ++oq) {
                const int64_t w = oq * g.a.strides[1] - g.a.pads[1] + s * g.a.dilations[1];
                if (w < 0 || w >= g.W)
                  continue;
                f(size_t(((n * g.C + cc) * g.H + h) * g.W + w), size_t(((k * g.Cg + ci) * g.R + r) * g.S + s),
                  size_t(((n * g.K + k) * g.P + op) * g.Q + oq));
              }
            }
      }
}

// Each output: its bias (or 0), plus its valid taps in order over ci, then r, then s.
Vec refConv(const Geo &g, const Vec &X, const Vec &Wt, const Vec &B) {
  Vec Y(static_cast<size_t>(g.N * g.K * g.P * g.Q));
  for (size_t i = 0; i < Y.size(); ++i)
    Y[i] = B.empty() ? 0.0 : B[size_t(int64_t(i) / (g.P * g.Q) % g.K)];
  refTaps(g, [&](size_t xi, size_t wi, size_t yi) { Y[yi] += X[xi] * Wt[wi]; });
  return Y;
}

Attrs convAttrs(std::vector<int64_t> strides, std::vector<int64_t> pads, std::vector<int64_t> dil, int64_t groups) {
  return {{"strides", plan::intsAttr(strides)},
          {"pads", plan::intsAttr(pads)},
          {"dilations", plan::intsAttr(dil)},
          {"groups", plan::intAttr(groups)}};
}

struct ConvCase {
  Shape x, w;
  Attrs attrs;
};

std::vector<ConvCase> convCases() {
  return {
      {{2, 3, 9, 11}, {5, 3, 3, 3}, convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1)},
      {{1, 8, 7, 7}, {9, 8, 1, 1}, convAttrs({1, 1}, {0, 0, 0, 0}, {1, 1}, 1)},
      {{2, 4, 10, 9}, {6, 4, 3, 3}, convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 1)},
      {{1, 4, 6, 7}, {6, 2, 3, 2}, convAttrs({2, 1}, {1, 0, 0, 1}, {1, 2}, 2)},
      {{2, 2, 5, 5}, {3, 2, 1, 1}, convAttrs({2, 2}, {0, 0, 0, 0}, {1, 1}, 1)},
      {{1, 4, 4, 4}, {4, 1, 3, 3}, convAttrs({3, 3}, {2, 2, 2, 2}, {2, 2}, 4)},
      {{1, 3, 12, 13}, {7, 3, 7, 7}, convAttrs({2, 2}, {3, 3, 3, 3}, {1, 1}, 1)},
      {{1, 2, 3, 3}, {3, 2, 5, 4}, convAttrs({1, 1}, {4, 3, 2, 5}, {1, 1}, 1)}, // rows with no valid tap
      {{3, 6, 8, 5}, {6, 1, 3, 3}, convAttrs({1, 2}, {1, 2, 0, 1}, {2, 1}, 6)},
      {{2, 16, 6, 6}, {13, 16, 3, 3}, convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1)},
  };
}

} // namespace

TEST_CASE("conv kernels give the reference loops' exact bits", "[cpu-fast]") {
  std::mt19937_64 rng(7);
  for (int threads : {1, 3}) {
    ThreadsEnv env(threads);
    auto cases = convCases();
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const ConvCase &c = cases[ci];
      INFO("case " << ci << ", threads " << threads);
      Geo g = geometry(c.x, c.w, c.attrs);
      Shape ys{g.N, g.K, g.P, g.Q};
      Vec x = randomValues(count(c.x), rng), w = randomValues(count(c.w), rng), b = randomValues(g.K, rng),
          dy = randomValues(count(ys), rng);
      {
        OneKernel k("conv2d", {c.x, c.w, {g.K}}, {ys}, c.attrs, plan::F64);
        k.set(0, x);
        k.set(1, w);
        k.set(2, b);
        k.run();
        requireSameBits(k.get(0), refConv(g, x, w, b));
      }
      {
        OneKernel k("conv2d", {c.x, c.w}, {ys}, c.attrs, plan::F64);
        k.set(0, x);
        k.set(1, w);
        k.run();
        requireSameBits(k.get(0), refConv(g, x, w, {}));
      }
      {
        OneKernel k("conv2d_backward_data", {ys, c.w}, {c.x}, c.attrs, plan::F64);
        k.set(0, dy);
        k.set(1, w);
        k.run();
        Vec want(x.size(), 0.0);
        refTaps(g, [&](size_t xi, size_t fi, size_t yi) { want[xi] += dy[yi] * w[fi]; });
        requireSameBits(k.get(0), want);
      }
      {
        OneKernel k("conv2d_backward_filter", {c.x, ys}, {c.w}, c.attrs, plan::F64);
        k.set(0, x);
        k.set(1, dy);
        k.run();
        Vec want(w.size(), 0.0);
        refTaps(g, [&](size_t xi, size_t fi, size_t yi) { want[fi] += dy[yi] * x[xi]; });
        requireSameBits(k.get(0), want);
      }
    }
  }
}

TEST_CASE("conv kernels skip padded taps (non-finite weights stay off the border)", "[cpu-fast]") {
  // A padded tap is skipped, not multiplied by zero: an infinite weight on a tap that only ever
  // reads padding leaves the output finite.
  Shape xs{1, 1, 3, 3}, ws{1, 1, 3, 3};
  Attrs attrs = convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  OneKernel k("conv2d", {xs, ws}, {{1, 1, 3, 3}}, attrs, plan::F64);
  Vec x(9, 1.0), w(9, 1.0);
  k.set(0, x);
  w[0] = std::numeric_limits<double>::infinity();
  k.set(1, w);
  k.run();
  Vec y = k.get(0);
  CHECK(std::isinf(y[8]));
  CHECK(y[0] == 4.0);
  CHECK(y[1] == 6.0);
}

TEST_CASE("pooling, batch norm and gemm give the reference loops' exact bits", "[cpu-fast]") {
  std::mt19937_64 rng(11);
  SECTION("gemm and matmul") {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int64_t M = 37, N = 29, K = 53;
        Vec a = randomValues(M * K, rng), b = randomValues(K * N, rng), c = randomValues(N, rng);
        OneKernel k("gemm", {ta ? Shape{K, M} : Shape{M, K}, tb ? Shape{N, K} : Shape{K, N}, {N}}, {{M, N}},
                    {{"trans_a", plan::boolAttr(ta)}, {"trans_b", plan::boolAttr(tb)},
                     {"alpha", plan::floatAttr(0.75)}, {"beta", plan::floatAttr(-1.5)}},
                    plan::F64);
        k.set(0, a);
        k.set(1, b);
        k.set(2, c);
        k.run();
        Vec want(static_cast<size_t>(M * N));
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < K; ++p)
              acc += a[size_t(ta ? p * M + i : i * K + p)] * b[size_t(tb ? j * K + p : p * N + j)];
            want[size_t(i * N + j)] = 0.75 * acc + -1.5 * c[size_t(j)];
          }
        requireSameBits(k.get(0), want);
      }
    // One b for every product (the rows of one product), a b a product, and one a for every b.
    const int64_t B = 3, M = 5, K = 70, N = 6;
    for (auto [aBatched, bBatched] : {std::pair{true, false}, {true, true}, {false, true}}) {
      Vec a = randomValues((aBatched ? B : 1) * M * K, rng), b = randomValues((bBatched ? B : 1) * K * N, rng);
      OneKernel k("matmul", {aBatched ? Shape{B, M, K} : Shape{M, K}, bBatched ? Shape{B, K, N} : Shape{K, N}},
                  {{B, M, N}}, {}, plan::F64);
      k.set(0, a);
      k.set(1, b);
      k.run();
      Vec want(static_cast<size_t>(B * M * N));
      for (int64_t t = 0; t < B; ++t)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < K; ++p)
              acc += a[size_t(((aBatched ? t : 0) * M + i) * K + p)] * b[size_t(((bBatched ? t : 0) * K + p) * N + j)];
            want[size_t((t * M + i) * N + j)] = acc;
          }
      requireSameBits(k.get(0), want);
    }
  }
  SECTION("batch norm training and its backward") {
    const int64_t N = 3, C = 5, H = 7, W = 6, inner = H * W;
    Shape xs{N, C, H, W};
    Vec x = randomValues(count(xs), rng), gamma = randomValues(C, rng), beta = randomValues(C, rng),
        dy = randomValues(count(xs), rng);
    OneKernel f("batch_norm_training", {xs, {C}, {C}}, {xs, {C}, {C}}, {{"epsilon", plan::floatAttr(1e-3)}},
                plan::F64);
    f.set(0, x);
    f.set(1, gamma);
    f.set(2, beta);
    f.run();
    Vec y(x.size()), mean(static_cast<size_t>(C)), invStd(static_cast<size_t>(C));
    for (int64_t ch = 0; ch < C; ++ch) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i)
          sum += x[size_t((n * C + ch) * inner + i)];
      const double mu = sum / double(N * inner);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const double d = x[size_t((n * C + ch) * inner + i)] - mu;
          sq += d * d;
        }
      const double is = 1.0 / std::sqrt(sq / double(N * inner) + 1e-3);
      mean[size_t(ch)] = mu;
      invStd[size_t(ch)] = is;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t at = size_t((n * C + ch) * inner + i);
          y[at] = (x[at] - mu) * is * gamma[size_t(ch)] + beta[size_t(ch)];
        }
    }
    requireSameBits(f.get(0), y);
    requireSameBits(f.get(1), mean);
    requireSameBits(f.get(2), invStd);

    OneKernel bk("batch_norm_training_backward", {xs, xs, {C}, {C}, {C}}, {xs, {C}, {C}}, {}, plan::F64);
    bk.set(0, dy);
    bk.set(1, x);
    bk.set(2, gamma);
    bk.set(3, mean);
    bk.set(4, invStd);
    bk.run();
    const double m = double(N * inner);
    Vec dx(x.size()), dScale(static_cast<size_t>(C)), dBias(static_cast<size_t>(C));
    for (int64_t ch = 0; ch < C; ++ch) {
      double sdy = 0, sdyx = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t at = size_t((n * C + ch) * inner + i);
          sdy += dy[at];
          sdyx += dy[at] * (x[at] - mean[size_t(ch)]) * invStd[size_t(ch)];
        }
      dBias[size_t(ch)] = sdy;
      dScale[size_t(ch)] = sdyx;
      const double k = gamma[size_t(ch)] * invStd[size_t(ch)] / m;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t at = size_t((n * C + ch) * inner + i);
          const double xhat = (x[at] - mean[size_t(ch)]) * invStd[size_t(ch)];
          dx[at] = k * (m * dy[at] - sdy - xhat * sdyx);
        }
    }
    requireSameBits(bk.get(0), dx);
    requireSameBits(bk.get(1), dScale);
    requireSameBits(bk.get(2), dBias);
  }
  SECTION("max and average pooling, forward and backward") {
    struct PoolCase {
      Shape x;
      Attrs attrs;
    };
    std::vector<PoolCase> cases = {
        {{2, 3, 9, 9}, {{"kernel", plan::intsAttr({3, 3})}, {"strides", plan::intsAttr({2, 2})},
                        {"pads", plan::intsAttr({1, 1, 1, 1})}}},
        {{1, 2, 8, 7}, {{"kernel", plan::intsAttr({2, 3})}, {"strides", plan::intsAttr({2, 1})},
                        {"pads", plan::intsAttr({0, 1, 1, 0})}, {"ceil_mode", plan::boolAttr(true)}}},
        {{1, 2, 6, 6}, {{"kernel", plan::intsAttr({3, 3})}, {"strides", plan::intsAttr({1, 1})},
                        {"pads", plan::intsAttr({1, 1, 1, 1})}, {"count_include_pad", plan::boolAttr(true)}}},
    };
    for (size_t pc = 0; pc < cases.size(); ++pc) {
      INFO("pool case " << pc);
      const PoolCase &c = cases[pc];
      plan::Kernel kk;
      for (auto &[n, v] : c.attrs)
        (*kk.mutable_attrs())[n] = v;
      auto p = plan::parsePool2d(kk);
      REQUIRE(p);
      auto a = p->shape;
      Shape ys = shape::pool2d(c.x, a).shape;
      const int64_t NC = c.x[0] * c.x[1], H = c.x[2], W = c.x[3], P = ys[2], Q = ys[3];
      Vec x = randomValues(count(c.x), rng), dy = randomValues(count(ys), rng);
      x[5] = x[6]; // a tie
      for (bool isMax : {true, false}) {
        Attrs attrs = c.attrs;
        if (isMax)
          attrs.erase("count_include_pad");
        OneKernel f(isMax ? "max_pool2d" : "avg_pool2d", {c.x}, {ys}, attrs, plan::F64);
        f.set(0, x);
        f.run();
        Vec y(static_cast<size_t>(count(ys))), dx(x.size(), 0.0);
        for (int64_t nc = 0; nc < NC; ++nc)
          for (int64_t op = 0; op < P; ++op)
            for (int64_t oq = 0; oq < Q; ++oq) {
              const int64_t h0 = op * a.strides[0] - a.pads[0], w0 = oq * a.strides[1] - a.pads[1];
              double acc = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
              int64_t valid = 0, at = -1;
              for (int64_t r = 0; r < a.kernel[0]; ++r) {
                const int64_t h = h0 + r * a.dilations[0];
                if (h < 0 || h >= H)
                  continue;
                for (int64_t s = 0; s < a.kernel[1]; ++s) {
                  const int64_t w = w0 + s * a.dilations[1];
                  if (w < 0 || w >= W)
                    continue;
                  const int64_t i = (nc * H + h) * W + w;
                  const double v = x[size_t(i)];
                  if (isMax) {
                    if (at < 0 || v > acc || std::isnan(v))
                      at = i;
                    acc = (v > acc || std::isnan(v)) ? v : acc;
                  } else {
                    acc += v;
                  }
                  ++valid;
                }
              }
              const double g = dy[size_t((nc * P + op) * Q + oq)];
              if (isMax) {
                if (at >= 0)
                  dx[size_t(at)] += g;
              } else {
                int64_t divisor = valid;
                if (p->countIncludePad)
                  divisor = (std::min(h0 + a.kernel[0], H + a.pads[2]) - h0) *
                            (std::min(w0 + a.kernel[1], W + a.pads[3]) - w0);
                acc = divisor > 0 ? acc / double(divisor) : 0.0;
                if (divisor > 0)
                  for (int64_t r = 0; r < a.kernel[0]; ++r)
                    for (int64_t s = 0; s < a.kernel[1]; ++s) {
                      const int64_t h = h0 + r, w = w0 + s;
                      if (h >= 0 && h < H && w >= 0 && w < W)
                        dx[size_t((nc * H + h) * W + w)] += g / double(divisor);
                    }
              }
              y[size_t((nc * P + op) * Q + oq)] = acc;
            }
        requireSameBits(f.get(0), y);
        if (isMax) {
          OneKernel bk("max_pool2d_backward", {ys, c.x}, {c.x}, attrs, plan::F64);
          bk.set(0, dy);
          bk.set(1, x);
          bk.run();
          requireSameBits(bk.get(0), dx);
        } else {
          OneKernel bk("avg_pool2d_backward", {ys}, {c.x}, attrs, plan::F64);
          bk.set(0, dy);
          bk.run();
          requireSameBits(bk.get(0), dx);
        }
      }
    }
  }
}

TEST_CASE("kernels give the same bits with 1 and with 4 threads", "[cpu-fast]") {
  std::mt19937_64 rng(3);
  struct Run {
    std::string op;
    std::vector<Shape> in;
    std::vector<Shape> out;
    Attrs attrs;
  };
  Attrs conv = convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  Attrs conv2 = convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 1);
  std::vector<Run> runs = {
      {"conv2d", {{4, 16, 14, 14}, {32, 16, 3, 3}, {32}}, {{4, 32, 14, 14}}, conv},
      {"conv2d", {{4, 16, 14, 14}, {32, 16, 3, 3}}, {{4, 32, 7, 7}}, conv2},
      {"conv2d_backward_data", {{4, 32, 14, 14}, {32, 16, 3, 3}}, {{4, 16, 14, 14}}, conv},
      {"conv2d_backward_data", {{4, 32, 7, 7}, {32, 16, 3, 3}}, {{4, 16, 14, 14}}, conv2},
      {"conv2d_backward_filter", {{4, 16, 14, 14}, {4, 32, 14, 14}}, {{32, 16, 3, 3}}, conv},
      {"conv2d_backward_filter", {{4, 16, 14, 14}, {4, 32, 7, 7}}, {{32, 16, 3, 3}}, conv2},
      {"gemm", {{64, 96}, {96, 40}}, {{64, 40}}, {}},
      {"batch_norm_training", {{8, 16, 10, 10}, {16}, {16}}, {{8, 16, 10, 10}, {16}, {16}}, {}},
  };
  for (const Run &r : runs) {
    INFO(r.op);
    std::vector<Vec> inputs;
    for (const Shape &s : r.in)
      inputs.push_back(randomValues(count(s), rng));
    std::vector<std::vector<Vec>> results;
    for (int threads : {1, 4}) {
      ThreadsEnv env(threads);
      for (plan::DType dt : {plan::F32, plan::F64}) {
        OneKernel k(r.op, r.in, r.out, r.attrs, dt);
        for (size_t i = 0; i < inputs.size(); ++i)
          k.set(i, inputs[i]);
        k.run();
        std::vector<Vec> outs;
        for (size_t i = 0; i < r.out.size(); ++i)
          outs.push_back(k.get(i));
        results.push_back(outs);
      }
    }
    for (size_t i = 0; i < r.out.size(); ++i) {
      requireSameBits(results[2][i], results[0][i]); // f32
      requireSameBits(results[3][i], results[1][i]); // f64
    }
  }
}

// Timings (f32 operands), hidden: `castor_runtime_tests "[.bench]"`.
TEST_CASE("cpu kernel timings", "[.bench]") {
  std::mt19937_64 rng(5);
  struct Item {
    std::string name, op;
    std::vector<Shape> in;
    Shape out;
    Attrs attrs;
    double flops;
  };
  auto conv = [](int64_t stride, int64_t pad) { return convAttrs({stride, stride}, {pad, pad, pad, pad}, {1, 1}, 1); };
  std::vector<Item> items;
  auto addConv = [&](const std::string &name, int64_t N, int64_t C, int64_t H, int64_t K, int64_t R, int64_t stride,
                     int64_t pad) {
    const int64_t P = (H + 2 * pad - R) / stride + 1;
    const double flops = 2.0 * double(N * K * C * R * R * P * P);
    Shape xs{N, C, H, H}, ws{K, C, R, R}, ys{N, K, P, P};
    items.push_back({name + " fwd", "conv2d", {xs, ws}, ys, conv(stride, pad), flops});
    items.push_back({name + " bwd-data", "conv2d_backward_data", {ys, ws}, xs, conv(stride, pad), flops});
    items.push_back({name + " bwd-filter", "conv2d_backward_filter", {xs, ys}, ws, conv(stride, pad), flops});
  };
  addConv("conv3x3 64->64 56x56 n2", 2, 64, 56, 64, 3, 1, 1);
  addConv("tiny stem 1->16 28x28 n32", 32, 1, 28, 16, 3, 1, 1);
  addConv("tiny 16->16 28x28 n32", 32, 16, 28, 16, 3, 1, 1);
  addConv("tiny 16->32 s2 28x28 n32", 32, 16, 28, 32, 3, 2, 1);
  addConv("tiny 1x1 16->32 s2 n32", 32, 16, 28, 32, 1, 2, 0);
  addConv("tiny 32->32 14x14 n32", 32, 32, 14, 32, 3, 1, 1);
  addConv("r50 1x1 1024->256 14x14 n1", 1, 1024, 14, 256, 1, 1, 0);
  addConv("r50 3x3 512->512 7x7 n1", 1, 512, 7, 512, 3, 1, 1);
  Shape act{32, 16, 28, 28};
  const double actN = double(count(act));
  items.push_back({"gemm 256x256x256", "gemm", {{256, 256}, {256, 256}}, {256, 256}, {}, 2.0 * 256 * 256 * 256});
  items.push_back({"gemm 32x512->10 (trans_b)", "gemm", {{32, 512}, {10, 512}}, {32, 10},
                   {{"trans_b", plan::boolAttr(true)}}, 2.0 * 32 * 512 * 10});
  items.push_back({"relu 32x16x28x28", "relu", {act}, act, {}, actN});
  items.push_back({"add 32x16x28x28", "add", {act, act}, act, {}, actN});
  items.push_back({"relu_backward 32x16x28x28", "relu_backward", {act, act}, act, {}, actN});
  items.push_back({"max_pool 3x3 s2 32x16x28x28", "max_pool2d", {act}, {32, 16, 14, 14},
                   {{"kernel", plan::intsAttr({3, 3})}, {"strides", plan::intsAttr({2, 2})},
                    {"pads", plan::intsAttr({1, 1, 1, 1})}},
                   actN});
  items.push_back({"max_pool_bwd 3x3 s2 32x16x28x28", "max_pool2d_backward", {{32, 16, 14, 14}, act}, act,
                   {{"kernel", plan::intsAttr({3, 3})}, {"strides", plan::intsAttr({2, 2})},
                    {"pads", plan::intsAttr({1, 1, 1, 1})}},
                   actN});
  // CASTOR_BENCH_FILTER=text: only the timings whose name contains text.
  const char *filterEnv = std::getenv("CASTOR_BENCH_FILTER");
  const std::string filter = filterEnv ? filterEnv : "";
  for (const Item &it : items) {
    if (it.name.find(filter) == std::string::npos)
      continue;
    std::vector<Shape> outs{it.out};
    if (it.op == "batch_norm_training")
      outs = {it.out, {it.out[1]}, {it.out[1]}};
    OneKernel k(it.op, it.in, outs, it.attrs, plan::F32);
    for (size_t i = 0; i < it.in.size(); ++i)
      k.set(i, randomValues(count(it.in[i]), rng));
    const double perRun = secondsPerRun(k);
    WARN(it.name << ": " << perRun * 1e3 << " ms, " << it.flops / perRun * 1e-9 << " GFLOP/s");
  }
  Shape bnx{32, 16, 28, 28};
  for (const char *op : {"batch_norm_training", "batch_norm_training_backward"}) {
    if (std::string(op).find(filter) == std::string::npos)
      continue;
    const bool fwd = std::string(op) == "batch_norm_training";
    std::vector<Shape> in = fwd ? std::vector<Shape>{bnx, {16}, {16}} : std::vector<Shape>{bnx, bnx, {16}, {16}, {16}};
    OneKernel k(op, in, {bnx, {16}, {16}}, {}, plan::F32);
    for (size_t i = 0; i < in.size(); ++i) {
      Vec v = randomValues(count(in[i]), rng);
      if (!fwd && i == 4)
        for (double &e : v)
          e = std::fabs(e) + 0.5;
      k.set(i, v);
    }
    WARN(op << " 32x16x28x28: " << secondsPerRun(k) * 1e3 << " ms");
  }
}
