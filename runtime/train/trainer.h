// The training loop: feeds a session batches from a source, runs its steps and reports each
// step's metrics to an observer, writing checkpoints on the way.
//
// The next step's batch is prepared and uploaded while the device runs the current step (a
// device backend returns from run() with the step enqueued), before the current step's outputs
// are read. A checkpoint written in between saves the data position from before that lookahead,
// so that a resumed run takes the same batch next.
#pragma once

#include "castor/status.h"
#include "core/session.h"
#include "data/batch_source.h"
#include "train/checkpoint.h"
#include "train/decode_balancer.h"
#include "train/state_check.h"
#include "train/training_signature.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace castor::train {

// One "grad_stats:<param>" output after a step.
struct GradientStats {
  std::string param;
  double meanAbs = 0, maxAbs = 0;
  int64_t nonFinite = 0;
};

struct ReportedValue {
  std::string name; // as in ReportedScalar
  double value = 0;
  bool integer = false;
};

struct StepMetrics {
  int64_t step = 0;  // global and 1-based: the steps done after this one
  int64_t epoch = 0; // of this step's batch (the data source's count of passes over its data)
  double loss = 0;
  int64_t correct = -1; // -1: the plan has no "correct" output
  double accuracy = 0;  // correct / batch; NaN without "correct"
  std::vector<ReportedValue> scalars;   // the plan's ReportedScalars, in their order
  std::vector<GradientStats> gradStats; // on steps that are multiples of gradStatsEvery, else empty
  double seconds = 0;                   // feeding (when not done ahead), running, reading back
  double dataWaitSeconds = 0;           // the source handing out this step's batch (when made ahead,
                                        // it overlapped the step before)
  double imagesPerSecond = 0;           // batch / seconds
  bool nonFiniteSkipped = false;        // a guarded plan skipped this step's update (not a loss scaler)
  double launchWaitSeconds = 0;         // the step's launch (a device backend's run()), waiting for
                                        // the inputs' decoding to be enqueued among other things
  double hostDecodeShare = -1;          // balanced decoding: the share of the next batches (-1: none)
};

class StepObserver {
public:
  virtual ~StepObserver() = default;
  // Called after every step, before a periodic checkpoint of that step is written.
  virtual void onStep(const StepMetrics &metrics) = 0;
};

// What a step with non-finite values does to the run. A plan whose update is guarded (the loss
// scaler's or the non-finite guard's skipped_steps output) has already left the state alone; a
// dynamic loss scaler's skipped steps are its own business and never stop a run.
enum class OnNonFinite {
  Stop, // end the run with an error naming the step and the first non-finite tensor
  Skip, // count the step as skipped and go on (guarded plans only)
};

struct TrainerOptions {
  uint64_t dataSeed = 0;      // saved with checkpoints (the source was made with it)
  int64_t gradStatsEvery = 0; // read the gradient statistics every K steps (0: never)
  // A checkpoint after every global step that is a multiple of checkpointEvery, the last step
  // of a run excepted (the caller saves the end, see saveCheckpoint).
  std::string checkpointPath;
  int64_t checkpointEvery = 0;
  // Called with the global step after every step that is a multiple of evaluateEvery and after
  // the run's last step (validation: the caller evaluates the session's current state).
  int64_t evaluateEvery = 0;
  std::function<Status(int64_t step)> evaluate;
  OnNonFinite onNonFinite = OnNonFinite::Stop;
  // A run that skips this many of its steps' updates (guarded plans: the non-finite guard's or a
  // loss scaler's skipped steps) ends with an error: it is not training. -1: all of its steps.
  int64_t maxSkippedSteps = -1;
  // A source of image files shared between the host's and the device's decoders: from this host
  // share (>= 0), moved while training toward the balance of the two (decode_balancer.h).
  double balanceDecodingFrom = -1;
  // Data-parallel runs: this process is replica `replicaRank` of `replicaCount`, and takes the
  // batch of source step s * replicaCount + replicaRank at step s where the source's batches
  // follow the step, else its share of each step's batches (BatchSource::shareAmong).
  int replicaRank = 0, replicaCount = 1;
};

