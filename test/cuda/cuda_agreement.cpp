// GPU test: the same training plans on the CPU reference and on the CUDA backend, from the same
// seeded parameters and the same inputs, must agree after one and after several steps: every
// float output (loss, gradients of --emit-gradients plans) and every PARAMETER/STATE tensor
// within a norm-wise relative error of 1e-4 each (fp32 plans), 1e-2 each for plans with f16/bf16
// tensors (the CUDA backend issue's criterion); i64 state exactly. The norm over all tensors
// together is printed too. Every plan runs twice: with CASTOR_CUDA_LAYOUT=nchw (every tensor
// row-major) and =nhwc (rank-4 float tensors channels-last).
//
//   castor_cuda_tests PLAN_OR_DIR... [--steps 3]
// A directory stands for every *.plan in it. Exit status 0 when every plan agrees.

#include "castor/backend.h"
#include "castor/cuda_backend.h"
#include "core/session.h"
#include "plan/plan_io.h"
#include "weights/init.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace castor;
namespace fs = std::filesystem;

namespace {

int64_t classesOf(const plan::Plan &p) {
  for (const auto &k : p.kernels())
    if (k.op() == "softmax_cross_entropy" || k.op() == "count_correct")
      for (const auto &t : p.tensors())
        if (t.id() == k.inputs(0) && t.shape_size() == 2)
          return t.shape(1);
  return 10;
}

const plan::Tensor *bound(const plan::Plan &p, const std::string &name) {
  for (const auto &b : p.inputs())
    if (b.name() == name)
      for (const auto &t : p.tensors())
        if (t.id() == b.tensor())
          return &t;
  return nullptr;
}

struct Compare {
  double diff2 = 0, norm2 = 0; // over every float tensor compared
  double worst = 0;
  std::string worstName;
  bool intsExact = true;
  std::string intMismatch;
};

void compare(const HostTensor &cpu, const HostTensor &gpu, const std::string &name, Compare &c) {
  if (cpu.dtype == plan::I64) {
    if (cpu.data != gpu.data) {
      c.intsExact = false;
      c.intMismatch = name;
    }
    return;
  }
  auto a = weights::decodeValues(cpu.dtype, cpu.data), b = weights::decodeValues(gpu.dtype, gpu.data);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - b[i];
    diff += d * d;
    norm += a[i] * a[i];
  }
  // Relative to the reference's norm; absolute below a tiny norm (a zero-initialised buffer).
  c.diff2 += diff;
  c.norm2 += norm;
  const double err = std::isnan(diff) ? INFINITY : std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6);
  if (err > c.worst || c.worstName.empty()) {
    c.worst = std::max(c.worst, err);
    if (err >= c.worst)
      c.worstName = name;
  }
}

bool lowPrecision(const plan::Plan &p) {
  for (const auto &t : p.tensors())
    if (t.dtype() == plan::F16 || t.dtype() == plan::BF16)
      return true;
  return false;
}

