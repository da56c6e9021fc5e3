// Internals of the CPU reference backend shared by its kernel files (not a public header).
#pragma once

#include "castor/shape_rules.h"
#include "castor/status.h"
#include "plan/plan.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace castor::cpu {

using plan::Kernel;
using plan::Tensor;
using shape::Shape;

using Values = std::vector<double>;
using RunFn = std::function<Status()>;

// The arena, with element access in double precision (reads widen exactly; writes round once
// to nearest even into the tensor's dtype; i64 writes truncate toward zero).
class Memory {
public:
  uint8_t *slot(const Tensor &t) { return arena_.data() + t.offset(); }
  Values read(const Tensor &t);
  void write(const Tensor &t, const Values &v);
  std::vector<int64_t> readInts(const Tensor &t);
  void writeInts(const Tensor &t, const std::vector<int64_t> &v);

protected:
  std::vector<uint8_t> arena_;
};

// What a kernel builder sees: the arena and the kernel's resolved operands.
struct KernelContext {
  Memory &backend;
  const Kernel &kernel;
  std::vector<const Tensor *> in, out;
};

using Builder = std::function<Expected<RunFn>(const KernelContext &)>;

// Kernels of the training step (backward, optimizer, schedule): training_kernels.cpp.
const std::map<std::string, Builder> &trainingBuilders();

// Kernels of mixed-precision training (loss scaling, gradient clipping, gradient statistics) and
// the overflow-flag forms of sgd_update, adamw_update and increment, which take precedence over
// trainingBuilders(): mixed_precision_kernels.cpp.
const std::map<std::string, Builder> &mixedPrecisionBuilders();

inline Shape shapeOf(const Tensor &t) { return Shape(t.shape().begin(), t.shape().end()); }
inline int64_t countOf(const Tensor &t) { return *plan::elementCount(t); }

// Maps each flat index of `out` to the flat index of `in` broadcast against it (numpy rules).
std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out);
// Product of dims [from, to).
int64_t span(const Shape &s, size_t from, size_t to);

} // namespace castor::cpu
