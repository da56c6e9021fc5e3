// The CPU reference backend.
//
// Every kernel reads its floating-point operands into double precision, computes in double
// (so every sum accumulates in fp64), and rounds once when it stores each result in the output's
// dtype (round to nearest even for f32, f16 and bf16). Each output is computed by one loop in a
// fixed order: results are deterministic. Kernels spread independent outputs (channels, planes,
// blocks of output channels, element chunks) over CASTOR_CPU_THREADS threads (default: the
// hardware concurrency); no sum is ever split between threads, so the bits do not depend on the
// thread count. The heavy loops (convolutions, gemm, matmul) are register-tiled in
// tiled_kernels.h, summing each output's terms in the same order as the plain loops.

#include "castor/backend.h"
#include "cpu/cpu_internal.h"
#include "dist/communicator.h"
#include "cpu/rounding_noise.h"
#include "cpu/tiled_kernels.h"
#include "castor/float_convert.h"
#include "castor/shape_rules.h"
#include "plan/op_attrs.h"
#include "plan/plan_validator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <functional>
#include <limits>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace castor {
namespace cpu {

void Memory::readRange(const Tensor &t, int64_t begin, int64_t n, double *v) {
  const uint8_t *p = slot(t);
  switch (t.dtype()) {
  case plan::F32:
    p += 4 * begin;
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      v[i] = f;
    }
    break;
  case plan::F64:
    std::memcpy(v, p + 8 * begin, size_t(n) * 8);
    break;
  case plan::F16:
  case plan::BF16:
    p += 2 * begin;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v[i] = t.dtype() == plan::F16 ? halfToDouble(h) : bfloat16ToDouble(h);
    }
    break;
  case plan::I64:
    p += 8 * begin;
    for (int64_t i = 0; i < n; ++i) {
      int64_t x;
      std::memcpy(&x, p + 8 * i, 8);
      v[i] = double(x);
    }
    break;
  default:
    break;
  }
}

Values Memory::read(const Tensor &t) {
  int64_t n = countOf(t);
  Values v(static_cast<size_t>(n));
  double *dst = v.data();
  parallelChunks(n, 1.0, [&](int64_t i0, int64_t m) { readRange(t, i0, m, dst + i0); });
  return v;
}

std::vector<int64_t> Memory::readInts(const Tensor &t) {
  std::vector<int64_t> v(size_t(countOf(t)));
  std::memcpy(v.data(), slot(t), v.size() * 8);
  return v;
}

void Memory::writeInts(const Tensor &t, const std::vector<int64_t> &v) {
  std::memcpy(slot(t), v.data(), size_t(countOf(t)) * 8);
}

void Memory::writeRange(const Tensor &t, int64_t begin, int64_t n, const double *v) {
  uint8_t *p = slot(t);
  switch (t.dtype()) {
  case plan::F32:
    p += 4 * begin;
    for (int64_t i = 0; i < n; ++i) {
      float f = float(v[i]);
      std::memcpy(p + 4 * i, &f, 4);
    }
    break;
  case plan::F64:
    std::memcpy(p + 8 * begin, v, size_t(n) * 8);
    break;
  case plan::F16:
  case plan::BF16:
    p += 2 * begin;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = t.dtype() == plan::F16 ? doubleToHalf(v[i]) : doubleToBFloat16(v[i]);
      std::memcpy(p + 2 * i, &h, 2);
    }
    break;
  case plan::I64:
    p += 8 * begin;
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = int64_t(v[i]);
      std::memcpy(p + 8 * i, &x, 8);
    }
    break;
  default:
    break;
  }
}

double roundToDtype(double v, plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return double(float(v));
  case plan::F16:
    return halfToDouble(doubleToHalf(v));
  case plan::BF16:
    return bfloat16ToDouble(doubleToBFloat16(v));
  default:
    return v;
  }
}

void Memory::write(const Tensor &t, const Values &v) {
  const double *src = v.data();
  parallelChunks(countOf(t), 1.0, [&](int64_t i0, int64_t m) { writeRange(t, i0, m, src + i0); });
}

std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out) {
  size_t rank = out.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    size_t d = in.size() - 1 - i;
    size_t o = rank - 1 - i;
    strides[o] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  int64_t n = *shape::elementCount(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(rank, 0);
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    map[i] = at;
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      at += strides[d];
      if (idx[d] < out[d])
        break;
      at -= strides[d] * idx[d];
      idx[d] = 0;
    }
  }
  return map;
}

int64_t span(const Shape &s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i)
    n *= s[i];
  return n;
}

Expected<AxisSplit> splitAtAxis(const Kernel &k, int64_t fallback, const Shape &s) {
  auto axis = plan::parseAxis(k, fallback);
  if (!axis)
    return axis.status();
  auto ax = shape::normalizeAxis(*axis, int64_t(s.size()));
  if (!ax)
    return Status::error("axis out of range");
  const size_t a = size_t(*ax);
  return AxisSplit{*ax, span(s, 0, a), s[a], span(s, a + 1, s.size())};
}

Status checkLabel(int64_t label, int64_t n, int64_t C) {
  if (label < 0 || label >= C)
    return Status::error("label " + std::to_string(label) + " of sample " + std::to_string(n) + " is outside [0, " +
                         std::to_string(C) + ")");
  return Status::ok();
}

