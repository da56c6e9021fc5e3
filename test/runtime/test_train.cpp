// castor-run train and eval on hand-built plans: bit-exact resume, atomic saves, IDX data.
#include "plan_builder.h"
#include "test_helpers.h"
#include "training_fixtures.h"

#include "data/idx.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"
#include "weights/json.h"
#include "weights/safetensors.h"

#include <zlib.h>

#include <cstring>
#include <tuple>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace castor;
using Catch::Matchers::Contains;
using K = plan::Tensor;
using castor::test::forwardPlan;
using castor::test::trainingPlan;
using castor::test::writeIdxSet;

namespace {

std::string tempDir() {
  std::string d = "/tmp/castor_train_test_" + std::to_string(::getpid());
  ::mkdir(d.c_str(), 0755);
  return d;
}

using castor::test::castorRun;
using castor::test::shell;

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> lines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

// The value of `key` in a one-line JSON object, as its text.
json::Value field(const std::string &line, const std::string &key) {
  auto v = json::parse(line);
  REQUIRE(v.isOk());
  const json::Value *f = v->get(key);
  REQUIRE(f);
  return *f;
}

} // namespace

TEST_CASE("IDX files, gzipped or not", "[train]") {
  std::string dir = tempDir() + "/idx";
  ::mkdir(dir.c_str(), 0755);
  writeIdxSet(dir, "train", 5, true);
  writeIdxSet(dir, "t10k", 3, false);
  auto gz = idx::readIdx(dir + "/train-images-idx3-ubyte.gz");
  REQUIRE(gz.isOk());
  CHECK(gz->dims == std::vector<int64_t>{5, 28, 28});
  CHECK(gz->data.size() == 5 * 784);
  auto set = idx::readLabelledImages(dir, "train");
  REQUIRE(set.isOk());
  CHECK(set->count == 5);
  CHECK(std::vector<int>(set->labels.begin(), set->labels.end()) == std::vector<int>{0, 7, 4, 1, 8});
  auto plain = idx::readLabelledImages(dir, "t10k");
  REQUIRE(plain.isOk());
  CHECK(plain->pixels == std::vector<uint8_t>(set->pixels.begin(), set->pixels.begin() + 3 * 784));

  std::ofstream(dir + "/bad", std::ios::binary) << std::string("\0\0\x08\x01\0\0\0\x05\x01\x02", 10);
  CHECK_THAT(idx::readIdx(dir + "/bad").message(), Contains("announces 5 bytes") && Contains("holds 2"));
  std::ofstream(dir + "/float", std::ios::binary) << std::string("\0\0\x0d\x01\0\0\0\x01\0\0\0\0", 12);
  CHECK_THAT(idx::readIdx(dir + "/float").message(), Contains("only 0x08"));
  CHECK_THAT(idx::readLabelledImages(dir + "/nowhere", "train").message(), Contains("no train-images-idx3-ubyte"));
  shell("rm -rf " + dir);
}

