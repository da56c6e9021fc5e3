// Host collectives over TCP in a star through replica 0: every replica connects to replica 0,
// which combines the buffers in rank order and sends the result back. Simple and deterministic;
// its traffic through replica 0 grows with the replicas, which suits the CPU backend and the
// bootstrap of NCCL, not the gradients of many GPUs (those go through NCCL).
//
// Every wait is bounded: a replica that closes or stalls turns into an error naming it on the
// others (runtime/dist/README.md: the protocol, the timeouts). After an error the communicator
// is closed and every later call returns that error again.
#pragma once

#include "dist/communicator.h"
#include "dist/launch_env.h"
#include "dist/peer_link.h"

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

namespace castor::dist {

class TcpCommunicator final : public Communicator {
public:
  // Replica 0 listens on env.masterPort, the others connect to env.masterAddr:masterPort
  // (retrying until replica 0 listens). Returns once all env.worldSize replicas have joined, or
  // fails within `timeout` (twice that for a replica waiting on replica 0) naming the missing.
  // `timeout` also bounds every later wait on another replica.
  static Expected<std::unique_ptr<TcpCommunicator>> connect(const ReplicaEnv &env, std::chrono::milliseconds timeout);

  int rank() const override { return rank_; }
  int worldSize() const override { return worldSize_; }
  Status allReduce(void *data, size_t count, plan::DType dtype, ReduceOp op) override;
  Status broadcast(void *data, size_t bytes, int root) override;
  Status barrier() override;

private:
  TcpCommunicator(int rank, int worldSize, std::chrono::milliseconds timeout)
      : rank_(rank), worldSize_(worldSize), timeout_(timeout) {}

  Status startAsRoot(const ReplicaEnv &env);
  Status startAsReplica(const ReplicaEnv &env);

  // The steps every collective shares: check the call against the others', then move the data.
  Status run(const wire::CallPayload &call, void *data);
  Status rootAgree(const wire::CallPayload &call, const char *during);
  Status rootAllReduce(const wire::CallPayload &call, void *data, const char *during);
  Status rootBroadcast(const wire::CallPayload &call, void *data, const char *during);
  Status replicaRun(const wire::CallPayload &call, void *data, const char *during);

  // Closes every link and keeps `error` for later calls. Replica 0 first tells the others why,
  // when `tellReplicas` (only where no frame to them is half sent).
  Status fail(Status error, bool tellReplicas);
  PeerLink &linkTo(int peerRank);

  int rank_, worldSize_;
  std::chrono::milliseconds timeout_;
  // Replica 0: one link per other replica, in rank order. The others: one link, to replica 0.
  std::vector<PeerLink> links_;
  uint64_t sequence_ = 0; // collectives called so far
  std::optional<Status> broken_;
};

} // namespace castor::dist
