// Compiled engines built ahead, in parallel (see tuning/compile_ahead.h).
#include "cuda/tuning/compile_ahead.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

namespace castor::cuda::tuning {
namespace {

constexpr size_t kMaxThreads = 16;

size_t threadCount(size_t jobs) {
  size_t n = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), kMaxThreads);
  if (const char *v = std::getenv("CASTOR_TUNING_COMPILE_THREADS"); v && *v)
    n = size_t(std::strtoul(v, nullptr, 10));
  return std::min(n, jobs);
}

} // namespace

CompileAheadReport compileAhead(std::vector<CompileJob> jobs) {
  std::set<std::string> seen;
  jobs.erase(std::remove_if(jobs.begin(), jobs.end(), [&](const CompileJob &j) { return !seen.insert(j.key).second; }),
             jobs.end());
  CompileAheadReport report;
  const size_t threads = threadCount(jobs.size());
  int device = 0;
  if (threads == 0 || cudaGetDevice(&device) != cudaSuccess)
    return report;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0}, ran{0};
  auto worker = [&]() {
    // The caller's device; a handle of this worker's own (cuDNN's handles are not to be shared
    // between threads at once).
    cudnnHandle_t handle = nullptr;
    if (cudaSetDevice(device) != cudaSuccess || cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS)
      return; // the other workers (or the layers' own builds) do the work
    for (size_t i = next++; i < jobs.size(); i = next++) {
      jobs[i].run(handle);
      ++ran;
    }
    cudnnDestroy(handle);
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back(worker);
  for (std::thread &t : pool)
    t.join();
  report.jobs = ran.load();
  report.threads = threads;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

} // namespace castor::cuda::tuning
