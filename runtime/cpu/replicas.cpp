// all_reduce on the CPU backend: each tensor's bytes handed to the run's communicator
// (BackendOptions::replicas), which sums (or takes the max) across the replicas in rank order;
// a mean then divides by the number of replicas. Without a communicator the run is one replica.
#include "cpu/cpu_internal.h"
#include "dist/communicator.h"
#include "plan/op_attrs.h"

namespace castor::cpu {
namespace {

using plan::OpId;
using plan::ReplicaReduction;

Expected<RunFn> buildAllReduce(const KernelContext &c) {
  auto p = plan::parseAllReduce(c.kernel);
  if (!p)
    return p.status();
  Memory *memory = &c.backend;
  dist::Communicator *replicas = c.replicas;
  const std::vector<const Tensor *> tensors = c.in;
  const ReplicaReduction reduction = p->reduction;
  return RunFn([=]() -> Status {
    if (!replicas || replicas->worldSize() == 1)
      return Status::ok();
    const dist::ReduceOp op = reduction == ReplicaReduction::Max ? dist::ReduceOp::Max : dist::ReduceOp::Sum;
    for (const Tensor *t : tensors) {
      auto count = plan::elementCount(*t);
      CASTOR_RETURN_IF_ERROR(replicas->allReduce(memory->slot(*t), size_t(*count), t->dtype(), op)
                                 .withContext("all_reduce of " + t->name()));
      if (reduction == ReplicaReduction::Mean) {
        Values v = memory->read(*t);
        const double n = double(replicas->worldSize());
        for (double &e : v)
          e /= n;
        memory->write(*t, v);
      }
    }
    return Status::ok();
  });
}

} // namespace

const KernelTable &replicaKernels() {
  static const KernelTable table = {{OpId::AllReduce, buildAllReduce}};
  return table;
}

} // namespace castor::cpu
