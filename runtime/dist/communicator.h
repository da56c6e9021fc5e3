// Collectives between the replicas of a data-parallel job, over host memory (the CPU backend's
// gradients; the bootstrap of NCCL). One process per replica; every replica calls the same
// collectives in the same order with the same sizes. Not thread-safe: one collective at a time.
#pragma once

#include "castor/status.h"
#include "plan/plan.h"

#include <cstddef>
#include <string>

namespace castor::dist {

enum class ReduceOp { Sum, Max };

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;

  // Replaces `data` (count values of dtype: F32, F64, F16, BF16 or I64) on every replica with
  // the elementwise reduction over the replicas. Sum adds in rank order, ((r0 + r1) + r2) + ...,
  // at one place and sends that result to all: the same bits on every replica, run after run.
  // F16 and BF16 add in f32 and round once at the end (to nearest, ties to even); I64 wraps.
  // Max propagates NaN.
  virtual Status allReduce(void *data, size_t count, plan::DType dtype, ReduceOp op) = 0;

  // Copies `bytes` bytes at `data` on replica `root` to `data` on every replica.
  virtual Status broadcast(void *data, size_t bytes, int root) = 0;

  // Returns once every replica has called it.
  virtual Status barrier() = 0;
};

// A replica alone: every collective leaves the data as it is.
class LocalCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  Status allReduce(void *data, size_t count, plan::DType dtype, ReduceOp op) override;
  Status broadcast(void *data, size_t bytes, int root) override;
  Status barrier() override { return Status::ok(); }
};

// Bytes per value of the dtypes the collectives take; 0 for any other.
size_t reducibleDTypeSize(plan::DType dtype);
const char *reduceOpName(ReduceOp op);

} // namespace castor::dist
