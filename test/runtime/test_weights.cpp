// Philox known answers, seeded initialization, safetensors files.
#include "plan_builder.h"

#include "core/session.h"
#include "weights/init.h"
#include "weights/philox.h"
#include "weights/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace castor;
using namespace castor::weights;
using Catch::Matchers::Contains;

namespace {
std::string tempPath(const std::string &name) {
  return "/tmp/castor_test_" + std::to_string(::getpid()) + "_" + name;
}
} // namespace

TEST_CASE("Philox4x32-10 known-answer tests (Random123)", "[weights]") {
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("seeded initialization depends only on seed, name and index", "[weights]") {
  plan::Parameter p;
  p.set_name("layer1.0.conv1.weight");
  p.set_init(plan::Parameter::KAIMING_NORMAL);
  p.set_fan_in(576);
  p.set_fan_out(576);
  auto a = initialValues(p, 20000, 7);
  REQUIRE(a.isOk());
  auto b = initialValues(p, 10, 7);
  for (size_t i = 0; i < 10; ++i)
    CHECK(a->at(i) == b->at(i));
  auto c = initialValues(p, 10, 8);
  CHECK(c->at(0) != a->at(0));
  plan::Parameter q = p;
  q.set_name("layer1.0.conv2.weight");
  CHECK(initialValues(q, 1, 7)->at(0) != a->at(0));

  // kaiming_normal: mean 0, std sqrt(2 / fan_out).
  double sum = 0, sq = 0;
  for (double v : *a) {
    sum += v;
    sq += v * v;
  }
  double mean = sum / double(a->size()), stddev = std::sqrt(sq / double(a->size()) - mean * mean);
  CHECK(std::fabs(mean) < 0.003);
  CHECK(stddev == Approx(std::sqrt(2.0 / 576)).epsilon(0.02));

  // linear_uniform: within +-1/sqrt(fan_in), mean 0, variance bound^2 / 3.
  p.set_init(plan::Parameter::LINEAR_UNIFORM);
  p.set_fan_in(100);
  auto u = initialValues(p, 20000, 7);
  double bound = 0.1, usum = 0, usq = 0;
  for (double v : *u) {
    CHECK((v >= -bound && v < bound));
    usum += v;
    usq += v * v;
  }
  CHECK(std::fabs(usum / 20000) < 0.002);
  CHECK(usq / 20000 == Approx(bound * bound / 3).epsilon(0.03));

  p.set_init(plan::Parameter::ONES);
  CHECK(initialValues(p, 3, 0)->at(2) == 1.0);
  p.set_init(plan::Parameter::ZEROS);
  CHECK(initialValues(p, 3, 0)->at(2) == 0.0);
  p.set_init(plan::Parameter::FILE);
  CHECK_FALSE(initialValues(p, 3, 0).isOk());
}

TEST_CASE("initialization and encoding on the host's cores give the bits of one core", "[weights]") {
  // Counts above the per-thread chunk (64 Ki values): a count splits into other chunks than a
  // longer one, so equal prefixes mean no value depends on where its chunk begins.
  plan::Parameter p;
  p.set_name("layer4.2.conv3.weight");
  p.set_fan_in(512);
  p.set_fan_out(2048);
  for (auto init : {plan::Parameter::KAIMING_NORMAL, plan::Parameter::LINEAR_UNIFORM}) {
    p.set_init(init);
    auto whole = initialValues(p, 1000003, 11);
    REQUIRE(whole.isOk());
    for (int64_t count : {int64_t(5), int64_t(65537), int64_t(300007)}) {
      auto part = initialValues(p, count, 11);
      REQUIRE(part.isOk());
      CHECK(std::equal(part->begin(), part->end(), whole->begin()));
    }
    for (plan::DType dtype : {plan::F16, plan::BF16, plan::F32}) {
      std::vector<uint8_t> serial(whole->size() * plan::dtypeSize(dtype));
      encodeValues(dtype, whole->data(), whole->size(), serial.data()); // on the caller's thread
      CHECK(encodeValues(dtype, *whole) == serial);
    }
  }
}

TEST_CASE("name hash is FNV-1a 64", "[weights]") {
  CHECK(parameterNameHash("") == 0xcbf29ce484222325ull);
  CHECK(parameterNameHash("a") == 0xaf63dc4c8601ec8cull);
}

TEST_CASE("safetensors round trip", "[weights]") {
  TensorFile f;
  f.metadata["format"] = "pt";
  f.metadata["note"] = "quote \" and backslash \\";
  NamedTensor a{"conv.weight", plan::F32, {2, 1, 1, 2}, encodeValues(plan::F32, {1.5, -2, 3, 4})};
  NamedTensor b{"bn.running_mean", plan::F16, {3}, encodeValues(plan::F16, {0.5, 1, -1})};
  NamedTensor c{"step", plan::I64, {}, encodeValues(plan::I64, {42})};
  NamedTensor d{"emb", plan::BF16, {2}, encodeValues(plan::BF16, {1, 2})};
  NamedTensor e{"x64", plan::F64, {1}, encodeValues(plan::F64, {0.1})};
  f.tensors = {a, b, c, d, e};
  std::string path = tempPath("w.safetensors");
  REQUIRE(writeSafetensors(f, path).message() == "");

  // The header is 8-byte aligned JSON, as the format asks.
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char *>(&len), 8);
  CHECK(len % 8 == 0);

  auto r = readSafetensors(path);
  REQUIRE(r.message() == "");
  REQUIRE(r->tensors.size() == 5);
  CHECK(r->metadata == f.metadata);
  for (size_t i = 0; i < 5; ++i) {
    CHECK(r->tensors[i].name == f.tensors[i].name);
    CHECK(r->tensors[i].dtype == f.tensors[i].dtype);
    CHECK(r->tensors[i].shape == f.tensors[i].shape);
    CHECK(r->tensors[i].data == f.tensors[i].data);
  }
  CHECK(decodeValues(plan::F64, r->find("x64")->data)[0] == 0.1);
  std::remove(path.c_str());
}

