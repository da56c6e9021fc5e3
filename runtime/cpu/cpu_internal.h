// Internals of the CPU reference backend shared by its kernel files (not a public header).
#pragma once

#include "castor/shape_rules.h"
#include "castor/status.h"
#include "plan/op_registry.h"
#include "plan/plan.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <string>
#include <vector>

namespace castor::dist {
class Communicator;
}

namespace castor::cpu {

using plan::Kernel;
using plan::OpId;
using plan::Tensor;
using shape::Shape;

// Large kernel buffers come from a small cache of freed blocks of the same size: a training step
// allocates the same sizes every step, and fresh pages from the system cost more than the
// memory-bound kernels themselves.
void *scratchAllocate(size_t bytes);
void scratchFree(void *p, size_t bytes);

template <typename T> struct ScratchAllocator {
  using value_type = T;
  // false (unsetValues): new elements are left unset rather than zeroed, for buffers written
  // whole before they are read; zeroing them cost more than some kernels.
  bool zero = true;
  ScratchAllocator() = default;
  explicit ScratchAllocator(bool zeroFill) : zero(zeroFill) {}
  template <typename U> ScratchAllocator(const ScratchAllocator<U> &o) : zero(o.zero) {}
  template <typename U> void construct(U *p) {
    if (zero)
      ::new (static_cast<void *>(p)) U();
    else
      ::new (static_cast<void *>(p)) U;
  }
  template <typename U, typename A, typename... Rest> void construct(U *p, A &&a, Rest &&...rest) {
    ::new (static_cast<void *>(p)) U(std::forward<A>(a), std::forward<Rest>(rest)...);
  }
  T *allocate(size_t n) { return static_cast<T *>(scratchAllocate(n * sizeof(T))); }
  void deallocate(T *p, size_t n) { scratchFree(p, n * sizeof(T)); }
  template <typename U> bool operator==(const ScratchAllocator<U> &) const { return true; }
  template <typename U> bool operator!=(const ScratchAllocator<U> &) const { return false; }
};

using Values = std::vector<double, ScratchAllocator<double>>;
// n doubles left unset: every one must be written before it is read.
inline Values unsetValues(size_t n) { return Values(n, ScratchAllocator<double>(false)); }
using RunFn = std::function<Status()>;

// The arena, with element access in double precision (reads widen exactly; writes round once
// to nearest even into the tensor's dtype; i64 writes truncate toward zero).
class Memory {
public:
  uint8_t *slot(const Tensor &t) {
    if (!staged_.empty())
      if (auto it = staged_.find(t.id()); it != staged_.end())
        return it->second;
    return arena_.data() + t.offset();
  }
  Values read(const Tensor &t);
  void write(const Tensor &t, const Values &v);
  // Elements [begin, begin + n) of a tensor, converted as read()/write() do.
  void readRange(const Tensor &t, int64_t begin, int64_t n, double *dst);
  void writeRange(const Tensor &t, int64_t begin, int64_t n, const double *src);
  std::vector<int64_t> readInts(const Tensor &t);
  void writeInts(const Tensor &t, const std::vector<int64_t> &v);

  // Tensors whose arena bytes are in channels-last order (channels_last.cpp) and, while a kernel
  // that reads or writes them runs, the row-major copies slot() hands out instead.
  std::unordered_set<uint32_t> channelsLast;
  std::unordered_map<uint32_t, uint8_t *> staged_;

protected:
  std::vector<uint8_t> arena_;
};


// What a kernel builder sees: the arena and the kernel's resolved operands.
struct KernelContext {
  Memory &backend;
  const Kernel &kernel;
  std::vector<const Tensor *> in, out;
  dist::Communicator *replicas = nullptr; // BackendOptions::replicas
};

// The CPU reference stores a transposed view's [N,C,H,W] side channels-last, as the CUDA backend
// does (plan/storage_order.h), so that the view's kernel moves nothing. Every other kernel
// computes on row-major data: stageChannelsLast wraps one that reads or writes such a tensor
// (Memory::channelsLast) so that it sees a row-major copy, converted in before and out after.
RunFn stageChannelsLast(Memory &memory, const KernelContext &c, RunFn run);

using Builder = std::function<Expected<RunFn>(const KernelContext &)>;

// The CPU kernel of each op, keyed by the registry's OpId (plan/ops.def).
using KernelTable = plan::OpTable<Builder>;

// The CPU kernel of each op, one table per op family, each in the file of its name: forward and
// backward kernels together.
const KernelTable &elementwiseKernels(); // elementwise.cpp: unary, binary, copies, dropout, fill
const KernelTable &reduceKernels();      // reduce.cpp: reduce_sum_to
const KernelTable &poolingKernels();     // pooling.cpp: max, average, global average
const KernelTable &lossKernels();        // loss.cpp: softmax, cross-entropy, count_correct
const KernelTable &optimizerKernels();   // optimizer.cpp: sgd, adamw, schedule, loss scaling, clipping
const KernelTable &batchNormKernels();   // batch_norm.cpp
const KernelTable &convolutionKernels(); // convolution.cpp
const KernelTable &matmulKernels();      // matmul.cpp: gemm, matmul
const KernelTable &layoutKernels();      // layout.cpp: transpose, slice, concat, split
const KernelTable &layerNormKernels();   // layer_norm.cpp
const KernelTable &attentionKernels();   // attention.cpp
// The fused kernels, each composed of the kernels of the group it replaces: fused.cpp.
const KernelTable &fusedKernels();
// fused_elementwise, its program run element by element: fused_elementwise.cpp.
const KernelTable &fusedElementwiseKernels();
// all_reduce across the replicas of a data-parallel run: replicas.cpp.
const KernelTable &replicaKernels();

// Every kernel of the CPU backend: the tables above merged (cpu_backend.cpp).
const KernelTable &cpuKernels();

// `v` rounded to `dtype` as a write to a tensor of that dtype would round it, back as a double.
double roundToDtype(double v, plan::DType dtype);

inline Shape shapeOf(const Tensor &t) { return Shape(t.shape().begin(), t.shape().end()); }
inline int64_t countOf(const Tensor &t) { return *plan::elementCount(t); }

inline double scalar(Memory *b, const Tensor *t) { return b->read(*t)[0]; }
inline int64_t scalarInt(Memory *b, const Tensor *t) { return b->readInts(*t)[0]; }

// Maps each flat index of `out` to the flat index of `in` broadcast against it (numpy rules).
std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out);
// Product of dims [from, to).
int64_t span(const Shape &s, size_t from, size_t to);

