// CPU reference kernels against hand-computed values.
#include "plan_builder.h"

#include <cmath>

using namespace castor;
using castor::test::Operand;
using castor::test::runKernel;

namespace {

std::vector<double> iota(int n, double start = 1) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = start + i;
  return v;
}

void checkClose(const std::vector<double> &got, const std::vector<double> &want, double tol = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    if (!std::isfinite(want[i]) || tol == 0)
      CHECK(got[i] == want[i]);
    else
      CHECK(got[i] == Approx(want[i]).margin(tol));
  }
}

} // namespace

TEST_CASE("conv2d", "[kernels]") {
  SECTION("plain 2x2 filter") {
    auto y = runKernel("conv2d", {{{1, 1, 3, 3}, iota(9)}, {{1, 1, 2, 2}, {1, 0, 0, 1}}}, {{{1, 1, 2, 2}}});
    checkClose(y[0], {6, 8, 12, 14});
  }
  SECTION("stride 2, pads 1, bias") {
    auto y = runKernel("conv2d",
                       {{{1, 1, 3, 3}, iota(9)}, {{1, 1, 3, 3}, std::vector<double>(9, 1.0)}, {{1}, {0.5}}},
                       {{{1, 1, 2, 2}}},
                       {{"strides", plan::intsAttr({2, 2})}, {"pads", plan::intsAttr({1, 1, 1, 1})}});
    checkClose(y[0], {12.5, 16.5, 24.5, 28.5});
  }
  SECTION("asymmetric pads: top/left only") {
    // pads [1, 1, 0, 0]: output 3x3 of a 2x2 ones filter over the 3x3 input padded top and left.
    auto y = runKernel("conv2d", {{{1, 1, 3, 3}, iota(9)}, {{1, 1, 2, 2}, std::vector<double>(4, 1.0)}},
                       {{{1, 1, 3, 3}}}, {{"pads", plan::intsAttr({1, 1, 0, 0})}});
    checkClose(y[0], {1, 3, 5, 5, 12, 16, 11, 24, 28});
  }
  SECTION("dilation 2") {
    auto y = runKernel("conv2d", {{{1, 1, 3, 3}, iota(9)}, {{1, 1, 2, 2}, std::vector<double>(4, 1.0)}},
                       {{{1, 1, 1, 1}}}, {{"dilations", plan::intsAttr({2, 2})}});
    checkClose(y[0], {1 + 3 + 7 + 9});
  }
  SECTION("groups 2") {
    // Group 0 sees channels 0,1 with filter [1, 1]; group 1 sees channels 2,3 with [1, -1].
    auto y = runKernel("conv2d", {{{1, 4, 1, 1}, {1, 2, 3, 4}}, {{2, 2, 1, 1}, {1, 1, 1, -1}}}, {{{1, 2, 1, 1}}},
                       {{"groups", plan::intAttr(2)}});
    checkClose(y[0], {3, -1});
  }
  SECTION("batch and output channels") {
    // Two images, two 1x1 filters (x2 and x-1) over one channel.
    auto y = runKernel("conv2d", {{{2, 1, 1, 2}, {1, 2, 3, 4}}, {{2, 1, 1, 1}, {2, -1}}}, {{{2, 2, 1, 2}}});
    checkClose(y[0], {2, 4, -1, -2, 6, 8, -3, -4});
  }
}

