// cuDNN's runtime-compiled engines, built ahead on worker threads.
//
// Such an engine (tuner.h: Candidate::compilesAtBuild) compiles its kernels when built: a few
// tenths of a second of the host's CPU each, and a plan may try dozens on an empty tuning cache
// (three per ResNet-50 data gradient with an accumulated gradient). The backend builds a plan's
// kernels one after the other, so those compilations would run one after the other too. Before
// it builds them, the backend asks each kernel for the compilations its build would start
// (kernel_table.h: cudaCompileAhead) and runs them here, in parallel, each worker with a cuDNN
// handle of its own. A job keeps its built plan as a compiled-plan file (compiled_plans.h); the
// layer's build then reads the file back instead of compiling. A job that fails costs only its
// time: the layer's build compiles as it would have without it.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace castor::cuda::tuning {

struct CompileJob {
  // (layer key, candidate): jobs with the same key run once.
  std::string key;
  // Builds the candidate with `handle` (the worker's, on the caller's device) and stores its plan
  // file; must not throw, must not touch the caller's handles or stream.
  std::function<void(cudnnHandle_t handle)> run;
};

struct CompileAheadReport {
  size_t jobs = 0;    // distinct jobs run
  size_t threads = 0; // workers
  double seconds = 0; // wall time, from the first worker's start to the last one's end
};

// Runs the jobs on up to CASTOR_TUNING_COMPILE_THREADS workers (default: the host's hardware
// threads, at most 16; 0 runs none, so the layers compile one by one as they are built) and
// returns when all are done.
CompileAheadReport compileAhead(std::vector<CompileJob> jobs);

} // namespace castor::cuda::tuning
