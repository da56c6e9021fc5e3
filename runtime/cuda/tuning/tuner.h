// The per-layer tuner of the CUDA backend: `cudnn.benchmark`, but persistent.
//
// A layer offers candidates — ways to compute it, each with a stable name: today the cuDNN
// engines of its convolution graph and the legacy API's algorithms (cudnn/convolution_legacy_candidates.cpp;
// for a depthwise convolution also Castor's own kernel: kernels/depthwise_conv.cpp), or for a batch norm cuDNN's Ex API beside the engines of
// its batch-norm graph (batch_norm.cpp); later also fused graphs (conv + BN + ReLU) registered under
// the same layer key, so that the tuner weighs fused against unfused and keeps the faster. The
// tuner times each buildable candidate on the real buffers, keeps the fastest and records the
// choice in the tuning cache (tuning/tuning_cache.h); the next load of any plan with a layer of the same
// key on the same GPU and cuDNN builds the recorded candidate without timing.
//
// Nothing here knows about convolutions: a candidate is a name, a build function and what the
// build returns (a workspace size and an enqueue function).
#pragma once

#include "cuda/base/device_context.h"

#include <functional>
#include <string>
#include <vector>

namespace castor::cuda::tuning {

// A built candidate.
struct Executable {
  size_t workspaceBytes = 0;
  // Enqueues the layer's work on the context's stream with a workspace of at least
  // workspaceBytes. Must be capturable in a CUDA graph: no allocation, no synchronisation.
  std::function<Status(void *workspace)> run;
};

struct Candidate {
  // Stable across processes for one GPU and cuDNN version (the cache stores it), unique within
  // the layer's candidates, without tabs or newlines.
  std::string name;
  // Builds the candidate (may be slow: some cuDNN engines compile at run time); called lazily,
  // at most once per load, only for the candidates the tuner needs.
  std::function<Expected<Executable>()> build;
  // Its build compiles kernels at run time (cuDNN's RUNTIME_COMPILATION engines: seconds each).
  bool compilesAtBuild = false;
  // It counts toward CASTOR_TUNING_MAX_CANDIDATES; false for candidates whose number the caller
  // caps itself (the legacy convolution algorithms cuDNN reports running the layer), so that a
  // long list of engines before them never leaves them out.
  bool counted = true;
};

struct Choice {
  std::string name;
  Executable executable;
  double ms = 0;          // median time per run, measured now or when the cache entry was made
  bool fromCache = false; // built from a cache entry, not timed
  int timedCandidates = 0;
};

// The candidate to run for the layer `layerKey` (a plan-independent signature of the layer;
// cached under `layerKey|deterministic` when ctx.deterministic, since its candidates are then
// only the deterministic ones): the cached one if the cache names a candidate that builds and
// fits ctx.workspaceLimit, else the fastest of the candidates (in the order given, the first
// CASTOR_TUNING_MAX_CANDIDATES that build and are `counted`, default 16, 0 = all; the others
// besides), timed on ctx.stream (every one
// screened in a few runs, those near the best timed again: tuner.cpp), and
// recorded in the cache (CASTOR_TUNING_LOG=1: each candidate's screen or median, or why it was left out,
// on stderr). Candidates whose workspace exceeds ctx.workspaceLimit are skipped. Of
// the candidates that compile at build, only the first CASTOR_TUNING_MAX_COMPILED (default 0)
// are tried (`compiledAllowance` instead where the caller gives one and the variable is unset: a
// layer whose fused form exists only as compiled engines); when no other candidate builds, the
// first of them that compiles is the one kept: a layer must not cost seconds of compilation per
// engine on its first load. Fails when no candidate builds and runs.
// The chosen candidate's name is noted under the kernel being built (ctx.noteTunedChoice).
// Synchronises ctx.stream (load time only); the caller requests the chosen workspace.
Expected<Choice> choose(DeviceContext &ctx, const std::string &layerKey, const std::vector<Candidate> &candidates,
                        size_t compiledAllowance = 0);

// How many of a layer's candidates that compile at build the tuner tries (see choose):
// CASTOR_TUNING_MAX_COMPILED where set, else `compiledAllowance`.
size_t compiledCandidateLimit(size_t compiledAllowance);
// Whether the tuning cache holds a choice for the layer `signature` (choose's keys): its load
// then builds that candidate alone.
bool hasCachedChoice(const DeviceContext &ctx, const std::string &signature);

// Counts since the process started.
struct Counts {
  int timed = 0;     // layers whose candidates were timed
  int fromCache = 0; // layers built from a cache entry (the disk, or an earlier layer of the same key)
  int fallback = 0;  // layers the graph API could not run (legacy convolution API instead)
  int compiled = 0;  // candidates compiled at build by the layers' builds (not read back from disk)
  double buildSeconds = 0;  // building candidates (cached choices included)
  double timingSeconds = 0; // timing them
};
Counts counts();
void noteFallback();
void noteCompiled();

// One line for the backend to print (on stderr) after loading, e.g.
// "tuning: 12 layers timed, 41 from cache, 0 on the legacy convolution API, 3 engines compiled
// while building; 0.90 s building candidates, 3.70 s timing them (cache ~/.cache/castor/tuning-....txt)".
std::string tuningSummary();

} // namespace castor::cuda::tuning