double logSumExp(const double *row, int64_t C) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < C; ++j)
    mx = std::max(mx, row[j]);
  double sum = 0;
  for (int64_t j = 0; j < C; ++j)
    sum += std::exp(row[j] - mx);
  return mx + std::log(sum);
}

namespace {

// Freed blocks of at least kScratchMin bytes, most recent last; at most kScratchBlocks blocks
// and kScratchBytes bytes are kept.
constexpr size_t kScratchMin = size_t(1) << 16, kScratchBlocks = 64, kScratchBytes = size_t(1) << 30;
std::mutex scratchLock;
std::vector<std::pair<size_t, void *>> scratchBlocks;
size_t scratchHeld = 0;

} // namespace

void *scratchAllocate(size_t bytes) {
  if (bytes >= kScratchMin) {
    std::lock_guard<std::mutex> lock(scratchLock);
    for (size_t i = scratchBlocks.size(); i-- > 0;)
      if (scratchBlocks[i].first == bytes) {
        void *p = scratchBlocks[i].second;
        scratchBlocks.erase(scratchBlocks.begin() + std::ptrdiff_t(i));
        scratchHeld -= bytes;
        return p;
      }
  }
  return ::operator new(bytes);
}

void scratchFree(void *p, size_t bytes) {
  if (bytes < kScratchMin || bytes > kScratchBytes) {
    ::operator delete(p);
    return;
  }
  std::lock_guard<std::mutex> lock(scratchLock);
  scratchBlocks.emplace_back(bytes, p);
  scratchHeld += bytes;
  while (scratchBlocks.size() > kScratchBlocks || scratchHeld > kScratchBytes) {
    ::operator delete(scratchBlocks.front().second);
    scratchHeld -= scratchBlocks.front().first;
    scratchBlocks.erase(scratchBlocks.begin());
  }
}

std::vector<std::pair<int64_t, int64_t>> windowRanges(int64_t outSize, int64_t inSize, int64_t taps, int64_t stride,
                                                      int64_t pad, int64_t dilation) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t o = 0; o < outSize; ++o) {
    int64_t lo = taps, hi = 0;
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t i = o * stride - pad + k * dilation;
      if (i >= 0 && i < inSize) {
        lo = std::min(lo, k);
        hi = k + 1;
      }
    }
    ranges.emplace_back(lo, std::max(lo, hi));
  }
  return ranges;
}

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

namespace {

const KernelTable &forwardKernels();

class CpuBackend final : public Backend, public Memory {
public:
  explicit CpuBackend(const BackendOptions &options)
      : poison_(options.poison || poisonRequestedByEnvironment()), noiseSeed_(options.roundingNoiseSeed),
        plant_(options), replicas_(options.replicas) {}

  std::string name() const override { return "cpu"; }

  // Every kernel, fused ones included, runs its reference definition.
  std::vector<KernelChoice> kernelChoices() const override {
    return std::vector<KernelChoice>(kernels_.size(), KernelChoice{"reference", ""});
  }

  Status load(const plan::Plan &p) override {
    plan_ = p;
    CASTOR_RETURN_IF_ERROR(plant_.bind(plan_));
    tensors_.clear();
    kernels_.clear();
    poisonAfter_.clear();
    for (const Tensor &t : plan_.tensors()) {
      if (std::string error = plan::slotError(t, plan_.arena_bytes()); !error.empty())
        return Status::error(error);
      tensors_[t.id()] = &t;
    }
    // A size the machine cannot hold is refused before anything is allocated (a hostile or
    // corrupt plan may claim terabytes; the zero-fill would touch every page of it).
    const uint64_t physical = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGE_SIZE));
    if (plan_.arena_bytes() > physical)
      return Status::error("the plan needs an arena of " + std::to_string(plan_.arena_bytes()) +
                           " bytes, more than this machine's " + std::to_string(physical) + " bytes of memory");
    try {
      arena_.assign(plan_.arena_bytes(), 0);
    } catch (const std::exception &) {
      return Status::error("cannot allocate an arena of " + std::to_string(plan_.arena_bytes()) + " bytes");
    }
    for (int i = 0; i < plan_.kernels_size(); ++i) {
      const Kernel &k = plan_.kernels(i);
      auto where = plan::describeKernel(plan_, i);
      KernelContext ctx{*this, k, {}, {}, replicas_};
      for (uint32_t id : k.inputs()) {
        auto it = tensors_.find(id);
        if (it == tensors_.end())
          return Status::error(where + ": unknown tensor id " + std::to_string(id));
        ctx.in.push_back(it->second);
      }
      for (uint32_t id : k.outputs()) {
        auto it = tensors_.find(id);
        if (it == tensors_.end())
          return Status::error(where + ": unknown tensor id " + std::to_string(id));
        ctx.out.push_back(it->second);
      }
      const auto op = plan::opFromName(k.op());
      const Builder *build = op ? cpuKernels().find(*op) : nullptr;
      if (!build)
        return Status::error(where + ": the cpu backend has no kernel '" + k.op() + "'");
      auto fn = (*build)(ctx);
      if (!fn)
        return fn.status().withContext(where);
      kernels_.push_back(std::move(*fn));
    }
    if (poison_) {
      poisonAfter_.resize(plan_.kernels_size());
      auto ranges = plan::computeLiveRanges(plan_);
      for (const Tensor &t : plan_.tensors()) {
        if (t.kind() != Tensor::ACTIVATION && t.kind() != Tensor::INPUT)
          continue;
        int64_t end = ranges[t.id()].end;
        if (end >= 0 && end < plan_.kernels_size())
          poisonAfter_[end].push_back(&t);
      }
    }
    return Status::ok();
  }

  Status upload(uint32_t id, const void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    // An input is kept aside and copied into its slot when a step starts (the step reuses the
    // slot once the input is read, and the next step's input may arrive before this step's
    // outputs are read: its slot may hold one of them).
    if ((*t)->kind() == Tensor::INPUT)
      inputs_[id].assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + bytes);
    else
      std::memcpy(arena_.data() + (*t)->offset(), data, bytes);
    return Status::ok();
  }

  Status download(uint32_t id, void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    auto input = inputs_.find(id);
    std::memcpy(data, input != inputs_.end() ? input->second.data() : arena_.data() + (*t)->offset(), bytes);
    return Status::ok();
  }

  Status run() override {
    CASTOR_RETURN_IF_ERROR(execute(steps_, nullptr));
    ++steps_;
    return Status::ok();
  }

  Expected<NonFiniteFound> replayToFirstNonFinite() override {
    if (steps_ == 0)
      return Status::error("no step to replay: the plan has not run");
    NonFiniteFound found;
    CASTOR_RETURN_IF_ERROR(execute(steps_ - 1, &found));
    return found;
  }

