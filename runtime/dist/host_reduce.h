// The arithmetic of a host all-reduce, apart from any transport: one replica's values combined
// with the others' in rank order, so that every run and every replica get the same bits.
#pragma once

#include "dist/communicator.h"

#include <vector>

namespace castor::dist {

// inout[i] = op(op(op(inout[i], others[0][i]), others[1][i]), ...) for i < count: inout holds
// rank 0's values, others those of ranks 1, 2, ... in order. F16/BF16 accumulate in f32 and
// round once; I64 sums wrap. `dtype` must be one reducibleDTypeSize() knows.
void reduceInRankOrder(void *inout, const std::vector<const void *> &others, size_t count, plan::DType dtype,
                       ReduceOp op);

} // namespace castor::dist
