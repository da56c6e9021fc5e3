#include "train/trainer.h"

#include "data/image_encoding.h"
#include "train/scalar_output.h"
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
  images_ = {"images", data::hostImageDType(signature_.imageDType), signature_.imageShape, {}};
  labels_ = {"labels", plan::I64, {signature_.batch}, {}};
}

Status Trainer::feed(int64_t step) {
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
    data::encodeValuesParallel(images_.dtype, imageValues_, images_.data);
    CASTOR_RETURN_IF_ERROR(session_.setInput("images", images_));
    break;
  case data::ImageForm::Pixels:
    CASTOR_RETURN_IF_ERROR(source_.nextPixels(step, pixels_, labelValues_));
    handedOut();
    CASTOR_RETURN_IF_ERROR(session_.setInputPixels("images", pixels_.data(), source_.pixelTransform()));
    break;
  case data::ImageForm::SyntheticPixels:
    CASTOR_RETURN_IF_ERROR(source_.nextLabels(step, labelValues_));
    handedOut();
    CASTOR_RETURN_IF_ERROR(
        session_.generateInputPixels("images", source_.syntheticSeed(), step, source_.pixelTransform()));
    break;
  }
  labels_.data.resize(labelValues_.size() * 8);
  std::memcpy(labels_.data.data(), labelValues_.data(), labels_.data.size());
  return session_.setInput("labels", labels_);
}

Status Trainer::readMetrics(StepMetrics &m, bool withGradStats) {
  auto loss = scalarOutput(session_, "loss");
  if (!loss)
    return loss.status();
  m.loss = *loss;
  if (signature_.hasCorrect) {
    auto correct = scalarOutput(session_, "correct");
    if (!correct)
      return correct.status();
    m.correct = int64_t(*correct);
  }
  m.accuracy = m.correct >= 0 ? double(m.correct) / double(signature_.batch) : NAN;
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
      m.gradStats.push_back({name.substr(std::strlen("grad_stats:")), v[0], v[1], int64_t(v[2])});
    }
  return Status::ok();
}

Status Trainer::run(int64_t steps, StepObserver &observer) {
  const int64_t lastStep = step_ + steps;
  for (int64_t index = step_; index < lastStep; ++index) {
    const auto start = std::chrono::steady_clock::now();
    Status st = fed_ ? Status::ok() : feed(index);
    const double dataSeconds = fedDataSeconds_; // of this step's batch
    if (st)
      st = session_.run().withContext("step " + std::to_string(index + 1));
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
    const bool gradStats = options_.gradStatsEvery > 0 && m.step % options_.gradStatsEvery == 0;
    CASTOR_RETURN_IF_ERROR(readMetrics(m, gradStats));
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    m.imagesPerSecond = m.seconds > 0 ? double(signature_.batch) / m.seconds : 0.0;
    observer.onStep(m);
    if (options_.evaluate &&
        ((options_.evaluateEvery > 0 && step_ % options_.evaluateEvery == 0) || step_ == lastStep))
      CASTOR_RETURN_IF_ERROR(options_.evaluate(step_).withContext("validation after step " + std::to_string(step_)));

    if (!options_.checkpointPath.empty() && options_.checkpointEvery > 0 && step_ % options_.checkpointEvery == 0 &&
        step_ < lastStep)
      CASTOR_RETURN_IF_ERROR(saveCheckpoint(options_.checkpointPath));
  }
  return Status::ok();
}

Status Trainer::saveCheckpoint(const std::string &path) {
  TrainingProgress progress;
  progress.step = step_;
  progress.dataKind = source_.kind();
  progress.dataSeed = options_.dataSeed;
  if (fed_)
    progress.dataPosition = positionBeforeFed_;
  else
    source_.savePosition(progress.dataPosition);
  return writeCheckpoint(session_, progress, path);
}

} // namespace castor::train
