#include "host/parallel.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace castor::host {

int hostThreads() {
  static const int n = std::clamp(int(std::thread::hardware_concurrency()), 1, 32);
  return n;
}

void parallelChunks(size_t count, size_t minChunk, const std::function<void(size_t, size_t)> &body, int threads) {
  const size_t n = std::clamp<size_t>(count / std::max<size_t>(minChunk, 1), 1, size_t(std::max(threads, 1)));
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (size_t t = 1; t < n; ++t)
    pool.emplace_back(body, count * t / n, count * (t + 1) / n);
  body(0, count / n);
  for (std::thread &t : pool)
    t.join();
}

} // namespace castor::host
