// Helpers shared by the runtime's tests: element counts, random values, and running commands
// (castor-run) with their output.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <sys/wait.h>
#include <utility>
#include <vector>

namespace castor::test {

inline int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// n values drawn uniformly from [lo, hi).
inline std::vector<double> randomValues(int64_t n, std::mt19937_64 &rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &e : v)
    e = u(rng);
  return v;
}
inline std::vector<double> randomValues(const std::vector<int64_t> &shape, std::mt19937_64 &rng, double lo = -1,
                                        double hi = 1) {
  return randomValues(count(shape), rng, lo, hi);
}

// Runs the shell command `cmd`, returning (exit status, stdout + stderr).
inline std::pair<int, std::string> shell(const std::string &cmd) {
  FILE *pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

#ifdef CASTOR_RUN_PATH
// Runs castor-run with `args`.
inline std::pair<int, std::string> castorRun(const std::string &args) {
  return shell(std::string(CASTOR_RUN_PATH) + " " + args);
}
#endif

} // namespace castor::test
