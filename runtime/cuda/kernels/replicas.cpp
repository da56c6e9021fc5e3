// all_reduce on the CUDA backend: each tensor reduced in place across the replicas' GPUs by
// NCCL (BackendOptions::deviceReplicas) on a communication stream beside the step's, so that the
// rest of the backward runs meanwhile; a mean then scales by 1/replicas.
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
  // On the communication stream, so that the rest of the backward overlaps it: it starts when
  // the step's stream reaches it and ends with `done`, which the first kernel that reads one of
  // its tensors waits for (DeviceContext::pendingWrites).
  if (!ctx.commStream) {
    int least = 0, greatest = 0;
    CASTOR_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CASTOR_CUDA(cudaStreamCreateWithPriority(&ctx.commStream, cudaStreamNonBlocking, greatest));
  }
  struct Events {
    cudaEvent_t ready = nullptr, done = nullptr;
    ~Events() {
      for (cudaEvent_t e : {ready, done})
        if (e)
          cudaEventDestroy(e);
    }
  };
  auto events = std::make_shared<Events>();
  CASTOR_CUDA(cudaEventCreateWithFlags(&events->ready, cudaEventDisableTiming));
  CASTOR_CUDA(cudaEventCreateWithFlags(&events->done, cudaEventDisableTiming));
  for (const Tensor *t : out)
    ctx.pendingWrites[t->id()] = events->done;
  DeviceContext *c = &ctx;
  const std::vector<const Tensor *> tensors(in.begin(), in.end());
  const plan::ReplicaReduction reduction = p->reduction;
  return RunFn([c, tensors, reduction, events]() -> Status {
    dist::NcclCommunicator &replicas = *c->replicas;
    const cudaStream_t comm = c->commStream;
    CASTOR_CUDA(cudaEventRecord(events->ready, c->stream));
    CASTOR_CUDA(cudaStreamWaitEvent(comm, events->ready, 0));
    const dist::ReduceOp op = reduction == plan::ReplicaReduction::Max ? dist::ReduceOp::Max : dist::ReduceOp::Sum;
    for (const Tensor *t : tensors) {
      const int64_t n = int64_t(*plan::elementCount(*t));
      CASTOR_RETURN_IF_ERROR(replicas.allReduce(c->ptr(t), size_t(n), t->dtype(), op, comm)
                                 .withContext("all_reduce of " + t->name()));
      if (reduction == plan::ReplicaReduction::Mean)
        CASTOR_RETURN_IF_ERROR(cudaStatus(
            broadcastScaled(c->ref(t), c->ref(t), Broadcast{}, n, 1.0 / double(replicas.worldSize()), comm),
            "all_reduce mean"));
    }
    CASTOR_CUDA(cudaEventRecord(events->done, comm));
    return Status::ok();
  });
#else
  return Status::error("all_reduce across several GPUs needs NCCL, which this build did not find (nccl.h, libnccl)");
#endif
}

} // namespace castor::cuda::own
