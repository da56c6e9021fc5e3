// The all_reduce kernel of the CPU backend across two replicas (two backends, each with its TCP
// communicator, as threads of this process on 127.0.0.1): a mean is the rank-order sum rounded
// into the dtype, then halved (exact); a sum and a max as the communicator computes them; every
// replica gets the same bits; with no communicator nothing changes.
#include "plan_builder.h"

#include "castor/backend.h"
#include "castor/float_convert.h"
#include "dist/socket_io.h"
#include "dist/tcp_communicator.h"
#include "plan/plan_validator.h"

#include <chrono>
#include <cstring>
#include <thread>

using namespace castor;
using namespace std::chrono_literals;
using castor::test::PlanBuilder;

namespace {

// x (input) -> identity -> t, all_reduce(t) in place, identity -> y (output).
plan::Plan reducePlan(plan::DType dtype, const char *reduction) {
  PlanBuilder b;
  auto x = b.tensor("x", {5}, plan::Tensor::INPUT, dtype);
  auto t = b.tensor("t", {5}, plan::Tensor::ACTIVATION, dtype);
  auto y = b.tensor("y", {5}, plan::Tensor::OUTPUT, dtype);
  b.kernel("identity", {x}, {t});
  plan::Attr a;
  a.set_s(reduction);
  b.kernel("all_reduce", {t}, {t}, {{"reduction", a}});
  b.kernel("identity", {t}, {y});
  return b.plan;
}

// Runs the plan on `replicas` backends, replica r with input bytes inputs[r]; the output bytes
// of each (empty on failure, with the error in `errors`).
std::vector<std::vector<uint8_t>> runReplicas(const plan::Plan &p, const std::vector<std::vector<uint8_t>> &inputs,
                                              std::vector<std::string> &errors) {
  const int world = int(inputs.size());
  auto listener = dist::listenOn(0);
  REQUIRE(listener);
  const int port = dist::listeningPort(*listener);
  listener->close();
  std::vector<std::vector<uint8_t>> outputs(inputs.size());
  errors.assign(inputs.size(), "");
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&, rank] {
      auto comm = dist::TcpCommunicator::connect({rank, world, rank, "127.0.0.1", port}, 5s);
      if (!comm) {
        errors[size_t(rank)] = comm.message();
        return;
      }
      BackendOptions options;
      options.replicas = comm->get();
      auto backend = createCpuBackend(options);
      Status s = backend->load(p);
      if (s)
        s = backend->upload(0, inputs[size_t(rank)].data(), inputs[size_t(rank)].size());
      if (s)
        s = backend->run();
      std::vector<uint8_t> out(inputs[size_t(rank)].size());
      if (s)
        s = backend->download(2, out.data(), out.size());
      if (!s) {
        errors[size_t(rank)] = s.message();
        return;
      }
      outputs[size_t(rank)] = std::move(out);
    });
  for (auto &t : threads)
    t.join();
  return outputs;
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

} // namespace

TEST_CASE("all_reduce mean of f32 across two replicas: the rank-order sum, halved, on both", "[dist][all_reduce]") {
  const std::vector<float> a{1.0f, 0.1f, -3.5f, 1e-8f, 16777216.0f}, b{2.0f, 0.2f, 3.5f, 3e-8f, 1.0f};
  plan::Plan p = reducePlan(plan::F32, "mean");
  REQUIRE(plan::validatePlan(p).message() == "");
  std::vector<std::string> errors;
  auto out = runReplicas(p, {bytesOf(a), bytesOf(b)}, errors);
  for (const std::string &e : errors)
    REQUIRE(e == "");
  REQUIRE(out[0] == out[1]); // the same bits on every replica
  std::vector<float> got(a.size());
  std::memcpy(got.data(), out[0].data(), out[0].size());
  for (size_t i = 0; i < a.size(); ++i) {
    const float expected = (a[i] + b[i]) / 2.0f; // f32 sum, then an exact halving
    CHECK(got[i] == expected);
  }
  // 2^24 + 1 rounds to 2^24 in f32: the sum is taken in the tensor's dtype, as the gradients are.
  CHECK(got[4] == 8388608.0f);
}

TEST_CASE("all_reduce sum and max of f16 and i64 across two replicas", "[dist][all_reduce]") {
  std::vector<std::string> errors;
  SECTION("f16 sum in f32, rounded once") {
    const std::vector<uint16_t> a{floatToHalf(1.0f), floatToHalf(0.1f), floatToHalf(2048.0f), floatToHalf(-1.0f),
                                  floatToHalf(0.0f)};
    const std::vector<uint16_t> b{floatToHalf(2.0f), floatToHalf(0.2f), floatToHalf(1.0f), floatToHalf(1.0f),
                                  floatToHalf(-0.0f)};
    auto out = runReplicas(reducePlan(plan::F16, "sum"), {bytesOf(a), bytesOf(b)}, errors);
    for (const std::string &e : errors)
      REQUIRE(e == "");
    REQUIRE(out[0] == out[1]);
    std::vector<uint16_t> got(a.size());
    std::memcpy(got.data(), out[0].data(), out[0].size());
    for (size_t i = 0; i < a.size(); ++i)
      CHECK(got[i] == floatToHalf(halfToFloat(a[i]) + halfToFloat(b[i])));
  }
  SECTION("i64 max") {
    const std::vector<int64_t> a{1, -5, 7, 0, 1LL << 40}, b{2, -6, 7, -1, 3};
    auto out = runReplicas(reducePlan(plan::I64, "max"), {bytesOf(a), bytesOf(b)}, errors);
    for (const std::string &e : errors)
      REQUIRE(e == "");
    REQUIRE(out[0] == out[1]);
    std::vector<int64_t> got(a.size());
    std::memcpy(got.data(), out[0].data(), out[0].size());
    CHECK(got == std::vector<int64_t>{2, -5, 7, 0, 1LL << 40});
  }
}

TEST_CASE("all_reduce with one replica changes nothing", "[dist][all_reduce]") {
  auto backend = test::loadOnCpu(reducePlan(plan::F32, "mean"));
  const std::vector<float> a{1.5f, -2.0f, 3.0f, 0.25f, 7.0f};
  REQUIRE(backend->upload(0, a.data(), a.size() * 4).message() == "");
  test::runOk(*backend);
  std::vector<float> got(a.size());
  REQUIRE(backend->download(2, got.data(), got.size() * 4).message() == "");
  CHECK(got == a);
}

TEST_CASE("the validator refuses an all_reduce without its reduction, or a mean of integers", "[dist][all_reduce]") {
  plan::Plan p = reducePlan(plan::F32, "mean");
  p.mutable_kernels(1)->mutable_attrs()->clear();
  CHECK_THAT(plan::validatePlan(p).message(), Catch::Matchers::Contains("reduction"));
  p = reducePlan(plan::I64, "mean");
  CHECK_THAT(plan::validatePlan(p).message(), Catch::Matchers::Contains("a mean's tensor"));
  p = reducePlan(plan::F32, "median");
  CHECK_THAT(plan::validatePlan(p).message(), Catch::Matchers::Contains("median"));
}
