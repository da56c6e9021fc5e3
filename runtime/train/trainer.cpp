#include "train/trainer.h"

#include "castor/state_names.h"
#include "data/image_encoding.h"
#include "plan/plan_validator.h"
#include "train/scalar_output.h"
#include "train/state_check.h"
#include "weights/init.h"

#include <chrono>
#include <cmath>
#include <cstring>

namespace castor::train {

Trainer::Trainer(Session &session, data::BatchSource &source, TrainingSignature signature, TrainerOptions options,
                 int64_t firstStep)
    : session_(session), source_(source), signature_(std::move(signature)), options_(std::move(options)),
      step_(firstStep) {
  // Encoded straight to the plan's dtype, into one buffer kept across steps: the session then
  // uploads the bytes as they are (no f64 copy and second conversion of every value).
  images_ = {names::kImages, data::hostImageDType(signature_.imageDType), signature_.imageShape, {}};
  labels_ = {names::kLabels, plan::I64, {signature_.batch}, {}};
  // The source makes a few batches ahead of the one in flight: changes wait for them to pass.
  constexpr int64_t kBatchesInFlight = 4;
  if (options_.balanceDecodingFrom >= 0 && source_.imageForm() == data::ImageForm::EncodedImages &&
      source_.setHostShare(options_.balanceDecodingFrom))
    balancer_.emplace(options_.balanceDecodingFrom, kBatchesInFlight);
}

Status Trainer::feed(int64_t globalStep) {
  // This replica's share of the data: its own batch of the W batches of the step (a source that
  // follows a cursor takes its share itself, shareAmong).
  const int64_t step = source_.batchesFollowStep() ? globalStep * options_.replicaCount + options_.replicaRank
                                                   : globalStep;
  // The time the source takes to hand out the batch: what the step waits for data when the
  // source could not make it ahead.
  const auto start = std::chrono::steady_clock::now();
  auto handedOut = [&] {
    fedDataSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fedEpoch_ = source_.epoch();
  };
  switch (source_.imageForm()) {
  case data::ImageForm::Values:
    CASTOR_RETURN_IF_ERROR(source_.next(step, imageValues_, labelValues_));
    handedOut();
    weights::encodeValues(images_.dtype, imageValues_, images_.data);
    CASTOR_RETURN_IF_ERROR(session_.setInput(names::kImages, images_));
    break;
  case data::ImageForm::Pixels:
    CASTOR_RETURN_IF_ERROR(source_.nextPixels(step, pixels_, labelValues_));
    handedOut();
    CASTOR_RETURN_IF_ERROR(session_.setInputPixels(names::kImages, pixels_.data(), source_.pixelTransform()));
    break;
  case data::ImageForm::EncodedImages:
    CASTOR_RETURN_IF_ERROR(source_.nextEncoded(step, encoded_, labelValues_));
    handedOut();
    CASTOR_RETURN_IF_ERROR(session_.setInputEncoded(names::kImages, std::move(encoded_), source_.pixelTransform()));
    encoded_ = {};
    break;
  case data::ImageForm::SyntheticPixels:
    CASTOR_RETURN_IF_ERROR(source_.nextLabels(step, labelValues_));
    handedOut();
    CASTOR_RETURN_IF_ERROR(
        session_.generateInputPixels(names::kImages, source_.syntheticSeed(), step, source_.pixelTransform()));
    break;
  }
  labels_.data.resize(labelValues_.size() * 8);
  std::memcpy(labels_.data.data(), labelValues_.data(), labels_.data.size());
  return session_.setInput(names::kLabels, labels_);
}

Status Trainer::readMetrics(StepMetrics &m, bool withGradStats) {
  auto loss = scalarOutput(session_, names::kLoss);
  if (!loss)
    return loss.status();
  m.loss = *loss;
  if (signature_.hasCorrect) {
    auto correct = scalarOutput(session_, names::kCorrect);
    if (!correct)
      return correct.status();
    m.correct = int64_t(*correct);
  }
  // In a data-parallel step the plan sums correct over the replicas: the job's batch.
  m.accuracy = m.correct >= 0 ? double(m.correct) / double(signature_.batch * options_.replicaCount) : NAN;
  for (const ReportedScalar &r : signature_.scalars) {
    auto v = scalarOutput(session_, r.name);
    if (!v)
      return v.status();
    m.scalars.push_back({r.name, *v, r.integer});
  }
  if (withGradStats)
    for (const std::string &name : signature_.gradStats) {
      auto t = session_.output(name);
      if (!t)
        return t.status();
      const std::vector<double> v = weights::decodeValues(t->dtype, t->data);
      m.gradStats.push_back({name.substr(std::strlen(names::kGradStatsPrefix)), v[0], v[1], int64_t(v[2])});
    }
  return Status::ok();
}

namespace {
const ReportedValue *reported(const StepMetrics &m, const std::string &name) {
  for (const ReportedValue &v : m.scalars)
    if (v.name == name)
      return &v;
  return nullptr;
}
} // namespace

bool Trainer::guarded() const { return signature_.hasScalar(names::kSkippedStepsOutput); }

Status Trainer::nonFiniteError(int64_t index, const StepMetrics &m, bool updateSkipped) {
  const std::string step = "step " + std::to_string(index + 1);
  std::string what = updateSkipped ? step + ": non-finite gradients; the update was skipped"
                                   : step + ": the loss is " + (std::isnan(m.loss) ? "NaN" : "infinite") +
                                         " and the update was applied (the plan has no non-finite guard: compile "
                                         "without --loss-scale none to keep the state of the step before)";
  if (!updateSkipped)
    return Status::error(what + "; stopped (--on-nonfinite stop)");
  // The guard left the state as the step before left it: was it already broken? (Checked before
  // the replay, which changes it.)
  std::string before;
  if (auto bad = findNonFiniteState(session_); bad && *bad)
    before = "; the state before this step already held " + (*bad)->describe();
  // The step again on its own batch, kernel by kernel, to name where the first non-finite value
  // appears (the guard left the state as it was before the step).
  std::string where;
  data::DataPosition resume;
  source_.savePosition(resume);
  Status replay = source_.restorePosition(positionOfStep_);
  if (replay)
    replay = feed(index);
  fed_ = false;
  if (replay) {
    auto found = session_.backend().replayToFirstNonFinite();
    if (!found)
      replay = found.status();
    else if (found->kernel < 0)
      where = "; a replay of the step found every value finite (the fault did not recur)";
    else {
      const plan::Plan &p = session_.plan();
      std::string tensorName;
      for (const plan::Tensor &t : p.tensors())
        if (t.id() == found->tensor)
          tensorName = t.name();
      where = "; the first non-finite value appears in '" + tensorName + "' (" + std::to_string(found->count) +
              " values), written by " + plan::describeKernel(p, found->kernel);
    }
  }
  if (!replay)
    where = "; replaying the step to find the first non-finite tensor failed: " + replay.message();
  where += before + lastCheckpointClause();
  return Status::error(what + where + "; stopped (--on-nonfinite stop)");
}

std::string Trainer::lastCheckpointClause() const {
  return options_.checkpointPath.empty() || lastSaved_ < 0 ? std::string() : "; " + previousCheckpoint();
}

Expected<std::optional<NonFiniteState>> Trainer::timedStateCheck() {
  const auto start = std::chrono::steady_clock::now();
  auto bad = findNonFiniteState(session_);
  stateCheckSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++stateChecks_;
  return bad;
}

Status Trainer::checkStateAfterStep() {
  if (stateCheckedAt_ == step_)
    return Status::ok();
  auto bad = timedStateCheck();
  if (!bad)
    return bad.status().withContext("checking the state after step " + std::to_string(step_));
  if (*bad)
    return Status::error("step " + std::to_string(step_) + ": the state after this step holds " + (*bad)->describe() +
                         (options_.checkpointPath.empty() ? std::string()
                                                          : ", so it was not saved; " + previousCheckpoint()) +
                         "; stopped (the updates diverged: a lower --lr, --clip-grad-norm or a warmup may help)");
  stateCheckedAt_ = step_;
  return Status::ok();
}

Status Trainer::checkLoadedState(const std::string &source) {
  auto bad = timedStateCheck();
  if (!bad)
    return bad.status().withContext("checking " + source);
  if (*bad)
    return Status::error(source + " holds " + (*bad)->describe() +
                         ": training from it would spread it; start from an earlier checkpoint");
  stateCheckedAt_ = step_;
  return Status::ok();
}

Status Trainer::run(int64_t steps, StepObserver &observer) {
  const int64_t lastStep = step_ + steps;
  if (options_.replicaCount > 1 && !source_.batchesFollowStep() && !shared_) {
    CASTOR_RETURN_IF_ERROR(source_.shareAmong(options_.replicaRank, options_.replicaCount));
    shared_ = true;
  }
  const bool checkGuard = guarded() && !signature_.hasScalar(names::kStepsSinceOverflow);
  const int64_t maxSkipped = options_.maxSkippedSteps >= 0 ? options_.maxSkippedSteps : steps;
  const int64_t firstStep = step_;
  if (guarded() && skippedSoFar_ < 0) {
    // The count so far, from the state (a resumed run starts from the saved one).
    skippedSoFar_ = 0;
    for (const plan::Parameter &p : session_.plan().parameters())
      if (p.name() == names::kSkippedSteps) {
        auto t = session_.tensor(p.tensor());
        if (!t)
          return t.status();
        skippedSoFar_ = int64_t(weights::decodeValues(t->dtype, t->data).at(0));
      }
  }
  for (int64_t index = step_; index < lastStep; ++index) {
    const auto start = std::chrono::steady_clock::now();
    if (fed_) {
      positionOfStep_.swap(positionBeforeFed_); // re-saved below before the next lookahead
    } else {
      positionOfStep_.clear();
      source_.savePosition(positionOfStep_);
    }
    Status st = fed_ ? Status::ok() : feed(index);
    const double dataSeconds = fedDataSeconds_; // of this step's batch
    const auto launched = std::chrono::steady_clock::now();
    if (st)
      st = session_.run().withContext("step " + std::to_string(index + 1));
    const double launchSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
    const int64_t epoch = fedEpoch_; // of this step's batch, before the next one is taken
    // A device backend returns from run() with the step enqueued: the next batch is prepared and
    // its transfer started now, overlapping the step, before this step's outputs are read.
    fed_ = false;
    if (st && index + 1 < lastStep) {
      positionBeforeFed_.clear();
      source_.savePosition(positionBeforeFed_);
      st = feed(index + 1).withContext("step " + std::to_string(index + 2));
      fed_ = bool(st);
    }
    CASTOR_RETURN_IF_ERROR(st);
    step_ = index + 1;

    StepMetrics m;
    m.step = step_;
    m.epoch = epoch;
    m.dataWaitSeconds = dataSeconds;
    m.launchWaitSeconds = launchSeconds;
    if (balancer_) {
      // The share for batches made from now on (those made ahead keep theirs).
      if (balancer_->update(1e3 * dataSeconds, 1e3 * launchSeconds))
        source_.setHostShare(balancer_->share());
      m.hostDecodeShare = balancer_->share();
    }
    const bool gradStats = options_.gradStatsEvery > 0 && m.step % options_.gradStatsEvery == 0;
    CASTOR_RETURN_IF_ERROR(readMetrics(m, gradStats));
    // Non-finite values: a guarded plan (not a dynamic loss scaler) counts the skipped update; a
    // plan without a guard shows them in its loss only.
    bool stepSkipped = false;
    if (guarded()) {
      const int64_t skipped = int64_t(reported(m, names::kSkippedStepsOutput)->value);
      stepSkipped = skipped > skippedSoFar_;
      skippedSoFar_ = skipped;
      skippedInRun_ += stepSkipped;
    }
    if (checkGuard) {
      m.nonFiniteSkipped = stepSkipped;
      if (stepSkipped && options_.onNonFinite == OnNonFinite::Stop)
        return nonFiniteError(index, m, /*updateSkipped=*/true);
    } else if (!guarded() && !std::isfinite(m.loss)) {
      return nonFiniteError(index, m, /*updateSkipped=*/false);
    }
    // A run whose updates are all skipped is not training, whatever its exit would say.
    if (stepSkipped && maxSkipped > 0 && skippedInRun_ >= maxSkipped) {
      const int64_t ran = step_ - firstStep;
      const std::string count = skippedInRun_ == ran && step_ == lastStep
                                    ? "all " + std::to_string(ran) + " steps of this run were skipped"
                                    : std::to_string(skippedInRun_) + " of the " + std::to_string(ran) +
                                          " steps run so far were skipped";
      return Status::error(
          "step " + std::to_string(step_) + ": " + count +
          " (non-finite gradients: no update was applied on those steps, the state is as they found it)" +
          lastCheckpointClause() + "; stopped (--max-skipped-steps " + std::to_string(maxSkipped) +
          (options_.maxSkippedSteps < 0 ? ", by default the run's step count" : "") + ")");
    }
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    m.imagesPerSecond = m.seconds > 0 ? double(signature_.batch * options_.replicaCount) / m.seconds : 0.0;
    observer.onStep(m);
    if (options_.evaluate &&
        ((options_.evaluateEvery > 0 && step_ % options_.evaluateEvery == 0) || step_ == lastStep))
      CASTOR_RETURN_IF_ERROR(options_.evaluate(step_).withContext("validation after step " + std::to_string(step_)));

    if (!options_.checkpointPath.empty() && options_.checkpointEvery > 0 && step_ % options_.checkpointEvery == 0 &&
        step_ < lastStep) {
      CASTOR_RETURN_IF_ERROR(checkStateAfterStep()); // a state that is not finite is not saved
      if (Status saved = saveCheckpoint(options_.checkpointPath); !saved)
        return Status::error("saving the state after step " + std::to_string(step_) + " failed (" + saved.message() +
                             "); " + previousCheckpoint());
    }
  }
  // The end of the run: the state it leaves (and the caller saves) is checked too.
  return checkStateAfterStep();
}

std::string Trainer::previousCheckpoint() const {
  if (lastSaved_ < 0)
    return "this run wrote no checkpoint to " + options_.checkpointPath + " (a file there from before is untouched)";
  return "the last checkpoint, " + options_.checkpointPath + ", holds step " + std::to_string(lastSaved_);
}

Status Trainer::saveCheckpoint(const std::string &path) {
  CASTOR_RETURN_IF_ERROR(checkStateAfterStep());
  TrainingProgress progress;
  progress.step = step_;
  progress.dataKind = source_.kind();
  progress.dataSeed = options_.dataSeed;
  if (fed_)
    progress.dataPosition = positionBeforeFed_;
  else
    source_.savePosition(progress.dataPosition);
  CASTOR_RETURN_IF_ERROR(writeCheckpoint(session_, progress, path));
  if (path == options_.checkpointPath)
    lastSaved_ = step_;
  return Status::ok();
}

} // namespace castor::train