private:
  // The kernels of run `runIndex` (0-based). With `found`, a replay: no poisoning, and it stops
  // after the first kernel that leaves a non-finite value in a floating-point output.
  Status execute(uint64_t runIndex, NonFiniteFound *found) {
    for (const auto &[id, bytes] : inputs_)
      std::memcpy(arena_.data() + tensors_.at(id)->offset(), bytes.data(), bytes.size());
    for (size_t i = 0; i < kernels_.size(); ++i) {
      Status s;
      try {
        s = kernels_[i]();
      } catch (const std::exception &e) {
        s = Status::error(e.what());
      }
      if (!s)
        return s.withContext(plan::describeKernel(plan_, int(i)));
      if (noiseSeed_ != 0)
        for (uint32_t id : plan_.kernels(int(i)).outputs())
          addRoundingNoise(*tensors_.at(id), arena_.data() + tensors_.at(id)->offset(), noiseSeed_,
                           (runIndex << 32) ^ i);
      if (const Tensor *t = plant_.after(int(i), int64_t(runIndex) + 1))
        std::memcpy(arena_.data() + t->offset(), plant_.bytes().data(), plant_.bytes().size());
      if (found) {
        for (uint32_t id : plan_.kernels(int(i)).outputs()) {
          const Tensor &t = *tensors_.at(id);
          if (int64_t n = countNonFinite(t.dtype(), arena_.data() + t.offset(), t.bytes()); n > 0) {
            *found = {int(i), id, n};
            return Status::ok();
          }
        }
      } else if (poison_) {
        for (const Tensor *t : poisonAfter_[i])
          std::memset(arena_.data() + t->offset(), 0xFF, t->bytes());
      }
    }
    return Status::ok();
  }

  Expected<const Tensor *> find(uint32_t id, size_t bytes) {
    auto it = tensors_.find(id);
    if (it == tensors_.end())
      return Status::error("no tensor with id " + std::to_string(id));
    if (it->second->bytes() != bytes)
      return Status::error("tensor " + std::to_string(id) + " '" + it->second->name() + "' holds " +
                           std::to_string(it->second->bytes()) + " bytes, got " + std::to_string(bytes));
    return it->second;
  }

  bool poison_;
  uint64_t noiseSeed_ = 0, steps_ = 0;
  NonFinitePlant plant_;
  dist::Communicator *replicas_ = nullptr;
  plan::Plan plan_;
  std::unordered_map<uint32_t, const Tensor *> tensors_;
  std::map<uint32_t, std::vector<uint8_t>> inputs_; // the last upload of each INPUT tensor
  std::vector<RunFn> kernels_;
  std::vector<std::vector<const Tensor *>> poisonAfter_;
};

// ---------------------------------------------------------------------------------------------
// Helpers.

// Elementwise y = f(x), chunk by chunk (an in-place update reads each chunk before writing it).
template <typename F> RunFn unaryRun(Memory *b, const Tensor *x, const Tensor *y, F f) {
  return [=]() {
    parallelChunks(countOf(*y), 4.0, [&](int64_t i0, int64_t n) {
      double v[kChunk];
      b->readRange(*x, i0, n, v);
      for (int64_t i = 0; i < n; ++i)
        v[i] = f(v[i]);
      b->writeRange(*y, i0, n, v);
    });
    return Status::ok();
  };
}

