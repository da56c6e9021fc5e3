// cuDNN's runtime-compiled engines, compiled ahead on worker threads while the layers load.
//
// Such an engine (tuner.h: Candidate::compilesAtBuild) compiles its kernels when built: a few
// tenths of a second of the host's CPU each the first time on a machine, and a plan may try
// dozens on an empty tuning cache (three per ResNet-50 data gradient with an accumulated
// gradient). The backend builds a plan's kernels one after the other, timing each layer's
// candidates on the GPU, so those compilations would run one after the other too, between the
// timings. Before it builds the kernels, the backend asks each for the compilations its build
// would start (kernel_table.h: cudaCompileAhead) and hands them to a CompileAhead, whose workers
// (each with a cuDNN handle of its own) compile them in plan order while the loading thread
// builds and times the layers before them. A job keeps its built plan as a compiled-plan file
// (compiled_plans.h); a layer's build waits for its layer's jobs (awaitCompileAhead) and then
// reads the files back instead of compiling. A job that fails costs only its time: the layer's
// build compiles as it would have without it.
#pragma once

#include <cudnn.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace castor::cuda::tuning {

struct CompileJob {
  // (layer key, candidate): jobs with the same key run once.
  std::string key;
  // The layer's tuning key (its signature): what awaitCompileAhead waits for.
  std::string layer;
  // Builds the candidate with `handle` (the worker's, on the caller's device) and stores its plan
  // file; must not throw, must not touch the caller's handles or stream.
  std::function<void(cudnnHandle_t handle)> run;
};

struct CompileAheadReport {
  size_t jobs = 0;    // distinct jobs run
  size_t threads = 0; // workers
  double seconds = 0; // wall time, from the workers' start to the last one's end
};

// Runs the jobs in the background on up to CASTOR_TUNING_COMPILE_THREADS workers (default: the
// host's hardware threads, at most 16; 0 runs none, so the layers compile one by one as they
// are built), in the order given.
class CompileAhead {
public:
  explicit CompileAhead(std::vector<CompileJob> jobs);
  // Jobs not started are dropped (a load that failed needs none); running ones are waited for.
  ~CompileAhead();
  CompileAhead(const CompileAhead &) = delete;
  CompileAhead &operator=(const CompileAhead &) = delete;

  // Waits for every job; what ran, on how many threads, in how long.
  CompileAheadReport finish();

private:
  void work(int device);

  std::vector<CompileJob> jobs_;
  std::vector<std::thread> workers_;
  std::atomic<size_t> next_{0}, ran_{0};
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> endMicros_{0}; // since start_, of the last job to end
  bool finished_ = false;
};

// Returns once no job for the layer `layer` is waiting or running (at once when none was given
// to a CompileAhead).
void awaitCompileAhead(const std::string &layer);

} // namespace castor::cuda::tuning