TEST_CASE("castor-run train resumes bit-exactly and saves atomically", "[train]") {
  std::string dir = tempDir();
  std::string planPath = dir + "/train.plan";
  plan::Plan p = trainingPlan();
  REQUIRE(plan::validatePlan(p).message() == "");
  REQUIRE(plan::writePlanFile(p, planPath).isOk());
  std::string data = dir + "/data";
  ::mkdir(data.c_str(), 0755);
  writeIdxSet(data, "train", 10, true); // 2 batches of 4 per epoch, the remainder dropped
  writeIdxSet(data, "t10k", 10, false);

  for (std::string source : {std::string("synthetic"), "idx:" + data}) {
    INFO(source);
    const std::string whole = dir + "/whole.st", split = dir + "/split.st";
    const std::string wlog = dir + "/whole.jsonl", slog = dir + "/split.jsonl";
    std::remove(wlog.c_str());
    std::remove(slog.c_str());
    auto common = " --data " + source + " --seed 9";
    auto [rc, out] = castorRun("train " + planPath + " --steps 7 --save " + whole + " --log-json " + wlog + common);
    INFO(out);
    REQUIRE(rc == 0);
    REQUIRE(castorRun("train " + planPath + " --steps 3 --save " + split + " --log-json " + slog + common).first == 0);
    auto [rrc, rout] = castorRun("train " + planPath + " --steps 4 --resume " + split + " --save " + split +
                                 " --log-json " + slog + " --data " + source + " --seed 1234");
    INFO(rout);
    REQUIRE(rrc == 0);
    CHECK(readBytes(whole) == readBytes(split));
    auto a = lines(wlog), b = lines(slog);
    REQUIRE(a.size() == 7);
    REQUIRE(b.size() == 7);
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(field(a[i], "step").integer == int64_t(i + 1));
      CHECK(field(b[i], "step").integer == int64_t(i + 1));
      CHECK(field(a[i], "loss").number == field(b[i], "loss").number);
      CHECK(field(a[i], "accuracy").number == field(b[i], "accuracy").number);
      CHECK(field(a[i], "img_per_s").number > 0);
    }
    auto state = weights::readSafetensors(whole);
    REQUIRE(state.isOk());
    CHECK(state->metadata["castor.step"] == "7");
    CHECK(state->find("castor.iteration"));
    CHECK(state->find("fc.weight.exp_avg_sq"));
    CHECK(state->find("bn.running_var"));
    int64_t iteration;
    std::memcpy(&iteration, state->find("castor.iteration")->data.data(), 8);
    CHECK(iteration == 7);
    if (source != "synthetic")
      CHECK(state->metadata["castor.data.epoch"] == "3"); // batches 7: epochs 0,0,1,1,2,2,3
  }

  SECTION("learning on IDX data, then eval with a padded last batch") {
    const std::string st = dir + "/learn.st";
    auto [rc, out] =
        castorRun("train " + planPath + " --steps 30 --save " + st + " --save-every 10 --data idx:" + data);
    INFO(out);
    REQUIRE(rc == 0);
    CHECK_THAT(out, Contains("trained steps 1..30"));
    std::string accuracy;
    for (int64_t batch : {1, 3, 4, 10}) {
      std::string fp = dir + "/fwd" + std::to_string(batch) + ".plan";
      REQUIRE(plan::validatePlan(forwardPlan(batch)).message() == "");
      REQUIRE(plan::writePlanFile(forwardPlan(batch), fp).isOk());
      auto [erc, eout] = castorRun("eval " + fp + " --weights " + st + " --data idx:" + data + " --json");
      INFO(eout);
      REQUIRE(erc == 0);
      CHECK(field(eout, "count").integer == 10);
      if (accuracy.empty())
        accuracy = std::to_string(field(eout, "correct").integer);
      CHECK(std::to_string(field(eout, "correct").integer) == accuracy);
    }
    auto [trc, tout] = castorRun("eval " + dir + "/fwd4.plan --weights " + st + " --data idx:" + data + " --split train");
    CHECK(trc == 0);
    CHECK_THAT(tout, Contains("train accuracy"));
  }

  SECTION("a failed save leaves the previous state intact") {
    const std::string st = dir + "/keep.st";
    REQUIRE(castorRun("train " + planPath + " --steps 2 --save " + st).first == 0);
    const std::string before = readBytes(st);
    REQUIRE(before.size() > 8192);
    // Writes beyond 8 KiB fail with EFBIG (SIGXFSZ ignored, so write() returns the error).
    auto [rc, out] = shell("trap '' XFSZ; ulimit -f 8; " + std::string(CASTOR_RUN_PATH) + " train " + planPath +
                           " --steps 2 --resume " + st + " --save " + st);
    INFO(out);
    CHECK(rc != 0);
    CHECK_THAT(out, Contains("writing " + st));
    CHECK(readBytes(st) == before);
    CHECK(shell("ls " + dir + " | grep -c tmp").second == "0\n"); // no temporary file left behind
    auto [drc, dout] = castorRun("train " + planPath + " --steps 1 --save " + dir + "/missing/dir/x.st");
    CHECK(drc != 0);
    CHECK_THAT(dout, Contains("writing"));
  }

  SECTION("refusals") {
    auto [rc, out] = castorRun("train " + planPath + " --steps 1 --resume " + dir + "/nothing.st");
    CHECK(rc != 0);
    CHECK_THAT(out, Contains("cannot open"));
    // Images of the wrong size for the data set.
    castor::test::PlanBuilder b;
    auto x = b.tensor("images", {2, 1, 8, 8}, K::INPUT);
    auto l = b.tensor("labels", {2}, K::INPUT, plan::I64);
    auto f = b.tensor("f", {2, 64}, K::ACTIVATION);
    auto loss = b.tensor("loss", {}, K::OUTPUT);
    b.kernel("flatten", {x}, {f});
    b.kernel("softmax_cross_entropy", {f, l}, {loss});
    REQUIRE(plan::writePlanFile(b.plan, dir + "/small.plan").isOk());
    auto [src, sout] = castorRun("train " + dir + "/small.plan --steps 1 --data idx:" + data);
    CHECK(src != 0);
    CHECK_THAT(sout, Contains("the plan's images input is [2, 1, 8, 8]") && Contains("28x28"));
    // Synthetic labels follow the loss's class count (64 here): runs.
    auto [orc, oout] = castorRun("train " + dir + "/small.plan --steps 2");
    INFO(oout);
    CHECK(orc == 0);
    auto [crc, cout] = castorRun("train " + planPath + " --steps 1 --device cuda");
#ifdef CASTOR_RUN_HAS_CUDA
    // castor-run has the CUDA backend: without a GPU it says so (with one, the step runs).
    INFO(cout);
    CHECK((crc == 0 || cout.find("no usable CUDA device") != std::string::npos));
#else
    CHECK(crc != 0);
    CHECK_THAT(cout, Contains("CUDA backend is not built"));
#endif
    auto [wrc, wout] = castorRun("eval " + dir + "/small.plan --weights " + dir + "/x --data synthetic");
    CHECK(wrc != 0);
    CHECK_THAT(wout, Contains("idx:DIR"));
  }
  shell("rm -rf " + dir);
}