// Unary elementwise kernel in double; make(kernel) parses the attributes into the functor.
template <typename Make> Builder unary(Make make) {
  return [make](const KernelContext &c) -> Expected<RunFn> {
    auto f = make(c.kernel);
    if (!f)
      return f.status();
    return unaryRun(&c.backend, c.in[0], c.out[0], *f);
  };
}

struct Relu {
  double operator()(double v) const { return v > 0 ? v : (std::isnan(v) ? v : 0.0); }
};
struct Sigmoid {
  double operator()(double v) const { return 1.0 / (1.0 + std::exp(-v)); }
};
struct Erf {
  double operator()(double v) const { return std::erf(v); }
};
struct Gelu { // x Phi(x), or PyTorch's tanh approximation
  bool tanhForm;
  double operator()(double v) const {
    if (tanhForm)
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }
};
struct Clip {
  double lo, hi;
  double operator()(double v) const {
    if (std::isnan(v))
      return v;
    return std::min(std::max(v, lo), hi);
  }
};
struct HardSigmoid {
  double alpha, beta;
  double operator()(double v) const {
    if (std::isnan(v))
      return v;
    return std::min(std::max(alpha * v + beta, 0.0), 1.0);
  }
};
struct HardSwish { // as PyTorch: x relu6(x + 3) / 6
  double operator()(double v) const {
    if (std::isnan(v))
      return v;
    return v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0;
  }
};

template <typename Op> Builder binary(Op op) {
  return [op](const KernelContext &c) -> Expected<RunFn> {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
    Memory *b = &c.backend;
    const Tensor *x = c.in[0], *y = c.in[1], *z = c.out[0];
    Shape out = shapeOf(*z);
    if (shapeOf(*x) == out && shapeOf(*y) == out)
      return sameShapeBinaryRun(b, x, y, z, op);
    auto ix = std::make_shared<std::vector<int64_t>>(broadcastIndex(shapeOf(*x), out));
    auto iy = std::make_shared<std::vector<int64_t>>(broadcastIndex(shapeOf(*y), out));
    return RunFn([=]() {
      Values a = b->read(*x), bb = b->read(*y);
      const int64_t *px = ix->data(), *py = iy->data();
      parallelChunks(int64_t(ix->size()), 4.0, [&](int64_t i0, int64_t n) {
        double r[kChunk];
        for (int64_t i = 0; i < n; ++i)
          r[i] = op(a[size_t(px[i0 + i])], bb[size_t(py[i0 + i])]);
        b->writeRange(*z, i0, n, r);
      });
      return Status::ok();
    });
  };
}

// Same-dtype byte copy (identity, reshape, flatten, dropout at inference).
RunFn byteCopy(Memory *b, const Tensor *x, const Tensor *y) {
  return [=]() {
    if (b->slot(*y) != b->slot(*x)) // a view (Tensor.view_of) already holds the bytes
      std::memmove(b->slot(*y), b->slot(*x), x->bytes());
    return Status::ok();
  };
}