int checkPlan(const std::string &path, int steps, const char *layout) {
  setenv("CASTOR_CUDA_LAYOUT", layout, 1); // read when the CUDA backend is created
  auto read = plan::readPlanFile(path);
  if (!read) {
    std::printf("%s: %s\n", path.c_str(), read.message().c_str());
    return 1;
  }
  const plan::Plan p = *read;
  const double tol = lowPrecision(p) ? 1e-2 : 1e-4;
  SessionOptions so;
  so.seed = 7;
  auto cpu = Session::create(p, createCpuBackend(), so);
  auto gpu = Session::create(p, createCudaBackend(), so);
  if (!cpu || !gpu) {
    std::printf("%s: %s\n", path.c_str(), (!cpu ? cpu.message() : gpu.message()).c_str());
    return 1;
  }
  const plan::Tensor *images = bound(p, "images"), *labels = bound(p, "labels");
  const int64_t classes = classesOf(p);
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> normal;
  int failures = 0;
  double cpuMs = 0, gpuMs = 0;
  for (int step = 1; step <= steps; ++step) {
    for (const plan::Tensor *t : {images, labels}) {
      if (!t)
        continue;
      HostTensor h;
      h.name = t->name();
      h.shape.assign(t->shape().begin(), t->shape().end());
      const int64_t n = *plan::elementCount(*t);
      if (t->dtype() == plan::I64) {
        h.dtype = plan::I64;
        std::vector<int64_t> v(static_cast<size_t>(n));
        for (auto &e : v)
          e = int64_t(rng() % uint64_t(classes));
        h.data.resize(v.size() * 8);
        std::memcpy(h.data.data(), v.data(), h.data.size());
      } else {
        h.dtype = plan::F32;
        std::vector<double> v(static_cast<size_t>(n));
        for (auto &e : v)
          e = normal(rng);
        h.data = weights::encodeValues(plan::F32, v);
      }
      const std::string name = t == images ? "images" : "labels";
      Status a = (*cpu)->setInput(name, h), b = (*gpu)->setInput(name, h);
      if (!a || !b) {
        std::printf("%s: %s\n", path.c_str(), (!a ? a : b).message().c_str());
        return 1;
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    Status a = (*cpu)->run();
    auto t1 = std::chrono::steady_clock::now();
    Status b = (*gpu)->run();
    auto t2 = std::chrono::steady_clock::now();
    if (!a || !b) {
      std::printf("%s step %d: %s\n", path.c_str(), step, (!a ? a : b).message().c_str());
      return 1;
    }
    cpuMs += std::chrono::duration<double, std::milli>(t1 - t0).count();
    gpuMs += std::chrono::duration<double, std::milli>(t2 - t1).count();
    if (step != 1 && step != steps)
      continue;
    Compare c;
    double lossCpu = NAN, lossGpu = NAN;
    for (const auto &o : p.outputs()) {
      auto x = (*cpu)->output(o.name()), y = (*gpu)->output(o.name());
      if (!x || !y)
        continue;
      compare(*x, *y, "output " + o.name(), c);
      if (o.name() == "loss") {
        lossCpu = weights::decodeValues(x->dtype, x->data)[0];
        lossGpu = weights::decodeValues(y->dtype, y->data)[0];
      }
    }
    auto sx = (*cpu)->state(), sy = (*gpu)->state();
    if (!sx || !sy) {
      std::printf("%s: %s\n", path.c_str(), (!sx ? sx.message() : sy.message()).c_str());
      return 1;
    }
    for (size_t i = 0; i < sx->tensors.size(); ++i)
      compare(sx->tensors[i], sy->tensors[i], sx->tensors[i].name, c);
    // Every tensor within the tolerance (the first CUDA runs exceed 1e-2 on a few BN-bias and
    // weight gradients of the fp16/bf16 plans, where sums cancel: an open problem, see
    // docs/performance.md).
    const double global = std::isnan(c.diff2) ? INFINITY : std::sqrt(c.diff2) / std::max(std::sqrt(c.norm2), 1e-6);
    const double lossErr = std::fabs(lossCpu - lossGpu) / std::max(std::fabs(lossCpu), 1e-6);
    const bool ok = c.worst <= tol && lossErr <= tol && c.intsExact;
    failures += ok ? 0 : 1;
    std::printf("%-28s %s step %d  loss cpu %.6f cuda %.6f  all %.2e  worst tensor %.2e (%s)  tol %.0e  ints %s  %s\n",
                fs::path(path).filename().c_str(), layout, step, lossCpu, lossGpu, global, c.worst, c.worstName.c_str(), tol,
                c.intsExact ? "exact" : ("differ: " + c.intMismatch).c_str(), ok ? "PASS" : "FAIL");
  }
  std::printf("%-28s %s %d steps: cpu %.1f ms/step, cuda %.2f ms/step\n", fs::path(path).filename().c_str(), layout, steps,
              cpuMs / steps, gpuMs / steps);
  return failures;
}

} // namespace

int main(int argc, char **argv) {
  int steps = 3;
  std::vector<std::string> plans;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::max(1, std::atoi(argv[++i]));
    } else if (fs::is_directory(a)) {
      std::vector<std::string> found;
      for (const auto &e : fs::directory_iterator(a))
        if (e.path().extension() == ".plan" && e.path().filename().string().rfind("tiny", 0) == 0)
          found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      plans.insert(plans.end(), found.begin(), found.end());
    } else {
      plans.push_back(a);
    }
  }
  if (plans.empty()) {
    std::printf("usage: castor_cuda_tests PLAN_OR_DIR... [--steps N] (scripts/build_gpu.sh compiles test plans)\n");
    return 2;
  }
  int failures = 0;
  for (const char *layout : {"nchw", "nhwc"})
    for (const auto &p : plans)
      failures += checkPlan(p, steps, layout);
  std::printf("%s: %d plan(s) in 2 layouts, %d failing comparison(s)\n", failures ? "FAIL" : "PASS", int(plans.size()),
              failures);
  return failures ? 1 : 0;
}
