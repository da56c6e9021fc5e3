// runtime/train on its own: the training signature, the Trainer's observer, a checkpoint written
// mid-run (with the data position from before the lookahead) resuming bit-exactly, and the
// checkpoint's metadata.
#include "test_helpers.h"
#include "training_fixtures.h"

#include "castor/backend.h"
#include "core/session.h"
#include "data/batch_source.h"
#include "train/checkpoint.h"
#include "train/plan_index.h"
#include "train/trainer.h"
#include "train/training_signature.h"
#include "weights/safetensors.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <sys/stat.h>
#include <unistd.h>

using namespace castor;
using Catch::Matchers::Contains;

namespace {

std::string tempDir() {
  std::string d = "/tmp/castor_trainer_test_" + std::to_string(::getpid());
  ::mkdir(d.c_str(), 0755);
  return d;
}

struct Recorder final : train::StepObserver {
  std::vector<train::StepMetrics> steps;
  void onStep(const train::StepMetrics &m) override { steps.push_back(m); }
};

// A CPU session of the fixture's training plan, from a checkpoint when `state` is given.
std::unique_ptr<Session> cpuSession(const std::string &state = "") {
  SessionOptions so;
  so.seed = 2;
  so.weightsPath = state;
  so.requireAllFromFile = !state.empty();
  auto s = Session::create(castor::test::trainingPlan(4), createCpuBackend(), so);
  INFO(s.message());
  REQUIRE(s.isOk());
  return std::move(*s);
}

std::unique_ptr<data::BatchSource> idxSource(const std::string &dir) {
  data::SourceOptions options;
  options.seed = 9;
  auto source = data::openBatchSource("idx:" + dir, {{4, 1, 28, 28}, 10}, options);
  REQUIRE(source.isOk());
  return std::move(*source);
}

train::TrainingSignature signature() {
  auto sig = train::readTrainingSignature(castor::test::trainingPlan(4));
  REQUIRE(sig.isOk());
  return *sig;
}

} // namespace

TEST_CASE("the training signature of a plan", "[trainer]") {
  const train::TrainingSignature sig = signature();
  CHECK(sig.imageShape == std::vector<int64_t>{4, 1, 28, 28});
  CHECK(sig.batch == 4);
  CHECK(sig.perImage == 784);
  CHECK(sig.classes == 10);
  CHECK(sig.hasCorrect);
  CHECK(sig.scalars.empty());
  CHECK(sig.gradStats.empty());

  plan::Plan p = castor::test::trainingPlan(4);
  const train::PlanIndex index(p);
  REQUIRE(index.input("labels"));
  CHECK(index.tensor(index.input("labels")->id()) == index.input("labels"));
  CHECK(index.output("images") == nullptr);
  CHECK(index.tensor(100000) == nullptr);
  p.mutable_outputs(0)->set_name("not_loss");
  CHECK_THAT(train::readTrainingSignature(p).message(), Contains("binds inputs \"images\" and \"labels\""));
}