Expected<RunFn> convertCopy(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  if (x->dtype() == y->dtype())
    return byteCopy(b, x, y);
  return RunFn([=]() {
    if (x->dtype() == plan::I64) {
      std::vector<int64_t> v = b->readInts(*x);
      Values d(v.begin(), v.end());
      b->write(*y, d);
      return Status::ok();
    }
    Values v = b->read(*x);
    if (y->dtype() == plan::I64) {
      for (double &e : v) {
        if (!std::isfinite(e) || e >= 9.2233720368547758e18 || e < -9.2233720368547758e18)
          return Status::error("cannot cast " + std::to_string(e) + " to i64");
        e = std::trunc(e);
      }
    }
    b->write(*y, v);
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------------------------
// Kernels.

Expected<RunFn> buildBatchNormTraining(const KernelContext &c) {
  auto p = plan::parseBatchNorm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  Shape xs = shapeOf(*in[0]);
  const double eps = p->epsilon, momentum = p->momentum;
  const plan::DType statDtype = out[1]->dtype();
  // Synchronized (SyncBatchNorm): the per-channel sums of every replica's batch.
  dist::Communicator *replicas = p->sync ? c.replicas : nullptr;
  return RunFn([=]() -> Status {
    Values gamma = b->read(*in[1]), beta = b->read(*in[2]);
    const Channels chans(xs);
    const int64_t C = chans.C;
    const int world = replicas ? replicas->worldSize() : 1;
    const int64_t m = chans.N * chans.inner, total = m * world;
    Values mean(static_cast<size_t>(C)), invStd(static_cast<size_t>(C)), var(static_cast<size_t>(C));
    auto sumOf = [&](const Values &xc) {
      double sum = 0;
      for (int64_t i = 0; i < m; ++i)
        sum += xc[i];
      return sum;
    };
    auto squaredDeviations = [&](const Values &xc, double mu) {
      double sq = 0;
      for (int64_t i = 0; i < m; ++i) {
        double d = xc[i] - mu;
        sq += d * d;
      }
      return sq;
    };
    // From the biased variance: the statistics, and y in place of the channel's x.
    auto normalize = [&](int64_t ch, Values &xc, double v) {
      const double is = 1.0 / std::sqrt(v + eps);
      var[ch] = v;
      invStd[ch] = is;
      // y from the statistics as stored, so that batch_norm_apply reproduces it bit for bit.
      const double muStored = roundToDtype(mean[ch], statDtype), isStored = roundToDtype(is, statDtype);
      for (int64_t i = 0; i < m; ++i)
        xc[i] = (xc[i] - muStored) * isStored * gamma[ch] + beta[ch];
      chans.write(b, *out[0], ch, xc.data());
    };
    if (world == 1) {
      // One read of each channel: its mean, the squared deviations from it, then y.
      parallelFor(C, 5.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        mean[ch] = m ? sumOf(xc) / double(m) : 0.0;
        normalize(ch, xc, m ? squaredDeviations(xc, mean[ch]) / double(m) : 0.0);
      });
    } else {
      // The same two sums, each added up over the replicas before its division.
      std::vector<double> sums(static_cast<size_t>(C));
      parallelFor(C, 2.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        sums[size_t(ch)] = sumOf(xc);
      });
      CASTOR_RETURN_IF_ERROR(replicas->allReduce(sums.data(), sums.size(), plan::F64, dist::ReduceOp::Sum)
                                 .withContext("batch statistics (mean)"));
      for (int64_t ch = 0; ch < C; ++ch)
        mean[ch] = total ? sums[size_t(ch)] / double(total) : 0.0;
      parallelFor(C, 3.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        sums[size_t(ch)] = squaredDeviations(xc, mean[ch]);
      });
      CASTOR_RETURN_IF_ERROR(replicas->allReduce(sums.data(), sums.size(), plan::F64, dist::ReduceOp::Sum)
                                 .withContext("batch statistics (variance)"));
      parallelFor(C, 5.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        normalize(ch, xc, total ? sums[size_t(ch)] / double(total) : 0.0);
      });
    }
    Values runMean, runVar;
    if (out.size() == 5) {
      runMean = b->read(*in[3]);
      runVar = b->read(*in[4]);
      for (int64_t ch = 0; ch < C; ++ch) {
        double unbiased = total > 1 ? var[ch] * double(total) / double(total - 1) : var[ch];
        runMean[ch] = (1 - momentum) * runMean[ch] + momentum * mean[ch];
        runVar[ch] = (1 - momentum) * runVar[ch] + momentum * unbiased;
      }
    }
    b->write(*out[1], mean);
    b->write(*out[2], invStd);
    if (out.size() == 5) {
      b->write(*out[3], runMean);
      b->write(*out[4], runVar);
    }
    return Status::ok();
  });
}

