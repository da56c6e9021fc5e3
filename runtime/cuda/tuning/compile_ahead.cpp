// Compiled engines built ahead, in the background (see tuning/compile_ahead.h).
#include "cuda/tuning/compile_ahead.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

namespace castor::cuda::tuning {
namespace {

constexpr size_t kMaxThreads = 16;

size_t threadCount(size_t jobs) {
  size_t n = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), kMaxThreads);
  if (const char *v = std::getenv("CASTOR_TUNING_COMPILE_THREADS"); v && *v)
    n = size_t(std::strtoul(v, nullptr, 10));
  return std::min(n, jobs);
}

// Jobs not yet finished, by layer, over every CompileAhead of the process.
std::mutex pendingMutex;
std::condition_variable pendingDone;
std::map<std::string, size_t> pendingByLayer;

void addPending(const std::string &layer) {
  std::lock_guard<std::mutex> lock(pendingMutex);
  ++pendingByLayer[layer];
}

void removePending(const std::string &layer) {
  {
    std::lock_guard<std::mutex> lock(pendingMutex);
    auto it = pendingByLayer.find(layer);
    if (it != pendingByLayer.end() && --it->second == 0)
      pendingByLayer.erase(it);
  }
  pendingDone.notify_all();
}

} // namespace

CompileAhead::CompileAhead(std::vector<CompileJob> jobs) : start_(std::chrono::steady_clock::now()) {
  std::set<std::string> seen;
  for (CompileJob &j : jobs)
    if (seen.insert(j.key).second)
      jobs_.push_back(std::move(j));
  const size_t threads = threadCount(jobs_.size());
  int device = 0;
  if (threads == 0 || cudaGetDevice(&device) != cudaSuccess) {
    jobs_.clear(); // nothing waits for them: the layers compile as they are built
    return;
  }
  for (const CompileJob &j : jobs_)
    addPending(j.layer);
  for (size_t t = 0; t < threads; ++t)
    workers_.emplace_back([this, device] { work(device); });
}

void CompileAhead::work(int device) {
  // The caller's device; a handle of this worker's own (cuDNN's handles are not to be shared
  // between threads at once). A worker without one still takes its jobs off the queue, so that
  // no layer waits for them; their layers compile them when built.
  cudnnHandle_t handle = nullptr;
  if (cudaSetDevice(device) != cudaSuccess || cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS)
    handle = nullptr;
  for (size_t i = next_++; i < jobs_.size(); i = next_++) {
    if (handle && !stop_) {
      jobs_[i].run(handle);
      ++ran_;
      const int64_t now =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start_).count();
      for (int64_t seen = endMicros_.load(); now > seen && !endMicros_.compare_exchange_weak(seen, now);) {
      }
    }
    removePending(jobs_[i].layer);
  }
  if (handle)
    cudnnDestroy(handle);
}

CompileAheadReport CompileAhead::finish() {
  for (std::thread &t : workers_)
    if (t.joinable())
      t.join();
  finished_ = true;
  CompileAheadReport report;
  report.jobs = ran_.load();
  report.threads = workers_.size();
  report.seconds = double(endMicros_.load()) * 1e-6;
  return report;
}

CompileAhead::~CompileAhead() {
  if (!finished_) {
    stop_ = true;
    for (std::thread &t : workers_)
      if (t.joinable())
        t.join();
  }
}

void awaitCompileAhead(const std::string &layer) {
  std::unique_lock<std::mutex> lock(pendingMutex);
  pendingDone.wait(lock, [&] { return pendingByLayer.find(layer) == pendingByLayer.end(); });
}

} // namespace castor::cuda::tuning
