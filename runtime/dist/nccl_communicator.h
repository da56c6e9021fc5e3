// All-reduce of device memory between the replicas' GPUs through NCCL (CUDA builds only).
//
// The communicator is non-blocking (ncclConfig_t::blocking = 0): NCCL's start-up and every
// call return at once and are then polled, so that a replica that never joins, or dies, ends in
// an error after a timeout (and abort()) rather than a hang. The order of the sum is NCCL's
// (rings, trees), not the rank order of the TCP communicator.
#pragma once

#include "dist/communicator.h"
#include "dist/launch_env.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>

struct ncclComm; // nccl.h's communicator, kept out of this header

namespace castor::dist {

class NcclCommunicator {
public:
  // Replica 0 makes NCCL's unique id and broadcasts it over `bootstrap` (a TcpCommunicator);
  // every replica then joins the NCCL communicator on CUDA device `device`, waiting at most
  // `timeout` for all to join.
  static Expected<std::unique_ptr<NcclCommunicator>> create(const ReplicaEnv &env, Communicator &bootstrap, int device,
                                                            std::chrono::milliseconds timeout = std::chrono::minutes(2));
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }

  // Enqueues an in-place all-reduce of `count` values at `deviceData` on `stream` (F32, F64,
  // F16, BF16, I64; NCCL adds f16/bf16 in their own precision).
  Status allReduce(void *deviceData, size_t count, plan::DType dtype, ReduceOp op, cudaStream_t stream);
  // Waits until `stream` has run its work, watching NCCL for errors; aborts the communicator
  // and fails when a peer's error surfaces or `timeout` passes first.
  Status synchronize(cudaStream_t stream, std::chrono::milliseconds timeout);
  // Tears the communicator down at once, whatever is in flight (after an error, or a peer lost).
  void abort();

private:
  NcclCommunicator(int rank, int worldSize, std::chrono::milliseconds timeout)
      : rank_(rank), worldSize_(worldSize), timeout_(timeout) {}
  // Polls NCCL until the last call has been taken in, failing (and aborting) on error or timeout.
  Status settle(const char *during);

  int rank_, worldSize_;
  std::chrono::milliseconds timeout_;
  ncclComm *comm_ = nullptr;
};

} // namespace castor::dist