// x, scale, bias, mean, inv_std [, z] -> y: batch_norm_training's output from its statistics,
// then the residual add and relu (or ReLU6's clip) as batch_norm_relu_training composes them
// (each rounded).
Expected<RunFn> buildBatchNormApply(const KernelContext &c) {
  auto p = plan::parseBatchNormApply(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  const Tensor *y = c.out[0];
  Shape xs = shapeOf(*in[0]);
  const bool relu = p->relu;
  const std::optional<Clip> clip =
      p->clipMax ? std::optional<Clip>(Clip{0.0, *p->clipMax}) : std::nullopt; // as the clip op
  const plan::DType dtype = y->dtype();
  return RunFn([=]() {
    Values X = b->read(*in[0]), gamma = b->read(*in[1]), beta = b->read(*in[2]), mean = b->read(*in[3]),
           invStd = b->read(*in[4]);
    Values Z;
    if (in.size() == 6)
      Z = b->read(*in[5]);
    const int64_t C = xs[1], inner = span(xs, 2, xs.size());
    parallelFor(xs[0] * C, 4.0 * double(X.size()), [&](int64_t nc) {
      const int64_t ch = nc % C;
      for (int64_t i = nc * inner; i < (nc + 1) * inner; ++i) {
        double t = roundToDtype((X[i] - mean[ch]) * invStd[ch] * gamma[ch] + beta[ch], dtype);
        if (!Z.empty())
          t = roundToDtype(t + Z[i], dtype);
        X[i] = clip ? (*clip)(t) : relu ? (t > 0 ? t : (t != t ? t : 0.0)) : t;
      }
    });
    b->write(*y, X);
    return Status::ok();
  });
}

Expected<RunFn> buildBatchNormInference(const KernelContext &c) {
  auto p = plan::parseBatchNorm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  const Tensor *y = c.out[0];
  Shape xs = shapeOf(*in[0]);
  const double eps = p->epsilon;
  return RunFn([=]() {
    Values X = b->read(*in[0]), gamma = b->read(*in[1]), beta = b->read(*in[2]), mean = b->read(*in[3]),
           var = b->read(*in[4]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    parallelFor(N * C, 4.0 * double(X.size()), [&](int64_t nc) {
      const int64_t ch = nc % C;
      double is = 1.0 / std::sqrt(var[ch] + eps);
      for (int64_t i = 0; i < inner; ++i) {
        double &e = X[nc * inner + i];
        e = (e - mean[ch]) * is * gamma[ch] + beta[ch];
      }
    });
    b->write(*y, X);
    return Status::ok();
  });
}

Expected<RunFn> buildPool(const KernelContext &c, bool isMax) {
  auto p = plan::parsePool2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  Shape xs = shapeOf(*x), ys = shapeOf(*y);
  auto a = p->shape;
  bool includePad = p->countIncludePad;
  return RunFn([=]() {
    Values X = b->read(*x), Y(size_t(span(ys, 0, 4)));
    const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], P = ys[2], Q = ys[3];
    const auto rows = windowRanges(P, H, a.kernel[0], a.strides[0], a.pads[0], a.dilations[0]);
    const auto cols = windowRanges(Q, W, a.kernel[1], a.strides[1], a.pads[1], a.dilations[1]);
    const int64_t dh = a.dilations[0], dw = a.dilations[1];
    parallelFor(NC, 4.0 * double(X.size()), [&](int64_t nc) {
      const double *plane = X.data() + nc * H * W;
      for (int64_t op = 0; op < P; ++op) {
        const auto [r0, r1] = rows[size_t(op)];
        const int64_t h0 = op * a.strides[0] - a.pads[0];
        for (int64_t oq = 0; oq < Q; ++oq) {
          const auto [s0, s1] = cols[size_t(oq)];
          const int64_t w0 = oq * a.strides[1] - a.pads[1];
          double acc;
          if (isMax) {
            acc = -std::numeric_limits<double>::infinity();
            for (int64_t r = r0; r < r1; ++r) {
              const double *row = plane + (h0 + r * dh) * W + w0;
              for (int64_t s = s0; s < s1; ++s) {
                const double v = row[s * dw];
                // Branch-free (random data mispredicts): v wins when greater or NaN.
                acc = selectBits((v > acc) | (v != v), v, acc);
              }
            }
          } else {
            acc = 0.0;
            for (int64_t r = r0; r < r1; ++r) {
              const double *row = plane + (h0 + r * dh) * W + w0;
              for (int64_t s = s0; s < s1; ++s)
                acc += row[s * dw];
            }
            int64_t divisor = (r1 - r0) * (s1 - s0);
            if (includePad) {
              // As PyTorch: the window clipped to the padded input (not to the ceil-mode overhang).
              int64_t h1 = std::min(h0 + a.kernel[0], H + a.pads[2]);
              int64_t w1 = std::min(w0 + a.kernel[1], W + a.pads[3]);
              divisor = (h1 - h0) * (w1 - w0);
            }
            acc = divisor > 0 ? acc / double(divisor) : 0.0;
          }
          Y[(nc * P + op) * Q + oq] = acc;
        }
      }
    });
    b->write(*y, Y);
    return Status::ok();
  });
}

Expected<RunFn> buildGlobalAvgPool(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  Shape xs = shapeOf(*x);
  return RunFn([=]() {
    Values X = b->read(*x);
    const int64_t NC = xs[0] * xs[1], inner = span(xs, 2, xs.size());
    Values Y(static_cast<size_t>(NC));
    for (int64_t i = 0; i < NC; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < inner; ++j)
        sum += X[i * inner + j];
      Y[i] = sum / double(inner);
    }
    b->write(*y, Y);
    return Status::ok();
  });
}

// y[i][j] = sum over p (ascending) of a[i][p] * b[p][j] for an [M,K] x [K,N] product; element
// (i, p) of a is at a[i * aRow + p * aCol], (p, j) of b at b[p * bRow + j * bCol]. Rows of y are
// computed in tiles of a few, columns in blocks of MR = 2*NV lanes; `store(i, j0, lanes, acc)`
// receives each finished tile row.
template <int NV, typename Store>
void tiledProduct(int64_t M, int64_t N, int64_t K, const double *a, int64_t aRow, int64_t aCol, const double *b,
                  int64_t bRow, int64_t bCol, Store &&store) {
  constexpr int MR = 2 * NV, NR = tiled::maxTile<NV>();
  const int64_t blocks = (N + MR - 1) / MR;
  const int64_t rowTiles = (M + NR - 1) / NR;
  // Tasks: column blocks x groups of row tiles (each task packs its block of b once).
  const int64_t groups = std::max<int64_t>(1, std::min<int64_t>(rowTiles, 64 / blocks));
  const int64_t tilesPerGroup = (rowTiles + groups - 1) / groups;
  parallelFor(blocks * groups, 2.0 * double(M * N * K), [&](int64_t task) {
    const int64_t blk = task / groups, grp = task % groups;
    const int64_t j0 = blk * MR;
    const int lanes = int(std::min<int64_t>(MR, N - j0));
    Values bp(size_t(K * MR));
    for (int64_t p = 0; p < K; ++p)
      for (int l = 0; l < MR; ++l)
        bp[size_t(p * MR + l)] = l < lanes ? b[p * bRow + (j0 + l) * bCol] : 0.0;
    const tiled::Tap tap{0, 0};
    double acc[NR * MR];
    for (int64_t t = grp * tilesPerGroup; t < std::min(rowTiles, (grp + 1) * tilesPerGroup); ++t) {
      const int64_t i0 = t * NR;
      const int nr = int(std::min<int64_t>(NR, M - i0));
      std::fill(acc, acc + NR * MR, 0.0);
      tiled::directTileN<NV>(nr, bp.data(), MR, a + i0 * aRow, aCol, K, &tap, 1, aRow, acc);
      for (int q = 0; q < nr; ++q)
        store(i0 + q, j0, lanes, acc + q * MR);
    }
  });
}

