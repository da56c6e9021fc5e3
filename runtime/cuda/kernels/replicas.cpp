// all_reduce on the CUDA backend: each tensor reduced in place across the replicas' GPUs by
// NCCL on the step's stream (BackendOptions::deviceReplicas); a mean then scales by 1/replicas.
// Without a communicator the run is one replica and the kernel does nothing. NCCL's sum order is
// its own (rings, trees): replicas agree with each other bit for bit, not with the CPU's
// rank-order sum.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/elementwise.h"
#include "plan/op_attrs.h"

#ifdef CASTOR_HAVE_NCCL
#include "dist/nccl_communicator.h"
#endif

namespace castor::cuda::own {

Expected<RunFn> buildAllReduce(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  auto p = plan::parseAllReduce(k);
  if (!p)
    return p.status();
  if (!ctx.replicas)
    return RunFn([]() { return Status::ok(); }); // one replica: nothing to reduce
#ifdef CASTOR_HAVE_NCCL
  DeviceContext *c = &ctx;
  const std::vector<const Tensor *> tensors(in.begin(), in.end());
  const plan::ReplicaReduction reduction = p->reduction;
  return RunFn([c, tensors, reduction]() -> Status {
    dist::NcclCommunicator &replicas = *c->replicas;
    const dist::ReduceOp op = reduction == plan::ReplicaReduction::Max ? dist::ReduceOp::Max : dist::ReduceOp::Sum;
    for (const Tensor *t : tensors) {
      const int64_t n = int64_t(*plan::elementCount(*t));
      CASTOR_RETURN_IF_ERROR(replicas.allReduce(c->ptr(t), size_t(n), t->dtype(), op, c->stream)
                                 .withContext("all_reduce of " + t->name()));
      if (reduction == plan::ReplicaReduction::Mean)
        CASTOR_RETURN_IF_ERROR(cudaStatus(
            broadcastScaled(c->ref(t), c->ref(t), Broadcast{}, n, 1.0 / double(replicas.worldSize()), c->stream),
            "all_reduce mean"));
    }
    return Status::ok();
  });
#else
  return Status::error("all_reduce across several GPUs needs NCCL, which this build did not find (nccl.h, libnccl)");
#endif
}

} // namespace castor::cuda::own
