#include "dist/tcp_communicator.h"

#include "dist/host_reduce.h"

#include <algorithm>
#include <cstring>

namespace castor::dist {

namespace {
constexpr const char *kStartUp = "start-up";

std::string ranksText(const std::vector<int> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return (ranks.size() == 1 ? "replica " : "replicas ") + text;
}
} // namespace

Expected<std::unique_ptr<TcpCommunicator>> TcpCommunicator::connect(const ReplicaEnv &env,
                                                                      std::chrono::milliseconds timeout) {
  if (env.worldSize < 1 || env.rank < 0 || env.rank >= env.worldSize)
    return Status::error("replica " + std::to_string(env.rank) + " in a job of " + std::to_string(env.worldSize) +
                         " replicas");
  std::unique_ptr<TcpCommunicator> comm(new TcpCommunicator(env.rank, env.worldSize, timeout));
  if (env.worldSize == 1)
    return comm;
  Status started = env.rank == 0 ? comm->startAsRoot(env) : comm->startAsReplica(env);
  if (!started)
    return started;
  return comm;
}

PeerLink &TcpCommunicator::linkTo(int peerRank) { return links_[size_t(rank_ == 0 ? peerRank - 1 : 0)]; }

Status TcpCommunicator::fail(Status error, bool tellReplicas) {
  if (rank_ == 0 && tellReplicas) {
    // Best effort and brief: those that cannot take it find the connection closed instead.
    const std::string &text = error.message();
    const size_t bytes = std::min(text.size(), wire::kMaxAbortBytes);
    for (PeerLink &link : links_)
      (void)link.sendFrame(wire::Kind::Abort, sequence_, text.data(), bytes, std::chrono::milliseconds(100), "abort");
  }
  for (PeerLink &link : links_)
    link.close();
  broken_ = error;
  return error;
}

Status TcpCommunicator::startAsRoot(const ReplicaEnv &env) {
  auto listener = listenOn(env.masterPort);
  if (!listener)
    return listener.status().withContext("replica 0");
  const Deadline joining = Deadline::after(timeout_);
  std::vector<bool> joined(size_t(worldSize_), false);
  joined[0] = true;
  for (int missing = worldSize_ - 1; missing > 0;) {
    auto socket = acceptBefore(*listener, joining.at);
    if (!socket)
      return fail(socket.status().withContext("replica 0"), true);
    if (!socket->isOpen()) {
      std::vector<int> absent;
      for (int r = 1; r < worldSize_; ++r)
        if (!joined[size_t(r)])
          absent.push_back(r);
      return fail(Status::error(ranksText(absent) + " did not connect to replica 0 (port " +
                                std::to_string(env.masterPort) + ") within " + secondsText(timeout_)),
                  true);
    }
    // Who is it? Whatever does not greet like a replica is not one: drop it, keep waiting.
    PeerLink newcomer(-1, std::move(*socket));
    auto header = newcomer.receiveHeader(joining, kStartUp);
    if (!header || header->kind != wire::Kind::Hello || header->bytes != wire::kHelloBytes)
      continue;
    std::array<uint8_t, wire::kHelloBytes> helloBytes;
    if (!newcomer.receive(helloBytes.data(), helloBytes.size(), joining, kStartUp))
      continue;
    const wire::HelloPayload hello = wire::decodeHello(helloBytes);
    const std::string who = "replica " + std::to_string(hello.rank);
    std::string refusal;
    if (hello.version != wire::kProtocolVersion)
      refusal = who + " speaks protocol version " + std::to_string(hello.version) + ", replica 0 version " +
                std::to_string(wire::kProtocolVersion) + " (different Castor builds)";
    else if (hello.worldSize != worldSize_)
      refusal = who + " was started with a world size of " + std::to_string(hello.worldSize) + ", replica 0 with " +
                std::to_string(worldSize_) + " (WORLD_SIZE differs between the replicas)";
    else if (hello.rank < 0 || hello.rank >= worldSize_)
      refusal = "a replica claims rank " + std::to_string(hello.rank) + " in a job of " + std::to_string(worldSize_) +
                " replicas";
    else if (joined[size_t(hello.rank)])
      refusal = "two replicas claim rank " + std::to_string(hello.rank) + " (RANK is not unique)";
    if (!refusal.empty()) {
      (void)newcomer.sendFrame(wire::Kind::Abort, 0, refusal.data(), refusal.size(), std::chrono::milliseconds(100),
                               kStartUp);
      return fail(Status::error(refusal), true);
    }
    joined[size_t(hello.rank)] = true;
    --missing;
    links_.emplace_back(hello.rank, newcomer.releaseSocket());
  }
  std::sort(links_.begin(), links_.end(),
            [](const PeerLink &a, const PeerLink &b) { return a.peerRank() < b.peerRank(); });
  for (PeerLink &link : links_) {
    Status welcomed = link.sendFrame(wire::Kind::Welcome, 0, nullptr, 0, timeout_, kStartUp);
    if (!welcomed)
      return fail(welcomed, true);
  }
  return Status::ok();
}

Status TcpCommunicator::startAsReplica(const ReplicaEnv &env) {
  const Deadline reaching = Deadline::after(timeout_);
  auto socket = connectBefore(env.masterAddr, env.masterPort, reaching.at);
  if (!socket)
    return Status::error("replica " + std::to_string(rank_) + " could not connect to replica 0 at " + env.masterAddr +
                         ":" + std::to_string(env.masterPort) + " within " + secondsText(timeout_) + ": " +
                         socket.message());
  links_.emplace_back(0, std::move(*socket));
  const auto hello = wire::encodeHello({wire::kProtocolVersion, rank_, worldSize_});
  Status greeted = links_[0].sendFrame(wire::Kind::Hello, 0, hello.data(), hello.size(), timeout_, kStartUp);
  if (!greeted)
    return fail(greeted, false);
  // Replica 0 answers once everyone has joined, or gives up within its own timeout, which may
  // have begun before ours: wait twice as long.
  Status welcomed = links_[0].expectHeader(wire::Kind::Welcome, 0, Deadline::after(2 * timeout_), kStartUp);
  if (!welcomed)
    return fail(welcomed, false);
  return Status::ok();
}

Status TcpCommunicator::allReduce(void *data, size_t count, plan::DType dtype, ReduceOp op) {
  const size_t size = reducibleDTypeSize(dtype);
  if (size == 0)
    return fail(Status::error("replica " + std::to_string(rank_) + " called all_reduce over " + plan::dtypeName(dtype) +
                              ": only f32, f64, f16, bf16 and i64 reduce"),
                true);
  return run({wire::Collective::AllReduce, uint32_t(dtype), uint32_t(op), 0, uint64_t(count * size)}, data);
}

Status TcpCommunicator::broadcast(void *data, size_t bytes, int root) {
  if (root < 0 || root >= worldSize_)
    return fail(Status::error("replica " + std::to_string(rank_) + " called broadcast from replica " +
                              std::to_string(root) + " in a job of " + std::to_string(worldSize_) + " replicas"),
                true);
  return run({wire::Collective::Broadcast, 0, 0, root, uint64_t(bytes)}, data);
}

Status TcpCommunicator::barrier() { return run({wire::Collective::Barrier, 0, 0, 0, 0}, nullptr); }

Status TcpCommunicator::run(const wire::CallPayload &call, void *data) {
  if (broken_)
    return Status::error("the communicator stopped at an earlier error: " + broken_->message());
  ++sequence_;
  if (worldSize_ == 1)
    return Status::ok();
  const char *during = wire::collectiveName(call.collective);
  if (rank_ != 0)
    return replicaRun(call, data, during);
  CASTOR_RETURN_IF_ERROR(rootAgree(call, during));
  if (call.collective == wire::Collective::AllReduce)
    return rootAllReduce(call, data, during);
  if (call.collective == wire::Collective::Broadcast)
    return rootBroadcast(call, data, during);
  return Status::ok();
}

Status TcpCommunicator::rootAgree(const wire::CallPayload &call, const char *during) {
  // One deadline for all: a replica may arrive up to `timeout` after replica 0 did.
  const Deadline arrival = Deadline::after(timeout_);
  for (PeerLink &link : links_) {
    auto header = link.receiveHeader(arrival, during);
    if (!header)
      return fail(header.status(), true);
    if (header->kind != wire::Kind::Call || header->bytes != wire::kCallBytes)
      return fail(Status::error("replica " + std::to_string(link.peerRank()) + " sent a " +
                                wire::kindName(header->kind) + " frame where a call was due during " + during),
                  true);
    std::array<uint8_t, wire::kCallBytes> callBytes;
    Status read = link.receive(callBytes.data(), callBytes.size(), arrival, during);
    if (!read)
      return fail(read, true);
    std::string mismatch =
        wire::callMismatch(call, sequence_, wire::decodeCall(callBytes), header->sequence, link.peerRank());
    if (!mismatch.empty())
      return fail(Status::error(mismatch), true);
  }
  for (PeerLink &link : links_) {
    Status told = link.sendFrame(wire::Kind::Proceed, sequence_, nullptr, 0, timeout_, during);
    if (!told)
      return fail(told, true);
  }
  return Status::ok();
}

Status TcpCommunicator::rootAllReduce(const wire::CallPayload &call, void *data, const char *during) {
  const size_t bytes = size_t(call.bytes), valueSize = reducibleDTypeSize(plan::DType(call.dtype));
  for (PeerLink &link : links_) {
    Status header = link.expectHeader(wire::Kind::Data, bytes, Deadline::after(timeout_), during);
    if (!header)
      return fail(header, true);
  }
  // Piece by piece: each replica's piece in rank order, combined into replica 0's buffer.
  std::vector<std::vector<uint8_t>> pieces(links_.size(), std::vector<uint8_t>(std::min(bytes, kPieceBytes)));
  std::vector<const void *> others;
  for (const auto &piece : pieces)
    others.push_back(piece.data());
  char *values = static_cast<char *>(data);
  for (size_t done = 0; done < bytes; done += kPieceBytes) {
    const size_t length = std::min(kPieceBytes, bytes - done);
    for (size_t i = 0; i < links_.size(); ++i) {
      Status read = links_[i].receive(pieces[i].data(), length, Deadline::after(timeout_), during);
      if (!read)
        return fail(read, true);
    }
    reduceInRankOrder(values + done, others, length / valueSize, plan::DType(call.dtype), ReduceOp(call.op));
  }
  // The result, to everyone, piece by piece across the replicas.
  const auto header = wire::encodeHeader({wire::Kind::Data, sequence_, bytes});
  for (PeerLink &link : links_) {
    Status sent = link.send(header.data(), header.size(), Deadline::after(timeout_), during);
    if (!sent)
      return fail(sent, false);
  }
  for (size_t done = 0; done < bytes; done += kPieceBytes)
    for (PeerLink &link : links_) {
      Status sent = link.send(values + done, std::min(kPieceBytes, bytes - done), Deadline::after(timeout_), during);
      if (!sent)
        return fail(sent, false); // frames to the others are half sent: they find the connection closed
    }
  return Status::ok();
}

Status TcpCommunicator::rootBroadcast(const wire::CallPayload &call, void *data, const char *during) {
  const size_t bytes = size_t(call.bytes);
  char *values = static_cast<char *>(data);
  if (call.root != 0) {
    Status header = linkTo(call.root).expectHeader(wire::Kind::Data, bytes, Deadline::after(timeout_), during);
    if (!header)
      return fail(header, true);
  }
  // Passed on piece by piece as it comes from the root: the others see progress all along.
  const auto header = wire::encodeHeader({wire::Kind::Data, sequence_, bytes});
  for (PeerLink &link : links_)
    if (link.peerRank() != call.root) {
      Status sent = link.send(header.data(), header.size(), Deadline::after(timeout_), during);
      if (!sent)
        return fail(sent, false);
    }
  for (size_t done = 0; done < bytes; done += kPieceBytes) {
    const size_t length = std::min(kPieceBytes, bytes - done);
    if (call.root != 0) {
      Status read = linkTo(call.root).receive(values + done, length, Deadline::after(timeout_), during);
      if (!read)
        return fail(read, false); // frames to the others are half sent: they find the connection closed
    }
    for (PeerLink &link : links_)
      if (link.peerRank() != call.root) {
        Status sent = link.send(values + done, length, Deadline::after(timeout_), during);
        if (!sent)
          return fail(sent, false);
      }
  }
  return Status::ok();
}

Status TcpCommunicator::replicaRun(const wire::CallPayload &call, void *data, const char *during) {
  PeerLink &root = links_[0];
  const auto callBytes = wire::encodeCall(call);
  Status step = root.sendFrame(wire::Kind::Call, sequence_, callBytes.data(), callBytes.size(), timeout_, during);
  // Replica 0 answers once all have arrived, or gives up after its own wait for the last one:
  // the answer may take up to twice the timeout.
  if (step)
    step = root.expectHeader(wire::Kind::Proceed, 0, Deadline::after(2 * timeout_), during);
  if (!step)
    return fail(step, false);

  const size_t bytes = size_t(call.bytes);
  const bool sends = call.collective == wire::Collective::AllReduce ||
                     (call.collective == wire::Collective::Broadcast && call.root == rank_);
  const bool receives = call.collective == wire::Collective::AllReduce ||
                        (call.collective == wire::Collective::Broadcast && call.root != rank_);
  if (sends)
    step = root.sendFrame(wire::Kind::Data, sequence_, data, bytes, timeout_, during);
  if (step && receives) {
    step = root.expectHeader(wire::Kind::Data, bytes, Deadline::after(2 * timeout_), during);
    char *values = static_cast<char *>(data);
    for (size_t done = 0; step && done < bytes; done += kPieceBytes)
      step = root.receive(values + done, std::min(kPieceBytes, bytes - done), Deadline::after(timeout_), during);
  }
  if (!step)
    return fail(step, false);
  return Status::ok();
}

} // namespace castor::dist