TEST_CASE("the trainer reports every step to its observer", "[trainer]") {
  const std::string dir = tempDir() + "/observe";
  ::mkdir(dir.c_str(), 0755);
  castor::test::writeIdxSet(dir, "train", 10, false); // 2 batches of 4 per epoch
  auto session = cpuSession();
  auto source = idxSource(dir);
  train::Trainer trainer(*session, *source, signature(), {});
  Recorder seen;
  Status ran = trainer.run(5, seen);
  INFO(ran.message());
  REQUIRE(ran.isOk());
  CHECK(trainer.stepsDone() == 5);
  REQUIRE(seen.steps.size() == 5);
  const std::vector<int64_t> epochs{0, 0, 1, 1, 2};
  for (size_t i = 0; i < seen.steps.size(); ++i) {
    const train::StepMetrics &m = seen.steps[i];
    CHECK(m.step == int64_t(i + 1));
    CHECK(m.epoch == epochs[i]); // of the step's own batch, not of the one fed ahead
    CHECK(std::isfinite(m.loss));
    CHECK((m.correct >= 0 && m.correct <= 4));
    CHECK(m.accuracy == double(m.correct) / 4.0);
    CHECK(m.seconds > 0);
    CHECK(m.gradStats.empty());
  }
  // Continuing counts on.
  REQUIRE(trainer.run(2, seen).isOk());
  CHECK(seen.steps.back().step == 7);
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("a checkpoint written mid-run resumes bit-exactly", "[trainer]") {
  const std::string dir = tempDir() + "/resume";
  ::mkdir(dir.c_str(), 0755);
  castor::test::writeIdxSet(dir, "train", 10, false);
  const std::string ckpt = dir + "/every3.st";

  // Five steps in one run, a checkpoint after step 3 (the next batch is then already fed).
  auto whole = cpuSession();
  auto wholeData = idxSource(dir);
  train::TrainerOptions options;
  options.dataSeed = 9;
  options.checkpointPath = ckpt;
  options.checkpointEvery = 3;
  train::Trainer trainer(*whole, *wholeData, signature(), options);
  Recorder wholeSteps;
  REQUIRE(trainer.run(5, wholeSteps).isOk());

  auto progress = train::readCheckpointProgress(ckpt);
  REQUIRE(progress.isOk());
  CHECK(progress->step == 3);
  CHECK(progress->dataKind == "idx");
  CHECK(progress->dataSeed == 9);
  CHECK(progress->dataPosition.at("castor.data.epoch") == "1");
  CHECK(progress->dataPosition.at("castor.data.cursor") == "4");

  // Steps 4 and 5 from the checkpoint.
  auto resumed = cpuSession(ckpt);
  auto resumedData = idxSource(dir);
  REQUIRE(resumedData->restorePosition(progress->dataPosition).isOk());
  train::Trainer again(*resumed, *resumedData, signature(), {9}, progress->step);
  Recorder resumedSteps;
  REQUIRE(again.run(2, resumedSteps).isOk());
  REQUIRE(resumedSteps.steps.size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(resumedSteps.steps[size_t(i)].step == 4 + i);
    CHECK(resumedSteps.steps[size_t(i)].loss == wholeSteps.steps[size_t(3 + i)].loss);
    CHECK(resumedSteps.steps[size_t(i)].epoch == wholeSteps.steps[size_t(3 + i)].epoch);
  }
  auto a = whole->state(), b = resumed->state();
  REQUIRE(a.isOk());
  REQUIRE(b.isOk());
  REQUIRE(a->tensors.size() == b->tensors.size());
  for (size_t i = 0; i < a->tensors.size(); ++i) {
    INFO(a->tensors[i].name);
    CHECK(a->tensors[i].data == b->tensors[i].data);
  }

  // The end's checkpoints agree too, metadata included.
  REQUIRE(trainer.saveCheckpoint(dir + "/a.st").isOk());
  REQUIRE(again.saveCheckpoint(dir + "/b.st").isOk());
  auto fa = weights::readSafetensors(dir + "/a.st"), fb = weights::readSafetensors(dir + "/b.st");
  REQUIRE(fa.isOk());
  REQUIRE(fb.isOk());
  CHECK(fa->metadata == fb->metadata);
  CHECK(fa->metadata.at("castor.step") == "5");
  CHECK(fa->metadata.at("castor.format") == "training-state 1");
  castor::test::shell("rm -rf " + dir);
}

TEST_CASE("a file without training metadata is not a checkpoint", "[trainer]") {
  const std::string path = tempDir() + "/plain.st";
  weights::TensorFile f;
  f.tensors.push_back({"w", plan::F32, {1}, std::vector<uint8_t>(4, 0)});
  REQUIRE(weights::writeSafetensors(f, path).isOk());
  CHECK_THAT(train::readCheckpointProgress(path).message(), Contains("is not a training state"));
  CHECK_THAT(train::readCheckpointProgress(path + ".missing").message(), Contains("cannot open"));
  castor::test::shell("rm -rf " + tempDir());
}

TEST_CASE("the decode balancer moves the host's share toward the side the step did not wait for", "[trainer]") {
  castor::train::DecodeBalancer b(0.5, /*lag=*/2);
  // Within the lag nothing moves, whatever the waits.
  CHECK_FALSE(b.update(0, 10));
  CHECK_FALSE(b.update(0, 10));
  // The step waited for the device's decoding: more on the host.
  CHECK(b.update(0, 10));
  CHECK(b.share() == Approx(0.6));
  // Waits below the noise floor change nothing, and the lag restarts after a change.
  CHECK_FALSE(b.update(0.1, 0.2));
  CHECK_FALSE(b.update(0, 10));
  CHECK_FALSE(b.update(0.2, 0.1));
  // The step waited for the host: less there, by half the move (the direction turned), even
  // when the launch waited longer (the late batch's decoding started late).
  CHECK(b.update(5, 8));
  CHECK(b.share() == Approx(0.55));
  // Moves halve at each turn, down to the smallest.
  for (int turn = 0; turn < 20; ++turn)
    for (int k = 0; k < 3; ++k)
      b.update(turn % 2 ? 5 : 0, turn % 2 ? 0 : 5);
  const double before = b.share();
  for (int k = 0; k < 3; ++k)
    b.update(0, 5);
  CHECK(b.share() == Approx(before + castor::train::DecodeBalancer::kSmallestMove));
  // Clamped to [0, 1].
  castor::train::DecodeBalancer high(0.95, 0);
  CHECK(high.update(0, 5));
  CHECK(high.share() == 1.0);
  CHECK_FALSE(high.update(0, 5));
  CHECK(high.share() == 1.0);
}
