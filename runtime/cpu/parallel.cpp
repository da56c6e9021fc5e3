// The CPU kernels' worker threads: parallelFor and parallelChunks (cpu_internal.h).
#include "cpu/cpu_internal.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace castor::cpu {

int cpuThreads() {
  if (const char *v = std::getenv("CASTOR_CPU_THREADS")) {
    char *end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end != v && *end == 0 && n >= 1)
      return int(std::min<long>(n, 256));
  }
  static const int hw = std::max(1, int(std::thread::hardware_concurrency()));
  return hw;
}

void parallelFor(int64_t tasks, double work, const std::function<void(int64_t)> &body) {
  // Below ~200k operations a thread start costs more than it saves.
  const int64_t threads = std::min<int64_t>({int64_t(cpuThreads()), tasks, int64_t(work / 2e5) + 1});
  if (threads <= 1) {
    for (int64_t i = 0; i < tasks; ++i)
      body(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex errorLock;
  auto worker = [&]() {
    try {
      for (int64_t i = next++; i < tasks; i = next++)
        body(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(errorLock);
      if (!error)
        error = std::current_exception();
      next = tasks;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads - 1));
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  if (error)
    std::rethrow_exception(error);
}

void parallelChunks(int64_t n, double opsPerElement, const std::function<void(int64_t, int64_t)> &body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallelFor(chunks, opsPerElement * double(n), [&](int64_t c) {
    const int64_t i0 = c * kChunk;
    body(i0, std::min(kChunk, n - i0));
  });
}

} // namespace castor::cpu