TEST_CASE("safetensors files written by other tools, and broken ones", "[weights]") {
  std::string path = tempPath("hand.safetensors");
  auto write = [&](const std::string &header, const std::vector<uint8_t> &data) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    uint64_t len = header.size();
    out.write(reinterpret_cast<const char *>(&len), 8);
    out.write(header.data(), long(header.size()));
    out.write(reinterpret_cast<const char *>(data.data()), long(data.size()));
  };
  std::vector<uint8_t> data = encodeValues(plan::F32, {1, 2, 3});
  // Keys out of data order, whitespace, escaped name.
  write(R"( {"b" : {"dtype":"F32","shape":[1],"data_offsets":[8,12]}, "a\u002ex":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
        data);
  auto r = readSafetensors(path);
  REQUIRE(r.message() == "");
  REQUIRE(r->tensors.size() == 2);
  CHECK(r->tensors[0].name == "a.x"); // returned in data order
  CHECK(decodeValues(plan::F32, r->find("b")->data)[0] == 3);

  write(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data);
  CHECK_THAT(readSafetensors(path).message(), Contains("beyond"));
  write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", data);
  CHECK_THAT(readSafetensors(path).message(), Contains("need"));
  write(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", data);
  CHECK_THAT(readSafetensors(path).message(), Contains("unsupported dtype U8"));
  write(R"({"a":)", data);
  CHECK_THAT(readSafetensors(path).message(), Contains("not a valid safetensors file"));
  // A shape whose byte count wraps around 2^64 to the bytes at hand (2^63 f16 values: 0 bytes).
  write(R"({"a":{"dtype":"F16","shape":[4611686018427387904,2],"data_offsets":[0,0]}})", data);
  CHECK_THAT(readSafetensors(path).message(), Contains("too large"));
  // A header length that claims more than the file holds, refused before it is read.
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = uint64_t(1) << 40;
    out.write(reinterpret_cast<const char *>(&len), 8);
    out << "{}";
  }
  CHECK_THAT(readSafetensors(path).message(), Contains("exceeds the file size"));
  std::remove(path.c_str());
}

TEST_CASE("a session takes parameters from the file by name, the rest from the seed", "[weights]") {
  castor::test::PlanBuilder b;
  auto x = b.tensor("x", {1, 2}, plan::Tensor::INPUT);
  auto w = b.tensor("fc.weight", {3, 2}, plan::Tensor::PARAMETER);
  auto bias = b.tensor("fc.bias", {3}, plan::Tensor::PARAMETER, plan::F16);
  auto y = b.tensor("y", {1, 3}, plan::Tensor::OUTPUT);
  b.kernel("gemm", {x, w, bias}, {y}, {{"trans_b", plan::boolAttr(true)}});
  b.parameter("fc.weight", w, plan::Parameter::FILE);
  b.parameter("fc.bias", bias, plan::Parameter::LINEAR_UNIFORM, 2, 3);

  std::string path = tempPath("fc.safetensors");
  TensorFile f;
  f.tensors.push_back({"fc.weight", plan::F64, {3, 2}, encodeValues(plan::F64, {1, 0, 0, 1, 1, 1})});
  REQUIRE(writeSafetensors(f, path).isOk());

  SessionOptions o;
  o.weightsPath = path;
  o.seed = 3;
  auto s = Session::create(b.plan, createCpuBackend(), o);
  REQUIRE(s.message() == "");
  CHECK((*s)->parametersFromFile() == 1);
  CHECK((*s)->parametersInitialized() == 1);
  REQUIRE((*s)->setInput("x", {"", plan::F32, {1, 2}, encodeValues(plan::F32, {2, 5})}).message() == "");
  REQUIRE((*s)->run().isOk());
  auto out = (*s)->output("y");
  REQUIRE(out.isOk());
  auto expectedBias = initialValues(b.plan.parameters(1), 3, 3);
  auto got = decodeValues(plan::F32, out->data);
  for (int i = 0; i < 3; ++i) {
    double biasF16 = decodeValues(plan::F16, encodeValues(plan::F16, {expectedBias->at(size_t(i))}))[0];
    double dot = i == 0 ? 2 : i == 1 ? 5 : 7;
    CHECK(got[size_t(i)] == float(dot + biasF16));
  }

  // A parameter to be read from a file that lacks it.
  auto missing = Session::create(b.plan, createCpuBackend(), {});
  CHECK_THAT(missing.message(), Contains("fc.weight") && Contains("none was given"));
  // Shape mismatch against the file.
  f.tensors[0].shape = {2, 3};
  REQUIRE(writeSafetensors(f, path).isOk());
  auto wrongShape = Session::create(b.plan, createCpuBackend(), o);
  CHECK_THAT(wrongShape.message(), Contains("needs shape [3, 2], got [2, 3]"));
  std::remove(path.c_str());
}
