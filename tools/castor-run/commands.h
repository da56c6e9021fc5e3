// castor-run's commands: each takes its parsed flags, prints its results and returns the exit
// code (0 success, 1 failure with "castor-run: error: ..." on stderr). The work itself is done by
// the runtime's libraries (castor_runtime, castor_data, castor_train).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace castor::run {

struct InferOptions {
  std::string plan;
  std::vector<std::string> inputs, outputs;
  std::string weights;
  uint64_t seed = 0;
  std::string device = "cpu";
  bool poison = false;
};

struct TrainOptions {
  std::string plan;
  int64_t steps = 0;
  std::string data = "synthetic"; // synthetic | idx:DIR | npy:DIR
  std::string device = "cpu";
  uint64_t seed = 0;
  std::string weights, logJson, save, resume;
  std::string tensorboard; // directory for TensorBoard event files
  int64_t saveEvery = 0;
  int64_t classes = 0; // 0: from the plan's loss kernel
  // Of pixels scaled to [0, 1], one value or one per channel; empty: the source's default.
  std::vector<double> mean, std;
  std::string decode = "exact"; // image folders: exact | fast
  std::string decoder = "auto";  // image folders: auto | host | gpu
  // The device decoder: the share of each batch decoded on the host, "auto" (balanced while
  // training, from kAutoHostShare; fixed there with --deterministic) or a number in [0, 1].
  std::string hostDecodeShare = "auto";
  std::string augment = "standard"; // image folders: standard | none
  // Validation: a forward plan of the model, its data, every K steps (and after the last).
  std::string valPlan, valData, valSplit = "test";
  int64_t evalEvery = 0;
  bool skipCorrupt = false;
  int dataThreads = 0;
  bool poison = false;
  bool deterministic = false; // BackendOptions::deterministic
  int64_t gradStats = 0; // every K steps: the plan's grad_stats:<param> outputs (0: never)
  std::string onNonFinite = "stop"; // stop | skip
  int64_t maxSkippedSteps = -1;     // the run fails once this many of its steps were skipped (-1: all)
  // Data parallelism: start this many replicas here (replicas.h), and how long a replica waits on
  // another before it gives up naming it.
  int replicas = 0;
  int replicaTimeoutSeconds = 60;
  std::vector<std::string> commandLine; // this process's argv, for --replicas
};

struct EvalOptions {
  std::string plan, weights, data, split = "test", device = "cpu";
  std::vector<double> mean, std; // empty: the set's default (Fashion-MNIST's for idx, ImageNet's for folder)
  std::string augment = "standard"; // image folders: standard (Resize + CenterCrop) | none (resize whole)
  bool json = false;
};

struct BenchOptions {
  std::string plan, device = "cuda";
  int64_t steps = 20, warmup = 5;
  uint64_t seed = 0;
  bool json = false;
  bool deterministic = false; // BackendOptions::deterministic
};

int inspect(const std::string &plan, bool json);
int infer(const InferOptions &options);
int train(const TrainOptions &options);
int eval(const EvalOptions &options);
int bench(const BenchOptions &options);

} // namespace castor::run