template <typename F> void withLanes(int64_t n, F &&f) {
  if (n >= 8)
    f(std::integral_constant<int, 4>());
  else if (n >= 3)
    f(std::integral_constant<int, 2>());
  else
    f(std::integral_constant<int, 1>());
}

Expected<RunFn> buildGemm(const KernelContext &c) {
  auto p = plan::parseGemm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *A = c.in[0], *B = c.in[1], *Ct = c.in.size() > 2 ? c.in[2] : nullptr, *Yt = c.out[0];
  Shape as = shapeOf(*A), ys = shapeOf(*Yt);
  const int64_t M = ys[0], N = ys[1], K = p->transA ? as[0] : as[1];
  std::vector<int64_t> ci = Ct ? broadcastIndex(shapeOf(*Ct), ys) : std::vector<int64_t>();
  auto g = *p;
  return RunFn([=]() {
    Values a = b->read(*A), bb = b->read(*B), cc = Ct ? b->read(*Ct) : Values(), y(size_t(M * N));
    withLanes(N, [&](auto nv) {
      tiledProduct<decltype(nv)::value>(
          M, N, K, a.data(), g.transA ? 1 : K, g.transA ? M : 1, bb.data(), g.transB ? 1 : N, g.transB ? K : 1,
          [&](int64_t i, int64_t j0, int lanes, const double *acc) {
            for (int l = 0; l < lanes; ++l) {
              const int64_t j = j0 + l;
              double v = g.alpha * acc[l];
              if (Ct)
                v += g.beta * cc[size_t(ci[size_t(i * N + j)])];
              y[size_t(i * N + j)] = v;
            }
          });
    });
    b->write(*Yt, y);
    return Status::ok();
  });
}

Expected<RunFn> buildMatmul(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *A = c.in[0], *B = c.in[1], *Yt = c.out[0];
  Shape as = shapeOf(*A), bs = shapeOf(*B);
  Shape pa = as.size() == 1 ? Shape{1, as[0]} : as;
  Shape pb = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  const int64_t M = pa[pa.size() - 2], K = pa.back(), N = pb.back();
  Shape batchA(pa.begin(), pa.end() - 2), batchB(pb.begin(), pb.end() - 2);
  auto batch = shape::broadcast(batchA, batchB);
  if (!batch)
    return Status::error(batch.error);
  auto ia = broadcastIndex(batchA, batch.shape), ib = broadcastIndex(batchB, batch.shape);
  return RunFn([=]() {
    Values a = b->read(*A), bb = b->read(*B), y(ia.size() * size_t(M * N));
    for (size_t t = 0; t < ia.size(); ++t) {
      double *py = y.data() + t * M * N;
      withLanes(N, [&](auto nv) {
        tiledProduct<decltype(nv)::value>(M, N, K, a.data() + ia[t] * M * K, K, 1, bb.data() + ib[t] * K * N, N, 1,
                                          [&](int64_t i, int64_t j0, int lanes, const double *acc) {
                                            std::copy(acc, acc + lanes, py + i * N + j0);
                                          });
      });
    }
    b->write(*Yt, y);
    return Status::ok();
  });
}

Expected<RunFn> buildConcat(const KernelContext &c) {
  Memory *b = &c.backend;
  auto in = c.in;
  const Tensor *y = c.out[0];
  auto split = splitAtAxis(c.kernel, 0, shapeOf(*y));
  if (!split)
    return split.status();
  const int64_t ax = split->axis, outer = split->outer;
  const uint64_t innerBytes = uint64_t(split->inner) * plan::dtypeSize(y->dtype());
  return RunFn([=]() {
    // Read every input first: an output slot may not alias an input, but be safe regardless.
    std::vector<std::vector<uint8_t>> data;
    for (const Tensor *t : in)
      data.emplace_back(b->slot(*t), b->slot(*t) + t->bytes());
    uint8_t *dst = b->slot(*y);
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < in.size(); ++i) {
        uint64_t chunk = uint64_t(in[i]->shape(int(ax))) * innerBytes;
        std::memcpy(dst, data[i].data() + o * chunk, chunk);
        dst += chunk;
      }
    return Status::ok();
  });
}

Expected<RunFn> buildSoftmax(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  auto split = splitAtAxis(c.kernel, -1, shapeOf(*x));
  if (!split)
    return split.status();
  const int64_t outer = split->outer, n = split->n, inner = split->inner;
  return RunFn([=]() {
    Values X = b->read(*x);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j)
          mx = std::max(mx, X[(o * n + j) * inner + i]);
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double &e = X[(o * n + j) * inner + i];
          e = std::exp(e - mx);
          sum += e;
        }
        for (int64_t j = 0; j < n; ++j)
          X[(o * n + j) * inner + i] /= sum;
      }
    b->write(*y, X);
    return Status::ok();
  });
}

