// The runtime's one list of ops (ops.def) as an enum, with name lookup and per-op tables.
//
// Everything that dispatches on an op — the plan validator, the CPU reference backend, the CUDA
// backend, its launch functions — keys on OpId; the op's name appears only in ops.def. Plain C++
// without protobuf, so the CUDA kernels (.cu) include it too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace castor::plan {

enum class OpId : uint16_t {
#define CASTOR_OP(id, name, category) id,
#include "plan/ops.def"
#undef CASTOR_OP
};

inline constexpr size_t kOpCount = 0
#define CASTOR_OP(id, name, category) +1
#include "plan/ops.def"
#undef CASTOR_OP
    ;

// What kind of work an op is, for the kernel-time breakdown of `castor-run bench`.
enum class OpCategory : uint8_t { Convolution, BatchNorm, Matmul, Elementwise, Optimizer, Scaler, Communication, Other };

// The op named `name` in a plan, or nothing when the runtime has no such op.
std::optional<OpId> opFromName(std::string_view name);
std::string_view opName(OpId op);
OpCategory opCategory(OpId op);
// "conv", "batch_norm", "matmul", "elementwise", "optimizer", "scaler", "other".
std::string_view categoryName(OpCategory category);
// Whether `op` is one of the fused ops (ops.def's last section: each replaces a group of ops).
bool isFusedOp(OpId op);
// Every op, in the order of ops.def.
std::vector<OpId> allOps();

// One optional entry per op: a validator rule, a kernel builder. An op without an entry is one
// the table's owner does not implement (implemented() lists the others, for the coverage test).
template <class T> class OpTable {
public:
  OpTable(std::initializer_list<std::pair<OpId, T>> entries) {
    for (const auto &[op, value] : entries)
      add(op, value);
  }
  // Adds the entries of `other`; an op may have one entry only.
  OpTable &merge(const OpTable &other) {
    for (size_t i = 0; i < kOpCount; ++i)
      if (other.entries_[i])
        add(OpId(i), *other.entries_[i]);
    return *this;
  }
  const T *find(OpId op) const {
    const auto &e = entries_[size_t(op)];
    return e ? &*e : nullptr;
  }
  std::vector<OpId> implemented() const {
    std::vector<OpId> ops;
    for (size_t i = 0; i < kOpCount; ++i)
      if (entries_[i])
        ops.push_back(OpId(i));
    return ops;
  }

private:
  void add(OpId op, const T &value) {
    auto &e = entries_[size_t(op)];
    if (e) { // Two entries for one op is a bug in a static table: stop at start-up.
      std::fprintf(stderr, "castor: two table entries for op '%.*s'\n", int(opName(op).size()),
                   opName(op).data());
      std::abort();
    }
    e = value;
  }
  std::array<std::optional<T>, kOpCount> entries_{};
};

} // namespace castor::plan