// A shape seen as [outer, n, inner] around the kernel's "axis" attribute (`fallback` when
// absent); axis is normalized to [0, rank).
struct AxisSplit {
  int64_t axis, outer, n, inner;
};
Expected<AxisSplit> splitAtAxis(const Kernel &k, int64_t fallback, const Shape &s);

// A tensor [N, C, spatial...] seen channel by channel: each channel is N slices of `inner`
// elements.
struct Channels {
  int64_t N, C, inner;
  explicit Channels(const Shape &s) : N(s[0]), C(s[1]), inner(span(s, 2, s.size())) {}
  // Channel ch of t, gathered into dst[0, N * inner) / scattered from src.
  void read(Memory *b, const Tensor &t, int64_t ch, double *dst) const {
    for (int64_t n = 0; n < N; ++n)
      b->readRange(t, (n * C + ch) * inner, inner, dst + n * inner);
  }
  void write(Memory *b, const Tensor &t, int64_t ch, const double *src) const {
    for (int64_t n = 0; n < N; ++n)
      b->writeRange(t, (n * C + ch) * inner, inner, src + n * inner);
  }
};

// Class labels: an error for a label of sample n outside [0, C).
Status checkLabel(int64_t label, int64_t n, int64_t C);
// log(sum_j exp(row[j])) for j in [0, C), shifted by the row's maximum.
double logSumExp(const double *row, int64_t C);

// For each output position o in [0, outSize): the window taps k in [lo, hi) of a sliding window
// (start o * stride - pad, tap k at start + k * dilation, `taps` taps) that fall inside
// [0, inSize). The valid taps of a window are contiguous.
std::vector<std::pair<int64_t, int64_t>> windowRanges(int64_t outSize, int64_t inSize, int64_t taps, int64_t stride,
                                                      int64_t pad, int64_t dilation);

// take ? a : b, without a branch (the max-pool comparisons on real data are unpredictable).
inline double selectBits(bool take, double a, double b) {
  uint64_t ua, ub;
  std::memcpy(&ua, &a, 8);
  std::memcpy(&ub, &b, 8);
  const uint64_t m = uint64_t(0) - uint64_t(take);
  const uint64_t r = (ua & m) | (ub & ~m);
  double out;
  std::memcpy(&out, &r, 8);
  return out;
}

// Worker threads for one kernel: CASTOR_CPU_THREADS when set (>= 1), else the hardware
// concurrency.
int cpuThreads();

// Runs body(i) for every i in [0, tasks), spread over up to cpuThreads() threads when the total
// work (about `work` scalar operations) is worth it. Tasks must write disjoint outputs and
// compute each output entirely within one task: results then do not depend on the thread count.
// The first exception thrown by a task is rethrown here.
void parallelFor(int64_t tasks, double work, const std::function<void(int64_t)> &body);

// Runs body(begin, count) over [0, n) in chunks of at most kChunk elements, in parallel when n
// is large; `opsPerElement` scales the work estimate.
constexpr int64_t kChunk = 4096;
void parallelChunks(int64_t n, double opsPerElement, const std::function<void(int64_t, int64_t)> &body);

// z = op(x, y) elementwise for operands of one shape, chunk by chunk (an in-place update reads
// each chunk before writing it).
template <typename Op> RunFn sameShapeBinaryRun(Memory *b, const Tensor *x, const Tensor *y, const Tensor *z, Op op) {
  return RunFn([=]() {
    parallelChunks(countOf(*z), 4.0, [&](int64_t i0, int64_t n) {
      double u[kChunk], v[kChunk];
      b->readRange(*x, i0, n, u);
      b->readRange(*y, i0, n, v);
      for (int64_t i = 0; i < n; ++i)
        u[i] = op(u[i], v[i]);
      b->writeRange(*z, i0, n, u);
    });
    return Status::ok();
  });
}

} // namespace castor::cpu