// PyTorch's cross_entropy on logits with class-index targets and label smoothing eps:
// loss_n = (1 - eps) * -log p[n, y_n] + eps / C * sum_c -log p[n, c].
Expected<RunFn> buildSoftmaxCrossEntropy(const KernelContext &c) {
  auto p = plan::parseSoftmaxCrossEntropy(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *labels = c.in[1], *loss = c.out[0];
  const Tensor *probs = c.out.size() > 1 ? c.out[1] : nullptr;
  const int64_t N = x->shape(0), C = x->shape(1);
  const double eps = p->labelSmoothing;
  const shape::Reduction reduction = p->reduction;
  return RunFn([=]() {
    Values X = b->read(*x);
    std::vector<int64_t> y = b->readInts(*labels);
    Values perSample(static_cast<size_t>(N)), P(X.size());
    for (int64_t n = 0; n < N; ++n) {
      CASTOR_RETURN_IF_ERROR(checkLabel(y[n], n, C));
      const double *row = X.data() + n * C;
      const double logZ = logSumExp(row, C);
      double nllAll = 0;
      for (int64_t j = 0; j < C; ++j) {
        nllAll += logZ - row[j];
        P[n * C + j] = std::exp(row[j] - logZ);
      }
      perSample[n] = (1 - eps) * (logZ - row[y[n]]) + eps / double(C) * nllAll;
    }
    if (reduction == shape::Reduction::None) {
      b->write(*loss, perSample);
    } else {
      double total = 0;
      for (double v : perSample)
        total += v;
      if (reduction == shape::Reduction::Mean)
        total /= double(N);
      b->write(*loss, Values{total});
    }
    if (probs)
      b->write(*probs, P);
    return Status::ok();
  });
}

// The forward (inference) kernels.
const KernelTable &forwardKernels() {
  static const KernelTable table = {
      {OpId::Conv2d, buildConv2d},
      {OpId::BatchNormTraining, buildBatchNormTraining},
      {OpId::BatchNormInference, buildBatchNormInference},
      {OpId::BatchNormApply, buildBatchNormApply},
      {OpId::Relu, unary([](const Kernel &k) -> Expected<Relu> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return Relu{};
       })},
      {OpId::Sigmoid, unary([](const Kernel &k) -> Expected<Sigmoid> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return Sigmoid{};
       })},
      {OpId::Clip, unary([](const Kernel &k) -> Expected<Clip> {
         auto p = plan::parseClip(k);
         if (!p)
           return p.status();
         return Clip{p->min ? *p->min : -std::numeric_limits<double>::infinity(),
                     p->max ? *p->max : std::numeric_limits<double>::infinity()};
       })},
      {OpId::HardSigmoid, unary([](const Kernel &k) -> Expected<HardSigmoid> {
         auto p = plan::parseHardSigmoid(k);
         if (!p)
           return p.status();
         return HardSigmoid{p->alpha, p->beta};
       })},
      {OpId::HardSwish, unary([](const Kernel &k) -> Expected<HardSwish> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return HardSwish{};
       })},
      {OpId::Erf, unary([](const Kernel &k) -> Expected<Erf> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return Erf{};
       })},
      {OpId::Gelu, unary([](const Kernel &k) -> Expected<Gelu> {
         auto p = plan::parseGelu(k);
         if (!p)
           return p.status();
         return Gelu{p->tanh};
       })},
      {OpId::Add, binary([](double a, double b) { return a + b; })},
      {OpId::Mul, binary([](double a, double b) { return a * b; })},
      {OpId::MaxPool2d, [](const KernelContext &c) { return buildPool(c, true); }},
      {OpId::AvgPool2d, [](const KernelContext &c) { return buildPool(c, false); }},
      {OpId::GlobalAvgPool, buildGlobalAvgPool},
      {OpId::Flatten,
       [](const KernelContext &c) -> Expected<RunFn> {
         auto axis = plan::parseAxis(c.kernel, 1);
         if (!axis)
           return axis.status();
         return convertCopy(c);
       }},
      {OpId::Reshape,
       [](const KernelContext &c) -> Expected<RunFn> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
         return convertCopy(c);
       }},
      {OpId::Identity,
       [](const KernelContext &c) -> Expected<RunFn> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
         return convertCopy(c);
       }},
      {OpId::Cast,
       [](const KernelContext &c) -> Expected<RunFn> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
         return convertCopy(c);
       }},
      {OpId::Gemm, buildGemm},
      {OpId::Matmul, buildMatmul},
      {OpId::Concat, buildConcat},
      {OpId::Softmax, buildSoftmax},
      {OpId::SoftmaxCrossEntropy, buildSoftmaxCrossEntropy},
  };
  return table;
}

} // namespace

const KernelTable &cpuKernels() {
  static const KernelTable table = KernelTable(forwardKernels())
                                         .merge(trainingKernels())
                                         .merge(mixedPrecisionKernels())
                                         .merge(fusedKernels())
                                         .merge(layoutKernels())
                                         .merge(layerNormKernels())
                                         .merge(attentionKernels())
                                         .merge(replicaKernels());
  return table;
}

} // namespace cpu

std::vector<plan::OpId> cpuBackendOps() { return cpu::cpuKernels().implemented(); }

std::unique_ptr<Backend> createCpuBackend(const BackendOptions &options) {
  return std::make_unique<cpu::CpuBackend>(options);
}

} // namespace castor
