// The per-layer tuner (see tuning/tuner.h): cached choice, else time every buildable candidate.
#include "cuda/tuning/tuner.h"

#include "cuda/tuning/tuning_cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

namespace castor::cuda::tuning {
namespace {

std::atomic<int> timedLayers{0}, cachedLayers{0}, fallbackLayers{0}, compiledCandidates{0};
std::atomic<int64_t> buildMicros{0}, timingMicros{0};

// Adds the time since it was made to `total` when it goes out of scope.
struct ScopedMicros {
  std::atomic<int64_t> &total;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~ScopedMicros() {
    total += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  }
};
std::mutex pathMutex;
std::string lastCachePath; // for the summary

// Timing runs in two rounds, so that a layer's slower candidates cost a few runs each: every
// candidate runs once as a warm-up, then kScreenRuns times timed; the candidates whose fastest
// screened run is within kContender of the best one's are timed kTimedRuns times more, and the
// median of those decides. A candidate far behind the best screen so far stops early: after its
// warm-up when that took more than kHopeless times the best plus kWarmupSlack (the warm-up may
// include loading the kernel's module: the slack keeps that from condemning a fast candidate),
// else after its first timed run when that took more than kHopeless times the best. Measured on
// MobileNetV2's depthwise layers, whose slowest engines take a thousand times the best (30 ms
// against 0.03), those runs were 8.4 of the 9.4 s spent timing.
constexpr int kScreenRuns = 3;
constexpr int kTimedRuns = 7;
constexpr float kHopeless = 2.0f;
constexpr float kWarmupSlack = 2.0f; // ms
constexpr float kContender = 1.10f;

// CASTOR_TUNING_LOG=1: each candidate of each layer timed, with its median or why it was left
// out, on stderr (which engine wins where, and what the workspace limit cost).
bool logCandidates() {
  static const bool on = [] {
    const char *v = std::getenv("CASTOR_TUNING_LOG");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void logCandidate(const std::string &signature, const std::string &candidate, const std::string &outcome) {
  if (logCandidates())
    std::fprintf(stderr, "castor: tuning %s: %s %s\n", signature.c_str(), candidate.c_str(), outcome.c_str());
}

size_t envCount(const char *name, size_t fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  return size_t(std::strtoul(v, nullptr, 10));
}

// Owns what timing needs and releases it on every return path.
struct TimingResources {
  void *workspace = nullptr;
  std::vector<cudaEvent_t> events;
  ~TimingResources() {
    for (cudaEvent_t e : events)
      cudaEventDestroy(e);
    if (workspace)
      cudaFree(workspace);
  }
};

struct Built {
  const Candidate *candidate;
  Executable executable;
};

// Runs `e` `runs` times back to back, an event between each two; the time of each run in ms.
Expected<std::vector<float>> timedRuns(DeviceContext &ctx, const Executable &e, void *workspace,
                                       std::vector<cudaEvent_t> &ev, int runs) {
  CASTOR_CUDA(cudaEventRecord(ev[0], ctx.stream));
  for (int i = 0; i < runs; ++i) {
    CASTOR_RETURN_IF_ERROR(e.run(workspace));
    CASTOR_CUDA(cudaEventRecord(ev[size_t(i) + 1], ctx.stream));
  }
  CASTOR_CUDA(cudaEventSynchronize(ev[size_t(runs)]));
  std::vector<float> times(static_cast<size_t>(runs));
  for (int i = 0; i < runs; ++i)
    CASTOR_CUDA(cudaEventElapsedTime(&times[size_t(i)], ev[size_t(i)], ev[size_t(i) + 1]));
  return times;
}

// The screen of `e`: its fastest of kScreenRuns timed runs in ms (after a warm-up), or an error
// when it fails to run. `best` is the best screen so far (0 when none): a candidate whose warm-up
// or first timed run is hopeless against it is not run further (that run is its screen).
Expected<float> screenCandidate(DeviceContext &ctx, const Executable &e, void *workspace,
                                std::vector<cudaEvent_t> &ev, float best) {
  auto warmup = timedRuns(ctx, e, workspace, ev, 1);
  if (!warmup)
    return warmup.status();
  if (best > 0 && (*warmup)[0] > kHopeless * best + kWarmupSlack)
    return (*warmup)[0];
  auto first = timedRuns(ctx, e, workspace, ev, 1);
  if (!first)
    return first.status();
  if (best > 0 && (*first)[0] > kHopeless * best)
    return (*first)[0];
  auto more = timedRuns(ctx, e, workspace, ev, kScreenRuns - 1);
  if (!more)
    return more.status();
  return std::min((*first)[0], *std::min_element(more->begin(), more->end()));
}

// The median of kTimedRuns runs of `e` in ms.
Expected<float> medianOfRuns(DeviceContext &ctx, const Executable &e, void *workspace, std::vector<cudaEvent_t> &ev) {
  auto times = timedRuns(ctx, e, workspace, ev, kTimedRuns);
  if (!times)
    return times.status();
  std::nth_element(times->begin(), times->begin() + kTimedRuns / 2, times->end());
  return (*times)[kTimedRuns / 2];
}

size_t powerOfTwoAtMost(size_t n) {
  size_t p = 1;
  while (p <= n / 2)
    p *= 2;
  return n ? p : 0;
}

// The keys a layer's choice is cached under: the whole race's, and the one of a race with
// candidates left out for their workspace.
std::pair<std::string, std::string> cacheKeys(const DeviceContext &ctx, const std::string &signature) {
  // A deterministic run chose among deterministic candidates only: its choice is kept under a key
  // of its own, so that it never stands in for an unrestricted choice, nor the other way round.
  std::string layerKey = ctx.deterministic ? signature + "|deterministic" : signature;
  // A choice made with every candidate in the race is kept under the layer's key; one made with
  // candidates left out for their workspace, under the key and the limit (in MiB, rounded down
  // to a power of two), so that a plan with a small limit never replaces the choice a plan with
  // room makes, whichever runs first.
  std::string limitedKey =
      layerKey + "|workspace<=" + std::to_string(powerOfTwoAtMost(ctx.workspaceLimit >> 20)) + "MiB";
  return {std::move(layerKey), std::move(limitedKey)};
}

// choose() before its choice is noted under the kernel being built.
Expected<Choice> chooseCandidate(DeviceContext &ctx, const std::string &signature,
                                 const std::vector<Candidate> &candidates, size_t compiledAllowance) {
  if (candidates.empty())
    return Status::error("no candidates for " + signature);
  const auto [layerKey, limitedKey] = cacheKeys(ctx, signature);
  {
    std::lock_guard<std::mutex> lock(pathMutex);
    lastCachePath = cachePath(ctx);
  }
  // The cached choice, if it still builds here within the limit (else timed again).
  for (const std::string &key : {layerKey, limitedKey}) {
    auto hit = lookup(ctx, key);
    if (!hit)
      continue;
    ScopedMicros building{buildMicros};
    for (const Candidate &c : candidates) {
      if (c.name != hit->candidate)
        continue;
      auto e = c.build();
      if (e && e->workspaceBytes <= ctx.workspaceLimit) {
        ++cachedLayers;
        Choice choice;
        choice.name = c.name;
        choice.executable = std::move(*e);
        choice.ms = hit->ms;
        choice.fromCache = true;
        return choice;
      }
      break;
    }
  }

  // Build the candidates, in the order given; those that compile at build only within their own
  // budget, or when nothing else builds.
  const size_t limit = envCount("CASTOR_TUNING_MAX_CANDIDATES", 16); // 0: all
  const size_t compiledLimit = compiledCandidateLimit(compiledAllowance);
  std::vector<Built> built;
  std::string lastError;
  bool leftOutForWorkspace = false;
  auto tryBuild = [&](const Candidate &c) {
    ScopedMicros building{buildMicros};
    auto e = c.build();
    if (!e) {
      lastError = c.name + ": " + e.message();
      logCandidate(signature, c.name, "does not build: " + e.message());
      return;
    }
    if (e->workspaceBytes > ctx.workspaceLimit) {
      lastError = c.name + ": needs a workspace of " + std::to_string(e->workspaceBytes) + " bytes";
      leftOutForWorkspace = true;
      logCandidate(signature, c.name, "left out: its workspace of " + std::to_string(e->workspaceBytes) +
                                          " bytes exceeds the limit of " + std::to_string(ctx.workspaceLimit));
      return;
    }
    built.push_back(Built{&c, std::move(*e)});
  };
  size_t compiledTried = 0;
  auto countedBuilt = [&] {
    return size_t(std::count_if(built.begin(), built.end(), [](const Built &b) { return b.candidate->counted; }));
  };
  for (const Candidate &c : candidates) {
    if (c.counted && limit > 0 && countedBuilt() >= limit)
      continue; // uncounted candidates further on still build
    if (c.compilesAtBuild && compiledTried++ >= compiledLimit)
      continue;
    tryBuild(c);
  }
  if (built.empty() && compiledTried > compiledLimit) {
    size_t seen = 0;
    for (const Candidate &c : candidates) {
      if (!c.compilesAtBuild || seen++ < compiledLimit)
        continue; // tried above
      // The first that compiles is taken: each costs seconds, for every layer of the plan.
      if (!built.empty())
        break;
      tryBuild(c);
    }
  }
  if (built.empty())
    return Status::error("no candidate builds" + (lastError.empty() ? std::string() : " (last: " + lastError + ")"));

  // Time them on the real buffers, with a workspace of the largest one's size.
  ScopedMicros timing{timingMicros};
  TimingResources res;
  size_t workspaceBytes = 0;
  for (const Built &b : built)
    workspaceBytes = std::max(workspaceBytes, b.executable.workspaceBytes);
  if (workspaceBytes > 0)
    CASTOR_CUDA(cudaMalloc(&res.workspace, workspaceBytes));
  res.events.resize(size_t(std::max(kTimedRuns, kScreenRuns)) + 1, nullptr);
  for (cudaEvent_t &e : res.events)
    CASTOR_CUDA(cudaEventCreate(&e));
  // Round one: every candidate screened.
  std::vector<float> screens(built.size(), -1.0f); // -1: fails to run
  float bestScreen = 0;
  for (size_t i = 0; i < built.size(); ++i) {
    const Built &b = built[i];
    auto ms = screenCandidate(ctx, b.executable, res.workspace, res.events, bestScreen);
    if (!ms) {
      lastError = b.candidate->name + ": " + ms.message();
      logCandidate(signature, b.candidate->name, "fails to run: " + ms.message());
      // A candidate that fails to run must not leave the stream busy or in error.
      CASTOR_CUDA(cudaStreamSynchronize(ctx.stream));
      continue;
    }
    screens[i] = *ms;
    if (bestScreen == 0 || *ms < bestScreen)
      bestScreen = *ms;
  }
  // Round two: the contenders timed again; the fastest median wins.
  const Built *best = nullptr;
  float bestMs = 0;
  int timed = 0;
  for (size_t i = 0; i < built.size(); ++i) {
    if (screens[i] < 0)
      continue;
    ++timed;
    const Built &b = built[i];
    char text[128];
    if (screens[i] > kContender * bestScreen) {
      std::snprintf(text, sizeof text, "screened %.4f ms, workspace %zu bytes", double(screens[i]),
                    b.executable.workspaceBytes);
      logCandidate(signature, b.candidate->name, text);
      continue;
    }
    auto ms = medianOfRuns(ctx, b.executable, res.workspace, res.events);
    if (!ms) {
      lastError = b.candidate->name + ": " + ms.message();
      logCandidate(signature, b.candidate->name, "fails to run: " + ms.message());
      CASTOR_CUDA(cudaStreamSynchronize(ctx.stream));
      continue;
    }
    std::snprintf(text, sizeof text, "%.4f ms (screened %.4f), workspace %zu bytes", double(*ms), double(screens[i]),
                  b.executable.workspaceBytes);
    logCandidate(signature, b.candidate->name, text);
    if (!best || *ms < bestMs) {
      best = &b;
      bestMs = *ms;
    }
  }
  if (!best)
    return Status::error("no candidate runs (last: " + lastError + ")");
  ++timedLayers;
  record(ctx, leftOutForWorkspace ? limitedKey : layerKey, CacheEntry{best->candidate->name, double(bestMs)});
  Choice choice;
  choice.name = best->candidate->name;
  choice.executable = best->executable;
  choice.ms = bestMs;
  choice.timedCandidates = timed;
  return choice;
}

} // namespace

Expected<Choice> choose(DeviceContext &ctx, const std::string &layerKey, const std::vector<Candidate> &candidates,
                        size_t compiledAllowance) {
  auto choice = chooseCandidate(ctx, layerKey, candidates, compiledAllowance);
  if (choice)
    ctx.noteTunedChoice(choice->name); // under the kernel being built (the backend's report)
  return choice;
}

size_t compiledCandidateLimit(size_t compiledAllowance) {
  return std::getenv("CASTOR_TUNING_MAX_COMPILED") ? envCount("CASTOR_TUNING_MAX_COMPILED", 0) : compiledAllowance;
}

bool hasCachedChoice(const DeviceContext &ctx, const std::string &signature) {
  const auto [layerKey, limitedKey] = cacheKeys(ctx, signature);
  return lookup(ctx, layerKey).has_value() || lookup(ctx, limitedKey).has_value();
}

Counts counts() {
  Counts c;
  c.timed = timedLayers.load();
  c.fromCache = cachedLayers.load();
  c.fallback = fallbackLayers.load();
  c.compiled = compiledCandidates.load();
  c.buildSeconds = double(buildMicros.load()) * 1e-6;
  c.timingSeconds = double(timingMicros.load()) * 1e-6;
  return c;
}

void noteFallback() { ++fallbackLayers; }
void noteCompiled() { ++compiledCandidates; }

std::string tuningSummary() {
  auto seconds = [](double s) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", s);
    return std::string(text);
  };
  const Counts c = counts();
  std::string path;
  {
    std::lock_guard<std::mutex> lock(pathMutex);
    path = lastCachePath;
  }
  return "tuning: " + std::to_string(c.timed) + " layers timed, " + std::to_string(c.fromCache) +
         " from cache, " + std::to_string(c.fallback) + " on the legacy convolution API, " +
         std::to_string(c.compiled) + " engines compiled while building; " + seconds(c.buildSeconds) +
         " s building candidates, " + seconds(c.timingSeconds) + " s timing them (cache " +
         (path.empty() ? std::string("in memory only") : path) + ")";
}

} // namespace castor::cuda::tuning
