// castor-run end to end: inspect and infer on a plan written here, and its refusals; bench's
// report of how the backend runs a fused training plan.
#include "plan_builder.h"
#include "test_helpers.h"
#include "training_fixtures.h"

#include "data/npy.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"
#include "weights/init.h"
#include "weights/safetensors.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace castor;
using Catch::Matchers::Contains;

namespace {

std::string tempPath(const std::string &name) {
  return "/tmp/castor_test_" + std::to_string(::getpid()) + "_" + name;
}

using castor::test::castorRun;

// A small classifier: conv -> batch_norm_inference -> relu -> global_avg_pool -> flatten -> gemm.
castor::test::PlanBuilder classifier() {
  castor::test::PlanBuilder b;
  auto x = b.tensor("images", {2, 1, 4, 4}, plan::Tensor::INPUT);
  auto w = b.tensor("conv.weight", {3, 1, 3, 3}, plan::Tensor::PARAMETER);
  auto g = b.tensor("bn.weight", {3}, plan::Tensor::PARAMETER);
  auto be = b.tensor("bn.bias", {3}, plan::Tensor::PARAMETER);
  auto rm = b.tensor("bn.running_mean", {3}, plan::Tensor::STATE);
  auto rv = b.tensor("bn.running_var", {3}, plan::Tensor::STATE);
  auto fw = b.tensor("fc.weight", {5, 3}, plan::Tensor::PARAMETER);
  auto fb = b.tensor("fc.bias", {5}, plan::Tensor::PARAMETER);
  auto c = b.tensor("conv_out", {2, 3, 4, 4}, plan::Tensor::ACTIVATION);
  auto n = b.tensor("bn_out", {2, 3, 4, 4}, plan::Tensor::ACTIVATION);
  auto r = b.tensor("relu_out", {2, 3, 4, 4}, plan::Tensor::ACTIVATION);
  auto p = b.tensor("pool_out", {2, 3, 1, 1}, plan::Tensor::ACTIVATION);
  auto f = b.tensor("flat", {2, 3}, plan::Tensor::ACTIVATION);
  auto y = b.tensor("logits", {2, 5}, plan::Tensor::OUTPUT);
  b.kernel("conv2d", {x, w}, {c}, {{"pads", plan::intsAttr({1, 1, 1, 1})}}).set_name("conv");
  b.kernel("batch_norm_inference", {c, g, be, rm, rv}, {n}, {{"epsilon", plan::floatAttr(1e-5)}});
  b.kernel("relu", {n}, {r});
  b.kernel("global_avg_pool", {r}, {p});
  b.kernel("flatten", {p}, {f}, {{"axis", plan::intAttr(1)}});
  b.kernel("gemm", {f, fw, fb}, {y}, {{"trans_b", plan::boolAttr(true)}}).set_name("fc");
  b.parameter("conv.weight", w, plan::Parameter::KAIMING_NORMAL, 9, 27);
  b.parameter("bn.weight", g, plan::Parameter::ONES);
  b.parameter("bn.bias", be, plan::Parameter::ZEROS);
  b.parameter("bn.running_mean", rm, plan::Parameter::ZEROS).set_trainable(false);
  b.parameter("bn.running_var", rv, plan::Parameter::ONES).set_trainable(false);
  b.parameter("fc.weight", fw, plan::Parameter::LINEAR_UNIFORM, 3, 5);
  b.parameter("fc.bias", fb, plan::Parameter::LINEAR_UNIFORM, 3, 5);
  return b;
}

// The line of `text` that holds bench's JSON (the others: notes on stderr), or "".
std::string benchJsonLine(const std::string &text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("{\"plan\": ", 0) == 0)
      return line;
  return "";
}

// Whether the braces and brackets of `json` outside its strings nest and close.
bool bracketsBalance(const std::string &json) {
  std::string open;
  bool inString = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      open.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (open.empty() || open.back() != c)
        return false;
      open.pop_back();
    }
  }
  return open.empty() && !inString;
}

// The raw value of the JSON member `"key": ` in `json`, up to the next ',' or '}'.
std::string member(const std::string &json, const std::string &key) {
  const std::string tag = "\"" + key + "\": ";
  const size_t at = json.find(tag);
  if (at == std::string::npos)
    return "";
  const size_t from = at + tag.size();
  return json.substr(from, json.find_first_of(",}", from) - from);
}

} // namespace

