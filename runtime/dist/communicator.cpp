#include "dist/communicator.h"

namespace castor::dist {

size_t reducibleDTypeSize(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return 4;
  case plan::F64:
  case plan::I64:
    return 8;
  case plan::F16:
  case plan::BF16:
    return 2;
  default:
    return 0;
  }
}

const char *reduceOpName(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "max"; }

Status LocalCommunicator::allReduce(void *, size_t, plan::DType dtype, ReduceOp) {
  // Refuse what a real communicator would, so that a one-replica run catches it too.
  if (reducibleDTypeSize(dtype) == 0)
    return Status::error("all_reduce over " + plan::dtypeName(dtype) + ": only f32, f64, f16, bf16 and i64 reduce");
  return Status::ok();
}

Status LocalCommunicator::broadcast(void *, size_t, int root) {
  if (root != 0)
    return Status::error("broadcast from replica " + std::to_string(root) + " in a job of 1 replica");
  return Status::ok();
}

} // namespace castor::dist