class Trainer {
public:
  // `session` runs `signature`'s plan; `source` is at the position of step `firstStep` (steps
  // done before, e.g. restored from a checkpoint). Both must outlive the trainer.
  Trainer(Session &session, data::BatchSource &source, TrainingSignature signature, TrainerOptions options,
          int64_t firstStep = 0);

  // Runs `steps` steps. An error stops the loop (its message names the step); the steps done
  // before it stay done.
  // Whether the plan skips a non-finite update itself (it reports skipped_steps).
  bool guarded() const;
  Status run(int64_t steps, StepObserver &observer);
  // The state after the steps done so far, with the data position of the next step. Refused,
  // writing nothing, when the state holds a non-finite value (state_check.h).
  Status saveCheckpoint(const std::string &path);
  // The state check of a state just loaded (a resumed state, a weights file, initializers):
  // an error naming `source` and the first non-finite tensor.
  Status checkLoadedState(const std::string &source);
  int64_t stepsDone() const { return step_; }
  // How many state checks ran and the host seconds they took (each waits for its result): what
  // the check costs a run, which castor-run train reports.
  int64_t stateChecks() const { return stateChecks_; }
  double stateCheckSeconds() const { return stateCheckSeconds_; }
  // "the last checkpoint, PATH, holds step N" (writes replace the file atomically: a failed one
  // leaves it as it was).
  std::string previousCheckpoint() const;

private:
  Status feed(int64_t step);
  Status readMetrics(StepMetrics &metrics, bool withGradStats);
  // The error that ends a run at step `index` + 1 with non-finite values: the step is replayed
  // on its own batch to find the first kernel whose output is not finite.
  Status nonFiniteError(int64_t index, const StepMetrics &metrics, bool updateSkipped);
  // The state check after step step_ (once per step however often asked): before a save and at
  // the end of a run. The error names the step, the first non-finite tensor and the last
  // checkpoint, which stays as it was.
  Status checkStateAfterStep();
  // findNonFiniteState, counted and timed.
  Expected<std::optional<NonFiniteState>> timedStateCheck();
  // "; the last checkpoint, PATH, holds step N" where the run saves periodically, else "".
  std::string lastCheckpointClause() const;


  Session &session_;
  data::BatchSource &source_;
  TrainingSignature signature_;
  TrainerOptions options_;
  int64_t step_; // steps done
  // Whether the batch of step step_ is already in the session, and where the source stood
  // before it was taken.
  bool fed_ = false;
  data::DataPosition positionBeforeFed_;
  data::DataPosition positionOfStep_; // before the running step's batch was taken
  int64_t skippedSoFar_ = -1; // the plan's skipped_steps after the last step (-1: unread)
  bool shared_ = false;       // the source took its share of each step's batches (shareAmong)
  int64_t lastSaved_ = -1;    // the step of the last checkpoint written to options_.checkpointPath
  int64_t stateCheckedAt_ = -1; // the step after which the state was last found finite
  int64_t skippedInRun_ = 0;    // steps of this trainer's runs whose update was skipped
  int64_t stateChecks_ = 0;
  double stateCheckSeconds_ = 0;
  int64_t fedEpoch_ = 0; // the source's epoch after the last batch it handed out
  // Kept across steps: the batch as values, then encoded into the plan's dtype.
  std::vector<double> imageValues_;
  std::vector<uint8_t> pixels_; // 8-bit images, for sources of pixels
  EncodedImageBatch encoded_;   // image files, for sources of them
  double fedDataSeconds_ = 0;   // the source's time for the batch fed last
  std::vector<int64_t> labelValues_;
  HostTensor images_, labels_;
  std::optional<DecodeBalancer> balancer_;
};

} // namespace castor::train
