// castor-run train: flags to a batch source, a session and a Trainer (runtime/train); this file
// only reports: progress on a terminal, one JSON line per step, the gradient statistics table,
// the summary line.
#include "cli_output.h"
#include "commands.h"
#include "device.h"

#include "replicas.h"

#include "castor/state_names.h"
#include "data/batch_source.h"
#include "dist/launch_env.h"
#include "dist/tcp_communicator.h"
#ifdef CASTOR_HAVE_NCCL
#include "dist/nccl_communicator.h"
#endif
#include "plan/plan_io.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/event_file.h"
#include "train/trainer.h"
#include "train/training_signature.h"
#include "weights/safetensors.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>
#include <cstdio>
#include <unistd.h>

namespace castor::run {
namespace {

// The progress line's short name of each reported scalar.
const char *progressLabel(const std::string &name) {
  return name == names::kLr                    ? "lr"
         : name == names::kLossScaleOutput    ? "scale"
         : name == names::kStepsSinceOverflow ? "clean"
                                              : "skipped";
}

// Flushes a --log-json line just written; the first failure (a full disk, /dev/full) is kept in
// `error` to end the run with, as a failed TensorBoard write does: a run whose log is lost did
// not do its job.
void noteLogWrite(std::FILE *log, const std::string &path, std::string &error) {
  if (std::fflush(log) != 0 || std::ferror(log))
    if (error.empty())
      error = fmt::format("writing the log {} failed ({})", path, std::strerror(errno));
}

// Prints each step as it ends, and keeps what the summary line needs.
class StepReport final : public train::StepObserver {
public:
  StepReport(std::FILE *log, std::string logPath, train::EventFile *events, bool terminal, int64_t lastStep)
      : log_(log), logPath_(std::move(logPath)), events_(events), terminal_(terminal), lastStep_(lastStep) {}

  void onStep(const train::StepMetrics &m) override {
    stepsSeen.fetch_add(1);
    lastLoss = m.loss;
    if (m.nonFiniteSkipped)
      fmt::print(stderr, "{}step {}: non-finite gradients, the update was skipped (--on-nonfinite skip)\n",
                 terminal_ ? "\n" : "", m.step);
    lastAccuracy = m.accuracy;
    totalSeconds += m.seconds;
    // Loss scaling: the scale and counters after this step, as JSON members and progress text.
    std::string extraJson, extraText;
    for (const train::ReportedValue &v : m.scalars) {
      const std::string text = v.integer ? std::to_string(int64_t(v.value)) : fmt::format("{:g}", v.value);
      extraJson += fmt::format(", \"{}\": {}", v.name, v.integer ? std::to_string(int64_t(v.value)) : jsonNumber(v.value));
      extraText += fmt::format("  {} {}", progressLabel(v.name), text);
    }
    if (m.hostDecodeShare >= 0) {
      extraJson += fmt::format(", \"host_decode_share\": {}, \"launch_wait_ms\": {}", jsonNumber(m.hostDecodeShare),
                               jsonNumber(1e3 * m.launchWaitSeconds));
      extraText += fmt::format("  host share {:.2f}", m.hostDecodeShare);
    }
    // Gradient statistics every --grad-stats steps: a table on stderr and a JSON object.
    if (!m.gradStats.empty()) {
      std::string rows, members;
      for (const train::GradientStats &g : m.gradStats) {
        rows += fmt::format("  {:<40} {:>12.4e} {:>12.4e} {:>10}\n", g.param, g.meanAbs, g.maxAbs, g.nonFinite);
        members += fmt::format("{}{}: [{}, {}, {}]", members.empty() ? "" : ", ", jsonString(g.param),
                               jsonNumber(g.meanAbs), jsonNumber(g.maxAbs), g.nonFinite);
      }
      fmt::print(stderr, "{}gradient statistics after step {}:\n  {:<40} {:>12} {:>12} {:>10}\n{}",
                 terminal_ ? "\n" : "", m.step, "param", "mean |g|", "max |g|", "non-finite", rows);
      extraJson += ", \"grad_stats\": {" + members + "}";
    }
    if (events_) {
      // TensorBoard: the same values as the JSON line, grouped by prefix.
      std::vector<std::pair<std::string, double>> scalars = {
          {"train/loss", m.loss},
          {"train/img_per_s", m.imagesPerSecond},
          {"train/epoch", double(m.epoch)},
          {"train/data_wait_ms", 1e3 * m.dataWaitSeconds}};
      if (m.correct >= 0)
        scalars.push_back({"train/accuracy", m.accuracy});
      for (const train::ReportedValue &v : m.scalars)
        scalars.push_back({"train/" + v.name, v.value});
      for (const train::GradientStats &g : m.gradStats) {
        scalars.push_back({"grad_mean_abs/" + g.param, g.meanAbs});
        scalars.push_back({"grad_max_abs/" + g.param, g.maxAbs});
        scalars.push_back({"grad_non_finite/" + g.param, double(g.nonFinite)});
      }
      if (Status w = events_->addScalars(m.step, scalars); !w && eventError.empty())
        eventError = w.message();
    }
    if (log_ && logError.empty()) {
      fmt::print(log_,
                 "{{\"step\": {}, \"epoch\": {}, \"loss\": {}, \"accuracy\": {}, \"correct\": {}, \"img_per_s\": {}, "
                 "\"data_wait_ms\": {}{}}}\n",
                 m.step, m.epoch, jsonNumber(m.loss), jsonNumber(m.accuracy), m.correct, jsonNumber(m.imagesPerSecond),
                 jsonNumber(1e3 * m.dataWaitSeconds), extraJson);
      noteLogWrite(log_, logPath_, logError);
    }
    if (terminal_)
      fmt::print(stderr, "\rstep {}/{}  loss {:.4f}  accuracy {:.3f}{}  {:.1f} img/s  data {:.1f} ms   ", m.step,
                 lastStep_, m.loss, m.accuracy, extraText, m.imagesPerSecond, 1e3 * m.dataWaitSeconds);
  }

