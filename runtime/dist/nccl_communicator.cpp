#include "dist/nccl_communicator.h"

#include "dist/socket_io.h"

#include <nccl.h>

#include <thread>

namespace castor::dist {

namespace {

Expected<ncclDataType_t> ncclType(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return ncclFloat32;
  case plan::F64:
    return ncclFloat64;
  case plan::F16:
    return ncclFloat16;
  case plan::BF16:
    return ncclBfloat16;
  case plan::I64:
    return ncclInt64;
  default:
    return Status::error("NCCL all_reduce over " + plan::dtypeName(dtype) + ": only f32, f64, f16, bf16 and i64 reduce");
  }
}

std::string ncclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char *last = comm ? ncclGetLastError(comm) : nullptr;
  if (last && *last)
    text += std::string(" (") + last + ")";
  return text;
}

} // namespace

Expected<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(const ReplicaEnv &env, Communicator &bootstrap,
                                                                      int device, std::chrono::milliseconds timeout) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    return Status::error("replica " + std::to_string(env.rank) + " cannot use CUDA device " + std::to_string(device) +
                         ": " + cudaGetErrorString(e));
  ncclUniqueId id{};
  if (env.rank == 0)
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      return Status::error("ncclGetUniqueId: " + ncclText(r, nullptr));
  CASTOR_RETURN_IF_ERROR(bootstrap.broadcast(&id, sizeof id, 0).withContext("sending NCCL's unique id"));

  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(env.rank, env.worldSize, timeout));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; // start-up returns at once; settle() polls it with a timeout
  ncclComm_t handle = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&handle, env.worldSize, id, env.rank, &config);
  comm->comm_ = handle;
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string text = ncclText(r, handle);
    comm->abort();
    return Status::error("ncclCommInitRankConfig on replica " + std::to_string(env.rank) + ": " + text);
  }
  CASTOR_RETURN_IF_ERROR(comm->settle("NCCL start-up"));
  return comm;
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm_)
    return;
  // Finalize flushes what is in flight; if that fails or does not end in time, abort instead.
  ncclResult_t r = ncclCommFinalize(comm_);
  if (r != ncclSuccess && r != ncclInProgress) {
    abort();
    return;
  }
  if (!settle("NCCL shut-down"))
    return; // settle() aborted it
  ncclCommDestroy(comm_);
  comm_ = nullptr;
}

Status NcclCommunicator::settle(const char *during) {
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess)
      state = r;
    if (state == ncclSuccess)
      return Status::ok();
    if (state != ncclInProgress) {
      std::string text = ncclText(state, comm_);
      abort();
      return Status::error("replica " + std::to_string(rank_) + ": " + during + " failed: " + text);
    }
    if (Clock::now() >= deadline) {
      abort();
      return Status::error("replica " + std::to_string(rank_) + ": " + during + " did not finish within " +
                           secondsText(timeout_) + " (a replica missing or stopped?); communicator aborted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status NcclCommunicator::allReduce(void *deviceData, size_t count, plan::DType dtype, ReduceOp op,
                                   cudaStream_t stream) {
  if (!comm_)
    return Status::error("NCCL all_reduce on an aborted communicator");
  auto type = ncclType(dtype);
  if (!type)
    return type.status();
  ncclResult_t r = ncclAllReduce(deviceData, deviceData, count, *type, op == ReduceOp::Sum ? ncclSum : ncclMax, comm_,
                                 stream);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string text = ncclText(r, comm_);
    abort();
    return Status::error("ncclAllReduce on replica " + std::to_string(rank_) + ": " + text);
  }
  return settle("NCCL all_reduce");
}

Status NcclCommunicator::synchronize(cudaStream_t stream, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return Status::ok();
    if (e != cudaErrorNotReady)
      return Status::error("replica " + std::to_string(rank_) + ": the stream failed: " + cudaGetErrorString(e));
    if (comm_) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
        std::string text = ncclText(state, comm_);
        abort();
        return Status::error("replica " + std::to_string(rank_) + ": NCCL failed: " + text);
      }
    }
    if (Clock::now() >= deadline) {
      abort();
      return Status::error("replica " + std::to_string(rank_) + ": the stream did not finish within " +
                           secondsText(timeout) + " (a replica stopped in a collective?); NCCL communicator aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void NcclCommunicator::abort() {
  if (comm_)
    ncclCommAbort(comm_);
  comm_ = nullptr;
}

} // namespace castor::dist