TEST_CASE("castor-run inspect and infer", "[castor-run]") {
  auto b = classifier();
  std::string planPath = tempPath("cls.plan"), in = tempPath("in.npy"), out = tempPath("out.npy"),
              out2 = tempPath("out2.npy"), out3 = tempPath("out3.npy"), w = tempPath("cls.safetensors");
  REQUIRE(plan::writePlanFile(b.plan, planPath).isOk());
  std::vector<double> x(32);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(double(i));
  REQUIRE(npy::writeNpy({"", plan::F32, {2, 1, 4, 4}, weights::encodeValues(plan::F32, x)}, in).isOk());

  auto [rc, text] = castorRun("inspect " + planPath);
  INFO(text);
  CHECK(rc == 0);
  CHECK_THAT(text, Contains("validation: ok") && Contains("batch_norm_inference") && Contains("kaiming_normal") &&
                       Contains("pads=[1, 1, 1, 1]") && Contains("conv.weight(%1)"));
  auto [jrc, json] = castorRun("inspect --json " + planPath);
  CHECK(jrc == 0);
  CHECK_THAT(json, Contains("\"valid\": true") && Contains("\"arena_bytes\"") && Contains("\"conv2d\": 1"));

  auto [irc, itext] = castorRun("infer " + planPath + " --input " + in + " --output " + out + " --init-seed 5");
  INFO(itext);
  REQUIRE(irc == 0);
  auto y = npy::readNpy(out);
  REQUIRE(y.isOk());
  CHECK(y->shape == std::vector<int64_t>{2, 5});
  CHECK(y->dtype == plan::F32);

  // Same seed, same logits; another seed, other logits.
  REQUIRE(castorRun("infer " + planPath + " -i images=" + in + " -o logits=" + out2 + " --init-seed 5").first == 0);
  CHECK(npy::readNpy(out2)->data == y->data);
  REQUIRE(castorRun("infer " + planPath + " -i " + in + " -o " + out3 + " --init-seed 6").first == 0);
  CHECK(npy::readNpy(out3)->data != y->data);

  // Weights from a file override the initializers: zero fc weights leave only the fc bias.
  weights::TensorFile f;
  f.tensors.push_back({"fc.weight", plan::F32, {5, 3}, weights::encodeValues(plan::F32, std::vector<double>(15, 0.0))});
  f.tensors.push_back({"fc.bias", plan::F32, {5}, weights::encodeValues(plan::F32, {1, 2, 3, 4, 5})});
  REQUIRE(weights::writeSafetensors(f, w).isOk());
  REQUIRE(castorRun("infer " + planPath + " -i " + in + " -o " + out3 + " --weights " + w).first == 0);
  CHECK(weights::decodeValues(plan::F32, npy::readNpy(out3)->data) ==
        std::vector<double>{1, 2, 3, 4, 5, 1, 2, 3, 4, 5});

  // Refusals.
  auto [crc, ctext] = castorRun("infer " + planPath + " -i " + in + " -o " + out + " --device cuda");
#ifdef CASTOR_RUN_HAS_CUDA
  // castor-run has the CUDA backend: without a GPU it says so (with one, the plan runs).
  INFO(ctext);
  CHECK((crc == 0 || ctext.find("no usable CUDA device") != std::string::npos));
#else
  CHECK(crc != 0);
  CHECK_THAT(ctext, Contains("the CUDA backend is not built"));
#endif
  REQUIRE(npy::writeNpy({"", plan::F32, {2, 16}, weights::encodeValues(plan::F32, x)}, in).isOk());
  auto [src, stext] = castorRun("infer " + planPath + " -i " + in + " -o " + out);
  CHECK(src != 0);
  CHECK_THAT(stext, Contains("needs shape [2, 1, 4, 4], got [2, 16]"));

  {
    std::fstream file(planPath, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    char c = 0;
    file.seekg(100);
    file.read(&c, 1);
    c ^= 0x40;
    file.seekp(100);
    file.write(&c, 1);
  }
  auto [brc, btext] = castorRun("infer " + planPath + " -i " + in + " -o " + out);
  CHECK(brc != 0);
  CHECK_THAT(btext, Contains("corrupt"));
  auto [bic, bitext] = castorRun("inspect " + planPath);
  CHECK(bic != 0);
  CHECK_THAT(bitext, Contains("corrupt"));

  // A plan that reads fine but fails validation is refused before running.
  auto bad = classifier();
  bad.plan.mutable_tensors(9)->set_offset(bad.plan.tensors(8).offset()); // bn_out onto conv_out
  REQUIRE(plan::writePlanFile(bad.plan, planPath).isOk());
  auto [vrc, vtext] = castorRun("infer " + planPath + " -i " + in + " -o " + out);
  CHECK(vrc != 0);
  CHECK_THAT(vtext, Contains("invalid plan") && Contains("overlap"));
  auto [virc, vitext] = castorRun("inspect " + planPath);
  CHECK(virc != 0);
  CHECK_THAT(vitext, Contains("validation: tensor"));

  for (const auto &p : {planPath, in, out, out2, out3, w})
    std::remove(p.c_str());
}

TEST_CASE("castor-run bench reports how the backend runs fused kernels", "[castor-run]") {
  const std::string fusedPath = tempPath("bench_fused.plan"), plainPath = tempPath("bench_plain.plan");
  const plan::Plan fused = castor::test::trainingPlan(4, true), plain = castor::test::trainingPlan(4, false);
  REQUIRE(plan::validatePlan(fused).isOk());
  std::vector<int> fusedAt;
  for (int i = 0; i < fused.kernels_size(); ++i)
    if (fused.kernels(i).op().rfind("batch_norm_relu_training", 0) == 0)
      fusedAt.push_back(i);
  REQUIRE(fusedAt.size() == 2);
  REQUIRE(plan::writePlanFile(fused, fusedPath).isOk());
  REQUIRE(plan::writePlanFile(plain, plainPath).isOk());

  auto [rc, text] = castorRun("bench " + fusedPath + " --device cpu --steps 2 --warmup 1 --json");
  INFO(text);
  REQUIRE(rc == 0);
  const std::string json = benchJsonLine(text);
  REQUIRE(!json.empty());
  CHECK(bracketsBalance(json));
  // Every fused kernel, forward and backward, in plan order with the cpu backend's way.
  CHECK_THAT(json, Contains("\"fusion\": {\"fused_kernels\": 2, \"ways\": {\"reference\": 2}, \"layers\": [{\"kernel\": " +
                            std::to_string(fusedAt[0]) +
                            ", \"name\": \"bn + relu\", \"op\": \"batch_norm_relu_training\", \"way\": \"reference\"}, "
                            "{\"kernel\": " +
                            std::to_string(fusedAt[1]) +
                            ", \"name\": \"bn + relu\", \"op\": \"batch_norm_relu_training_backward\", \"way\": "
                            "\"reference\"}]}"));
  // The cpu backend has no tuner.
  CHECK_THAT(json, Contains("\"tuning\": []"));

  auto [prc, ptext] = castorRun("bench " + plainPath + " --device cpu --steps 2 --warmup 1 --json");
  INFO(ptext);
  REQUIRE(prc == 0);
  const std::string plainJson = benchJsonLine(ptext);
  REQUIRE(!plainJson.empty());
  CHECK(bracketsBalance(plainJson));
  CHECK_THAT(plainJson, Contains("\"fusion\": {\"fused_kernels\": 0, \"ways\": {}, \"layers\": []}"));
  // A fused kernel computes its group's definition: the same losses, to the digit.
  CHECK(!member(json, "loss_last").empty());
  CHECK(member(json, "loss_first") == member(plainJson, "loss_first"));
  CHECK(member(json, "loss_last") == member(plainJson, "loss_last"));

  auto [trc, summary] = castorRun("bench " + fusedPath + " --device cpu --steps 1 --warmup 0");
  REQUIRE(trc == 0);
  CHECK_THAT(summary, Contains("fused kernels 2 by way: reference 2"));
  CHECK_THAT(summary, Contains("tuned kernels: none"));
  auto [ptrc, plainSummary] = castorRun("bench " + plainPath + " --device cpu --steps 1 --warmup 0");
  REQUIRE(ptrc == 0);
  CHECK_THAT(plainSummary, Contains("fused kernels: none"));

  for (const auto &p : {fusedPath, plainPath})
    std::remove(p.c_str());
}