  double lastLoss = NAN, lastAccuracy = NAN, totalSeconds = 0;
  std::atomic<int64_t> stepsSeen{0}; // read by the replicas' watchdog
  std::string eventError; // the first failure to write an event, reported at the end
  std::string logError;   // the first failure to write a --log-json line, reported at the end

private:
  std::FILE *log_;
  std::string logPath_;
  train::EventFile *events_;
  bool terminal_;
  int64_t lastStep_;
};

} // namespace

int train(const TrainOptions &o) {
  if (o.replicas > 1)
    return runLocalReplicas(withoutReplicasOption(o.commandLine), o.replicas,
                            std::chrono::seconds(o.replicaTimeoutSeconds + 5));
  // Where this process stands in a data-parallel job (torchrun, srun, --replicas); alone without.
  auto env = dist::replicaEnvFromEnvironment();
  if (!env)
    return fail(env.message());
  const bool leader = env->rank == 0; // logs and saves for the job
  // The replicas meet over TCP at MASTER_ADDR:MASTER_PORT; on GPUs that link bootstraps NCCL.
  std::unique_ptr<dist::Communicator> replicas;
#ifdef CASTOR_HAVE_NCCL
  std::unique_ptr<dist::NcclCommunicator> gpuReplicas;
#endif
  BackendOptions bo;
  if (env->worldSize > 1) {
    const auto timeout = std::chrono::seconds(o.replicaTimeoutSeconds);
    auto joined = dist::TcpCommunicator::connect(*env, timeout);
    if (!joined)
      return fail(fmt::format("replica {} of {}: {}", env->rank, env->worldSize, joined.message()));
    replicas = std::move(*joined);
    if (o.device == "cuda") {
#ifdef CASTOR_HAVE_NCCL
      auto nccl = dist::NcclCommunicator::create(*env, *replicas, env->localRank, timeout);
      if (!nccl)
        return fail(fmt::format("replica {} of {}: {}", env->rank, env->worldSize, nccl.message()));
      gpuReplicas = std::move(*nccl);
      bo.deviceReplicas = gpuReplicas.get();
#else
      return fail("data-parallel training on GPUs needs NCCL, which this castor-run was built without");
#endif
    } else {
      bo.replicas = replicas.get();
    }
  }
  bo.poison = o.poison;
  bo.deterministic = o.deterministic;
  auto backend = createBackend(o.device, bo);
  if (!backend)
    return fail(backend.message());
  // --steps 0 with --save writes the starting state (initialised or resumed) and trains nothing.
  if (o.steps < 0 || (o.steps == 0 && o.save.empty()))
    return fail(fmt::format("--steps {}: a run trains at least one step (--steps 1 or more; --steps 0 only "
                            "with --save, which writes the starting state)",
                            o.steps));
  if (!o.weights.empty() && !o.resume.empty())
    return fail("--weights and --resume exclude each other (a saved state holds the weights)");
  auto read = plan::readPlanFile(o.plan);
  if (!read)
    return fail(read.message());
  plan::Plan p = std::move(*read);
  auto signature = train::readTrainingSignature(p);
  if (!signature)
    return fail(signature.message());
  // Replicas of a plan that does not reduce its gradients would each train a model of their own.
  if (env->worldSize > 1 &&
      std::none_of(p.kernels().begin(), p.kernels().end(), [](const plan::Kernel &k) { return k.op() == "all_reduce"; }))
    return fail(o.plan + " does not reduce its gradients across replicas: compile it with --data-parallel");
  if (o.gradStats < 0)
    return fail("--grad-stats must be non-negative");
  if (o.gradStats > 0 && signature->gradStats.empty())
    return fail("--grad-stats: the plan has no outputs named \"grad_stats:<param>\"");

  // The saved state, when resuming: its metadata says where training stopped.
  train::TrainingProgress resumed;
  resumed.dataSeed = o.seed;
  if (!o.resume.empty()) {
    // Its format, step and plan (this plan's state tensors) checked before anything is loaded.
    auto progress = train::readCheckpointProgress(o.resume, &p);
    if (!progress)
      return fail(progress.message());
    resumed = std::move(*progress);
  }
  data::SourceOptions sourceOptions;
  sourceOptions.seed = resumed.dataSeed;
  sourceOptions.syntheticClasses = o.classes;
  sourceOptions.reducedDecode = o.decode == "fast";
  sourceOptions.skipCorrupt = o.skipCorrupt;
  sourceOptions.augment = o.augment == "standard";
  sourceOptions.threads = o.dataThreads;
  // Image folders: JPEGs to the backend's decoder when it has one (auto) or when asked (gpu).
  const bool folder = o.data.rfind("folder:", 0) == 0;
  if (o.decoder == "gpu" && !(*backend)->decodesImages())
    return fail("--decoder gpu: the " + (*backend)->name() + " backend does not decode images");
  const bool autoDevice = o.decoder == "auto" && (*backend)->decodesImagesInHardware() &&
                          signature->imageShape.size() == 4 && signature->imageShape[1] == 3;
  sourceOptions.deviceDecode = folder && (o.decoder == "gpu" || autoDevice);
  // Where the host's threads and the device's decoder meet: balanced while training, from an
  // even split, unless given (or --deterministic, which keeps every batch's split as it was).
  constexpr double kAutoHostShare = 0.5;
  const bool balanceDecoding = o.hostDecodeShare == "auto" && !o.deterministic;
  sourceOptions.hostShare = o.hostDecodeShare == "auto" ? kAutoHostShare : std::stod(o.hostDecodeShare);
  if (!o.mean.empty())
    sourceOptions.mean = o.mean;
  if (!o.std.empty())
    sourceOptions.std = o.std;
  auto source = data::openBatchSource(o.data, {signature->imageShape, signature->classes}, sourceOptions);
  if (!source)
    return fail(source.message());
  data::BatchSource &batches = **source;
  if (!o.resume.empty()) {
    if (resumed.dataKind != batches.kind())
      return fail(fmt::format("{} was trained on {} data, not {}", o.resume, resumed.dataKind, batches.kind()));
    if (Status r = batches.restorePosition(resumed.dataPosition); !r)
      return fail(r.message());
  }

  // A run killed while saving leaves its temporary file beside the state; the state itself is
  // whole (the write renames over it), the leftover only takes space.
  if (!o.save.empty() && leader)
    if (int removed = weights::removeInterruptedWrites(o.save); removed > 0)
      fmt::print(stderr, "castor-run: removed {} temporary file(s) of interrupted saves beside {}\n", removed, o.save);

  SessionOptions so;
  if (!o.resume.empty()) {
    so.weightsPath = o.resume;
  } else {
    auto paired = plan::weightsFileFor(p, o.plan, o.weights);
    if (!paired)
      return fail(paired.message());
    so.weightsPath = *paired;
  }
  so.seed = o.seed;
  so.requireAllFromFile = !o.resume.empty();
  auto created = Session::create(std::move(p), std::move(*backend), so);
  if (!created)
    return fail(created.message());

  std::FILE *log = nullptr;
  if (!o.logJson.empty() && leader) {
    log = std::fopen(o.logJson.c_str(), o.resume.empty() ? "w" : "a");
    if (!log)
      return fail("cannot open " + o.logJson + " for writing");
  }
  std::unique_ptr<train::EventFile> events;
  if (!o.tensorboard.empty() && leader) {
    auto created = train::EventFile::create(o.tensorboard);
    if (!created)
      return fail(created.message());
    events = std::move(*created);
  }
  const bool terminal = leader && ::isatty(STDERR_FILENO);
  StepReport report(log, o.logJson, events.get(), terminal, resumed.step + o.steps);
  const int64_t batch = signature->batch;
  train::TrainerOptions to;
  to.dataSeed = resumed.dataSeed;
  to.gradStatsEvery = o.gradStats;
  to.checkpointPath = leader ? o.save : "";
  to.replicaRank = env->rank;
  to.replicaCount = env->worldSize;
  to.checkpointEvery = o.saveEvery;
  to.onNonFinite = o.onNonFinite == "skip" ? train::OnNonFinite::Skip : train::OnNonFinite::Stop;
  to.maxSkippedSteps = o.maxSkippedSteps;
  to.balanceDecodingFrom = balanceDecoding ? sourceOptions.hostShare : -1;
  // Validation: the forward plan on a backend of its own, with the training session's state.
  std::unique_ptr<train::Evaluator> evaluator;
  if (o.valPlan.empty() != o.valData.empty())
    return fail("--val-plan and --val-data go together");
  if (!o.valPlan.empty() && leader) { // validation needs no other replica
    auto valBackend = createBackend(o.device, bo);
    if (!valBackend)
      return fail(valBackend.message());
    data::SourceOptions valOptions;
    valOptions.mean = o.mean;
    valOptions.std = o.std;
    valOptions.threads = o.dataThreads;
    valOptions.augment = o.augment == "standard";
    // Its parameters are replaced by the training state's before each evaluation.
    auto made = train::Evaluator::open(o.valPlan, "", /*requireAllFromFile=*/false, std::move(*valBackend), o.valData,
                                       o.valSplit, valOptions);
    if (!made)
      return fail(made.message());
    evaluator = std::move(*made);
    to.evaluateEvery = o.evalEvery;
    to.evaluate = [&](int64_t step) -> Status {
      CASTOR_RETURN_IF_ERROR(evaluator->loadState(**created));
      auto a = evaluator->run();
      if (!a)
        return a.status();
      if (terminal)
        fmt::print(stderr, "\n");
      fmt::print(stderr, "validation after step {}: top-1 {:.4f}, top-5 {:.4f} ({} images, {:.1f} s)\n", step,
                 a->top1Rate(), a->top5Rate(), a->count, a->seconds);
      if (log && report.logError.empty()) {
        fmt::print(log, "{{\"step\": {}, \"val_top1\": {}, \"val_top5\": {}, \"val_count\": {}, \"val_seconds\": {}}}\n",
                   step, jsonNumber(a->top1Rate()), jsonNumber(a->top5Rate()), a->count, jsonNumber(a->seconds));
        noteLogWrite(log, o.logJson, report.logError);
      }
      if (events)
        CASTOR_RETURN_IF_ERROR(events->addScalars(step, {{"val/top1", a->top1Rate()}, {"val/top5", a->top5Rate()}}));
      return Status::ok();
    };
  }
  train::Trainer trainer(**created, batches, std::move(*signature), to, resumed.step);
  if (to.onNonFinite == train::OnNonFinite::Skip && !trainer.guarded())
    return fail("--on-nonfinite skip: the plan applies every update (compiled with --loss-scale none); compile it "
                "with the default non-finite guard to skip steps");
  // A state with a non-finite value would train on without a word (or be saved over a good
  // checkpoint): refused before the first step.
  if (Status loaded = trainer.checkLoadedState(!o.resume.empty() ? "the state " + o.resume
                                               : !so.weightsPath.empty() ? "the weights file " + so.weightsPath
                                                                         : std::string("the initialized parameters"));
      !loaded)
    return fail(loaded.message());
#ifdef CASTOR_HAVE_NCCL
  // NCCL waits on the GPU for a replica that may be gone: a step that does not finish in time
  // aborts the communicator (which ends those waits) and the process, naming the cause. The first
  // step also tunes the kernels: it gets ten times as long.
  std::atomic<bool> trained{false};
  std::thread watchdog;
  if (gpuReplicas)
    watchdog = std::thread([&] {
      int64_t seen = -1;
      auto deadline = std::chrono::steady_clock::now() + 10 * std::chrono::seconds(o.replicaTimeoutSeconds);
      while (!trained.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (const int64_t now = report.stepsSeen.load(); now != seen) {
          seen = now;
          deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.replicaTimeoutSeconds);
        } else if (std::chrono::steady_clock::now() > deadline) {
          fmt::print(stderr, "castor-run: replica {} of {}: no step finished within the replica timeout ({} s) "
                             "after step {}: another replica stopped or hangs; aborting\n",
                     env->rank, env->worldSize, o.replicaTimeoutSeconds, resumed.step + seen);
          gpuReplicas->abort();
          std::_Exit(1);
        }
      }
    });
#endif
  Status ran = trainer.run(o.steps, report);
#ifdef CASTOR_HAVE_NCCL
  trained.store(true);
  if (watchdog.joinable())
    watchdog.join();
#endif
  if (terminal)
    fmt::print(stderr, "\n");
  // --skip-corrupt: each file replaced because it did not decode, once, whether the run ended
  // well or not (a data set to mend).
  const std::vector<std::string> skippedFiles = batches.skippedFiles();
  for (const std::string &file : skippedFiles)
    fmt::print(stderr, "castor-run: skipped {}: it does not decode (--skip-corrupt)\n", file);
  const int rc = ran ? 0 : fail(ran.message());
  if (log && std::fclose(log) != 0 && report.logError.empty())
    report.logError = fmt::format("writing the log {} failed ({})", o.logJson, std::strerror(errno));
  if (rc != 0)
    return rc;
  if (!report.eventError.empty())
    return fail(report.eventError);
  if (!report.logError.empty())
    return fail(report.logError + "; the state after the last step was not saved" +
                (o.save.empty() ? std::string() : ": " + trainer.previousCheckpoint()));
  if (!leader)
    return 0;
  if (!o.save.empty())
    if (Status w = trainer.saveCheckpoint(o.save); !w)
      return fail("saving the state after step " + std::to_string(trainer.stepsDone()) + " failed (" + w.message() +
                  "); " + trainer.previousCheckpoint());
  if (o.steps == 0) {
    fmt::print("trained no steps (--steps 0): the state of step {} saved to {}\n", resumed.step, o.save);
    return 0;
  }
  fmt::print("trained steps {}..{} on {} data: last loss {:.6f}, last batch accuracy {:.4f}, {:.1f} img/s{}; "
             "{} state check(s) in {:.2f} ms\n",
             resumed.step + 1, resumed.step + o.steps, batches.kind(), report.lastLoss, report.lastAccuracy,
             report.totalSeconds > 0 ? double(batch * env->worldSize * o.steps) / report.totalSeconds : 0.0,
             o.skipCorrupt ? fmt::format(", {} corrupt file(s) skipped", skippedFiles.size()) : std::string(),
             trainer.stateChecks(), trainer.stateCheckSeconds() * 1e3);
  return 0;
}

} // namespace castor::run
