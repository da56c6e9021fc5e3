// Copies of forward values for the backward readers of a training step: the rewrite that
// castor-recompute (after fusion, by policy) and castor-recompute-elementwise (before fusion,
// into the backward's element-wise groups) share.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <vector>

namespace castor {

// The ops of `f`'s single block, in order.
std::vector<mlir::Operation *> opsOf(mlir::func::FuncOp f);

// Result `result` of the `op`-th op of the block (an index, so that it names the same value in a
// clone of the function).
struct RecomputedValue {
  size_t op;
  unsigned result;
};

// Rewrites `f` so that every backward reader (an op after `boundary`) of a value in `values`
// reads a copy (RecomputeOpInterface::buildRecompute, marked castor.recomputed) computed just
// before the first such reader; returns the flops the copies add. A copy's operand is copied too
// when it is in `values`, or when it is a cheap forward value that nothing in the backward reads
// (copying it keeps it from living on for the copy).
int64_t recomputeInBackward(mlir::func::FuncOp f, size_t boundary, const std::vector<RecomputedValue> &values);

} // namespace castor