TEST_CASE("pooling", "[kernels]") {
  SECTION("max pool with ceil mode") {
    auto y = runKernel("max_pool2d", {{{1, 1, 5, 5}, iota(25)}}, {{{1, 1, 3, 3}}},
                       {{"kernel", plan::intsAttr({2, 2})}, {"strides", plan::intsAttr({2, 2})},
                        {"ceil_mode", plan::boolAttr(true)}});
    checkClose(y[0], {7, 9, 10, 17, 19, 20, 22, 24, 25});
  }
  SECTION("max pool without ceil mode drops the partial window") {
    auto y = runKernel("max_pool2d", {{{1, 1, 5, 5}, iota(25)}}, {{{1, 1, 2, 2}}},
                       {{"kernel", plan::intsAttr({2, 2})}, {"strides", plan::intsAttr({2, 2})}});
    checkClose(y[0], {7, 9, 17, 19});
  }
  SECTION("max pool 3x3 stride 2 pad 1 (ResNet stem), padding never wins") {
    std::vector<double> x = iota(16, -20); // all negative
    auto y = runKernel("max_pool2d", {{{1, 1, 4, 4}, x}}, {{{1, 1, 2, 2}}},
                       {{"kernel", plan::intsAttr({3, 3})}, {"strides", plan::intsAttr({2, 2})},
                        {"pads", plan::intsAttr({1, 1, 1, 1})}});
    // Window (0,0) covers rows/cols 0..1: max x[1][1] = -20 + 5.
    checkClose(y[0], {-15, -13, -7, -5});
  }
  SECTION("max pool with dilation") {
    auto y = runKernel("max_pool2d", {{{1, 1, 3, 3}, {9, 1, 2, 1, 100, 1, 3, 1, 4}}}, {{{1, 1, 1, 1}}},
                       {{"kernel", plan::intsAttr({2, 2})}, {"dilations", plan::intsAttr({2, 2})}});
    checkClose(y[0], {9});
  }
  SECTION("avg pool with ceil mode averages the valid part of partial windows") {
    auto y = runKernel("avg_pool2d", {{{1, 1, 5, 5}, iota(25)}}, {{{1, 1, 3, 3}}},
                       {{"kernel", plan::intsAttr({2, 2})}, {"strides", plan::intsAttr({2, 2})},
                        {"ceil_mode", plan::boolAttr(true)}});
    checkClose(y[0], {4, 6, 7.5, 14, 16, 17.5, 21.5, 23.5, 25});
  }
  SECTION("avg pool with ceil mode and count_include_pad (PyTorch divisor)") {
    // No padding: the divisor is clipped to the input, so the result equals the case above.
    auto y = runKernel("avg_pool2d", {{{1, 1, 5, 5}, iota(25)}}, {{{1, 1, 3, 3}}},
                       {{"kernel", plan::intsAttr({2, 2})}, {"strides", plan::intsAttr({2, 2})},
                        {"ceil_mode", plan::boolAttr(true)}, {"count_include_pad", plan::boolAttr(true)}});
    checkClose(y[0], {4, 6, 7.5, 14, 16, 17.5, 21.5, 23.5, 25});
  }
  SECTION("avg pool with padding, with and without count_include_pad") {
    std::map<std::string, plan::Attr> attrs{{"kernel", plan::intsAttr({2, 2})}, {"pads", plan::intsAttr({1, 1, 1, 1})}};
    auto excl = runKernel("avg_pool2d", {{{1, 1, 2, 2}, {1, 2, 3, 4}}}, {{{1, 1, 3, 3}}}, attrs);
    checkClose(excl[0], {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
    attrs["count_include_pad"] = plan::boolAttr(true);
    auto incl = runKernel("avg_pool2d", {{{1, 1, 2, 2}, {1, 2, 3, 4}}}, {{{1, 1, 3, 3}}}, attrs);
    checkClose(incl[0], {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
  }
  SECTION("global average pool") {
    auto y = runKernel("global_avg_pool", {{{1, 2, 2, 2}, iota(8)}}, {{{1, 2, 1, 1}}});
    checkClose(y[0], {2.5, 6.5});
  }
}

TEST_CASE("batch norm", "[kernels]") {
  // x [2, 2, 1, 2]: channel 0 holds 1, 2, 3, 4; channel 1 holds 0, 0, 0, 4.
  std::vector<double> x{1, 2, 0, 0, 3, 4, 0, 4};
  const double eps = 1e-5;
  SECTION("training: batch mean, inverse std (biased variance), output") {
    auto r = runKernel("batch_norm_training", {{{2, 2, 1, 2}, x}, {{2}, {1, 2}}, {{2}, {0, 1}}},
                       {{{2, 2, 1, 2}}, {{2}}, {{2}}}, {{"epsilon", plan::floatAttr(eps)}});
    const double is0 = 1 / std::sqrt(1.25 + eps), is1 = 1 / std::sqrt(3.0 + eps);
    checkClose(r[1], {2.5, 1.0});
    checkClose(r[2], {is0, is1});
    checkClose(r[0], {-1.5 * is0, -0.5 * is0, 1 - 2 * is1, 1 - 2 * is1, 0.5 * is0, 1.5 * is0, 1 - 2 * is1,
                      1 + 6 * is1});
  }
  SECTION("training with running statistics (PyTorch momentum, unbiased running variance)") {
    auto r = runKernel("batch_norm_training",
                       {{{2, 2, 1, 2}, x}, {{2}, {1, 1}}, {{2}, {0, 0}}, {{2}, {0, 1}}, {{2}, {1, 1}}},
                       {{{2, 2, 1, 2}}, {{2}}, {{2}}, {{2}}, {{2}}}, {{"momentum", plan::floatAttr(0.1)}});
    checkClose(r[3], {0.25, 0.9 * 1 + 0.1 * 1.0});
    checkClose(r[4], {0.9 + 0.1 * 1.25 * 4 / 3, 0.9 + 0.1 * 3.0 * 4 / 3});
  }
  SECTION("inference") {
    auto r = runKernel("batch_norm_inference",
                       {{{2, 2, 1, 2}, x}, {{2}, {2, 1}}, {{2}, {1, 0}}, {{2}, {1, 0}}, {{2}, {4, 1}}},
                       {{{2, 2, 1, 2}}}, {{"epsilon", plan::floatAttr(0.0)}});
    checkClose(r[0], {1, 2, 0, 0, 3, 4, 0, 4});
  }
}

TEST_CASE("softmax cross entropy", "[kernels]") {
  std::vector<double> logits{1, 2, 3, 1, 1, 1};
  const double eps = 0.1;
  const double logZ0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  // PyTorch's formula: (1 - eps) * nll(target) + eps / C * sum over classes of nll.
  const double loss0 = (1 - eps) * (logZ0 - 3) + eps / 3 * ((logZ0 - 1) + (logZ0 - 2) + (logZ0 - 3));
  const double loss1 = std::log(3.0);
  SECTION("mean with label smoothing") {
    auto r = runKernel("softmax_cross_entropy", {{{2, 3}, logits}, {{2}, {2, 0}, plan::I64}}, {{{}}},
                       {{"label_smoothing", plan::floatAttr(eps)}});
    checkClose(r[0], {(loss0 + loss1) / 2});
    CHECK(loss0 == Approx(0.50760596).epsilon(1e-7)); // torch.nn.functional.cross_entropy value
  }
  SECTION("sum, none, and probabilities") {
    auto sum = runKernel("softmax_cross_entropy", {{{2, 3}, logits}, {{2}, {2, 0}, plan::I64}}, {{{}}},
                         {{"label_smoothing", plan::floatAttr(eps)}, {"reduction", plan::stringAttr("sum")}});
    checkClose(sum[0], {loss0 + loss1});
    auto none = runKernel("softmax_cross_entropy", {{{2, 3}, logits}, {{2}, {2, 0}, plan::I64}},
                          {{{2}}, {{2, 3}}},
                          {{"label_smoothing", plan::floatAttr(eps)}, {"reduction", plan::stringAttr("none")}});
    checkClose(none[0], {loss0, loss1});
    checkClose(none[1], {std::exp(1 - logZ0), std::exp(2 - logZ0), std::exp(3 - logZ0), 1 / 3.0, 1 / 3.0, 1 / 3.0});
  }
  SECTION("without smoothing: the plain negative log-likelihood") {
    auto r = runKernel("softmax_cross_entropy", {{{1, 3}, {1, 2, 3}}, {{1}, {2}, plan::I64}}, {{{}}});
    checkClose(r[0], {0.40760596}, 1e-8);
  }
}

TEST_CASE("elementwise, broadcasting and reshaping kernels", "[kernels]") {
  SECTION("relu, sigmoid, clip") {
    checkClose(runKernel("relu", {{{4}, {-1, 0, 2, -3}}}, {{{4}}})[0], {0, 0, 2, 0});
    checkClose(runKernel("sigmoid", {{{2}, {0, 2}}}, {{{2}}})[0], {0.5, 1 / (1 + std::exp(-2.0))});
    checkClose(runKernel("clip", {{{4}, {-1, 0, 2, 9}}}, {{{4}}},
                         {{"min", plan::floatAttr(0)}, {"max", plan::floatAttr(6)}})[0],
               {0, 0, 2, 6});
    checkClose(runKernel("clip", {{{3}, {-1, 0, 9}}}, {{{3}}}, {{"max", plan::floatAttr(1)}})[0], {-1, 0, 1});
  }
  SECTION("hard_sigmoid, hard_swish") {
    // ONNX's defaults (alpha 0.2, beta 0.5), then PyTorch's alpha 1/6.
    checkClose(runKernel("hard_sigmoid", {{{4}, {-4, 0, 1, 4}}}, {{{4}}})[0], {0, 0.5, 0.7, 1});
    checkClose(runKernel("hard_sigmoid", {{{4}, {-3, -1.5, 3, 9}}}, {{{4}}},
                         {{"alpha", plan::floatAttr(1.0 / 6.0)}, {"beta", plan::floatAttr(0.5)}})[0],
               {0, 0.25, 1, 1});
    checkClose(runKernel("hard_swish", {{{5}, {-4, -3, -1.5, 1.5, 5}}}, {{{5}}})[0], {0, 0, -0.375, 1.125, 5});
  }
  SECTION("gelu: exact and tanh forms") {
    // x Phi(x) at 0, +-1, 2 (Phi(1) = 0.841344746068543, Phi(2) = 0.977249868051821); the tanh
    // form as PyTorch's gelu(approximate="tanh") gives it.
    checkClose(runKernel("gelu", {{{4}, {0, 1, -1, 2}}}, {{{4}}})[0],
               {0, 0.841344746068543, -0.158655253931457, 1.954499736103642});
    checkClose(runKernel("gelu", {{{3}, {0, 1, 2}}}, {{{3}}}, {{"tanh", plan::boolAttr(true)}})[0],
               {0, 0.8411919906082768, 1.954597694087775});
  }
  SECTION("add and mul broadcast like numpy") {
    checkClose(runKernel("add", {{{2, 3}, iota(6)}, {{3}, {10, 20, 30}}}, {{{2, 3}}})[0], {11, 22, 33, 14, 25, 36});
    checkClose(runKernel("mul", {{{2, 1}, {2, 3}}, {{1, 3}, {1, 10, 100}}}, {{{2, 3}}})[0],
               {2, 20, 200, 3, 30, 300});
    // Per-channel scale [1, C, 1, 1] against [N, C, H, W].
    checkClose(runKernel("mul", {{{1, 2, 1, 2}, {1, 2, 3, 4}}, {{1, 2, 1, 1}, {10, -1}}}, {{{1, 2, 1, 2}}})[0],
               {10, 20, -3, -4});
  }
  SECTION("flatten, reshape, identity, dropout copy") {
    checkClose(runKernel("flatten", {{{2, 3, 1, 1}, iota(6)}}, {{{2, 3}}})[0], iota(6));
    checkClose(runKernel("reshape", {{{2, 3}, iota(6)}}, {{{3, 2}}})[0], iota(6));
    checkClose(runKernel("identity", {{{3}, iota(3)}}, {{{3}}})[0], iota(3));
    checkClose(runKernel("dropout", {{{3}, iota(3)}}, {{{3}}}, {{"ratio", plan::floatAttr(0.5)}})[0], iota(3));
  }
  SECTION("concat") {
    checkClose(runKernel("concat", {{{2, 1}, {1, 2}}, {{2, 2}, {3, 4, 5, 6}}}, {{{2, 3}}},
                         {{"axis", plan::intAttr(1)}})[0],
               {1, 3, 4, 2, 5, 6});
    checkClose(runKernel("concat", {{{1, 2}, {1, 2}}, {{1, 2}, {3, 4}}}, {{{2, 2}}})[0], {1, 2, 3, 4});
  }
  SECTION("transpose") {
    // x [2, 3] = 1..6; y [3, 2] = x^T.
    checkClose(runKernel("transpose", {{{2, 3}, {1, 2, 3, 4, 5, 6}}}, {{{3, 2}}},
                         {{"perm", plan::intsAttr({1, 0})}})[0],
               {1, 4, 2, 5, 3, 6});
    // x [2, 1, 3] -> [3, 2, 1]: y[k][i][0] = x[i][0][k].
    checkClose(runKernel("transpose", {{{2, 1, 3}, {1, 2, 3, 4, 5, 6}}}, {{{3, 2, 1}}},
                         {{"perm", plan::intsAttr({2, 0, 1})}})[0],
               {1, 4, 2, 5, 3, 6});
  }
  SECTION("slice and slice_backward") {
    // x [2, 4] = 1..8; rows 0..1, columns from the last backwards by 2: [4, 2], [8, 6].
    const std::map<std::string, plan::Attr> backwards = {{"starts", plan::intsAttr({0, -1})},
                                                         {"ends", plan::intsAttr({2, -100})},
                                                         {"steps", plan::intsAttr({1, -2})}};
    checkClose(runKernel("slice", {{{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}}}, {{{2, 2}}}, backwards)[0], {4, 2, 8, 6});
    checkClose(runKernel("slice_backward", {{{2, 2}, {4, 2, 8, 6}}}, {{{2, 4}}}, backwards)[0],
               {0, 2, 0, 4, 0, 6, 0, 8});
    // ONNX's "to the end" (INT64_MAX) and a start past the end (clamped: nothing).
    const int64_t end = std::numeric_limits<int64_t>::max();
    checkClose(runKernel("slice", {{{5}, {1, 2, 3, 4, 5}}}, {{{3}}},
                         {{"starts", plan::intsAttr({2})}, {"ends", plan::intsAttr({end})}, {"steps", plan::intsAttr({1})}})[0],
               {3, 4, 5});
  }
  SECTION("softmax") {
    double z = std::exp(1.0) + std::exp(2.0);
    checkClose(runKernel("softmax", {{{2, 2}, {1, 2, 5, 5}}}, {{{2, 2}}})[0],
               {std::exp(1.0) / z, std::exp(2.0) / z, 0.5, 0.5});
    checkClose(runKernel("softmax", {{{2, 2}, {1, 5, 2, 5}}}, {{{2, 2}}}, {{"axis", plan::intAttr(0)}})[0],
               {std::exp(1.0) / z, 0.5, std::exp(2.0) / z, 0.5});
  }
}

TEST_CASE("gemm and matmul", "[kernels]") {
  // A [2, 3], B [3, 2].
  std::vector<double> a{1, 2, 3, 4, 5, 6}, b{1, 0, 0, 1, 1, 1};
  SECTION("gemm with bias broadcast, alpha, beta") {
    auto y = runKernel("gemm", {{{2, 3}, a}, {{3, 2}, b}, {{2}, {10, 20}}}, {{{2, 2}}},
                       {{"alpha", plan::floatAttr(2)}, {"beta", plan::floatAttr(0.5)}});
    checkClose(y[0], {2 * 4 + 5, 2 * 5 + 10, 2 * 10 + 5, 2 * 11 + 10});
  }
  SECTION("gemm with transposes (Linear: x W^T + b)") {
    // W [2, 3] = B^T
    auto y = runKernel("gemm", {{{2, 3}, a}, {{2, 3}, {1, 0, 1, 0, 1, 1}}, {{1, 2}, {1, 1}}}, {{{2, 2}}},
                       {{"trans_b", plan::boolAttr(true)}});
    checkClose(y[0], {5, 6, 11, 12});
    auto t = runKernel("gemm", {{{3, 2}, {1, 4, 2, 5, 3, 6}}, {{3, 2}, b}}, {{{2, 2}}},
                       {{"trans_a", plan::boolAttr(true)}});
    checkClose(t[0], {4, 5, 10, 11});
  }
  SECTION("matmul with batch broadcasting and 1-D operands") {
    checkClose(runKernel("matmul", {{{2, 3}, a}, {{3, 2}, b}}, {{{2, 2}}})[0], {4, 5, 10, 11});
    // [2, 1, 2] x [2, 1] -> [2, 1, 1]
    checkClose(runKernel("matmul", {{{2, 1, 2}, {1, 2, 3, 4}}, {{2, 1}, {1, 1}}}, {{{2, 1, 1}}})[0], {3, 7});
    checkClose(runKernel("matmul", {{{3}, {1, 2, 3}}, {{3, 2}, b}}, {{{2}}})[0], {4, 5});
    checkClose(runKernel("matmul", {{{2, 3}, a}, {{3}, {1, 1, 1}}}, {{{2}}})[0], {6, 15});
  }
}

TEST_CASE("cast kernel rounds exactly and converts every pair", "[kernels]") {
  // 1 + 2^-11 is a tie between two halves; it goes to the even one (1.0). 1 + 2^-12 is below
  // the tie. 70000 overflows f16.
  std::vector<double> x{1 + std::ldexp(1.0, -11), 1 + 3 * std::ldexp(1.0, -11), 70000, -2.5};
  auto h = runKernel("cast", {{{4}, x}}, {{{4}, {}, plan::F16}});
  checkClose(h[0], {1.0, 1 + std::ldexp(1.0, -9), INFINITY, -2.5}, 0);
  auto bf = runKernel("cast", {{{2}, {1 + std::ldexp(1.0, -8), 1 + 3 * std::ldexp(1.0, -8)}}}, {{{2}, {}, plan::BF16}});
  checkClose(bf[0], {1.0, 1 + std::ldexp(1.0, -6)}, 0);
  auto i = runKernel("cast", {{{3}, {2.9, -2.9, 7}}}, {{{3}, {}, plan::I64}});
  checkClose(i[0], {2, -2, 7}, 0);
  auto f = runKernel("cast", {{{2}, {3, -4}, plan::I64}}, {{{2}, {}, plan::F64}});
  checkClose(f[0], {3, -4}, 0);
  auto d = runKernel("cast", {{{1}, {0.1}, plan::F64}}, {{{1}, {}, plan::F32}});
  CHECK(d[0][0] == double(0.1f));
  auto hb = runKernel("cast", {{{1}, {1 + std::ldexp(1.0, -9)}, plan::F16}}, {{{1}, {}, plan::BF16}});
  CHECK(hb[0][0] == 1.0); // 1 + 2^-9 is below bf16's tie at 1 + 2^-8
}

TEST_CASE("f64 storage keeps full precision", "[kernels]") {
  double tiny = 1e-12;
  auto y = runKernel("add", {{{1}, {1.0}, plan::F64}, {{1}, {tiny}, plan::F64}}, {{{1}, {}, plan::F64}});
  CHECK(y[0][0] == 1.0 + tiny);
  auto f = runKernel("add", {{{1}, {1.0}}, {{1}, {tiny}}}, {{{1}}});
  CHECK(f[0][0] == 1.0);
}

TEST_CASE("runtime errors and unsupported kernels", "[kernels]") {
  castor::test::PlanBuilder b;
  auto x = b.tensor("x", {2, 3}, plan::Tensor::INPUT);
  auto l = b.tensor("labels", {2}, plan::Tensor::INPUT, plan::I64);
  auto y = b.tensor("loss", {}, plan::Tensor::OUTPUT);
  b.kernel("softmax_cross_entropy", {x, l}, {y});
  auto backend = createCpuBackend();
  REQUIRE(backend->load(b.plan).isOk());
  castor::test::uploadValues(*backend, b.plan, l, {0, 3});
  Status s = backend->run();
  CHECK_THAT(s.message(), Catch::Matchers::Contains("label 3 of sample 1 is outside [0, 3)"));

  b.plan.mutable_kernels(0)->set_op("fancy_fused_thing");
  Status u = createCpuBackend()->load(b.plan);
  CHECK_THAT(u.message(), Catch::Matchers::Contains("no kernel 'fancy_fused_thing'"));
}
