// Helpers shared by the runtime's tests: element counts, random values, finite differences, and
// running commands (castor-run) with their output.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
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

// d/dx sum(dy * f(x)) by central differences: the finite-difference side of the kernels'
// gradient checks.
inline std::vector<double> numericGradient(const std::function<std::vector<double>(const std::vector<double> &)> &f,
                                           std::vector<double> x, const std::vector<double> &dy, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const std::vector<double> plus = f(x);
    x[i] = keep - h;
    const std::vector<double> minus = f(x);
    x[i] = keep;
    double acc = 0;
    for (size_t j = 0; j < dy.size(); ++j)
      acc += dy[j] * (plus[j] - minus[j]);
    g[i] = acc / (2 * h);
  }
  return g;
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
