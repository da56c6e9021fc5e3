#include "dist/peer_link.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace castor::dist {

Status PeerLink::ioError(const IoResult &result, const Deadline &deadline, const char *during, bool sending) {
  const std::string peer = "replica " + std::to_string(peerRank_);
  switch (result.outcome) {
  case IoOutcome::Done:
    return Status::ok();
  case IoOutcome::Closed:
    return Status::error(peer + " closed the connection during " + during);
  case IoOutcome::TimedOut:
    if (sending)
      return Status::error(peer + " took no data within " + secondsText(deadline.span) + " during " + during);
    return Status::error("no message from " + peer + " within " + secondsText(deadline.span) + " during " + during);
  case IoOutcome::Failed:
    return Status::error("the connection to " + peer + " failed during " + during + ": " + std::strerror(result.error));
  }
  return Status::error("unknown socket outcome");
}

std::optional<Status> PeerLink::abortLeftBehind(const char *during) {
  if (peerRank_ != 0 || !socket_.isOpen() || !readableNow(socket_))
    return std::nullopt;
  wire::HeaderBytes bytes;
  if (!readExact(socket_, bytes.data(), bytes.size(), Clock::now() + std::chrono::milliseconds(100)).ok())
    return std::nullopt;
  auto header = wire::decodeHeader(bytes);
  if (!header || header->kind != wire::Kind::Abort)
    return std::nullopt;
  return abortFrom(header->bytes, during);
}

Status PeerLink::abortFrom(uint64_t textBytes, const char *during) {
  std::string text(size_t(std::min<uint64_t>(textBytes, wire::kMaxAbortBytes)), '\0');
  auto read = readExact(socket_, text.data(), text.size(), Clock::now() + std::chrono::seconds(1));
  if (!read.ok())
    text = "(its reason was lost)";
  return Status::error("replica " + std::to_string(peerRank_) + " gave up on " + during + ": " + text);
}

Status PeerLink::send(const void *data, size_t bytes, const Deadline &deadline, const char *during) {
  IoResult result = writeExact(socket_, data, bytes, deadline.at);
  if (result.ok())
    return Status::ok();
  // Replica 0 says why it stopped before closing; that beats "closed the connection".
  if (auto abort = abortLeftBehind(during))
    return *abort;
  return ioError(result, deadline, during, true);
}

Status PeerLink::receive(void *data, size_t bytes, const Deadline &deadline, const char *during) {
  return ioError(readExact(socket_, data, bytes, deadline.at), deadline, during, false);
}

Status PeerLink::sendFrame(wire::Kind kind, uint64_t sequence, const void *payload, size_t bytes,
                           std::chrono::milliseconds wait, const char *during) {
  auto header = wire::encodeHeader({kind, sequence, bytes});
  CASTOR_RETURN_IF_ERROR(send(header.data(), header.size(), Deadline::after(wait), during));
  const char *at = static_cast<const char *>(payload);
  for (size_t done = 0; done < bytes; done += kPieceBytes)
    CASTOR_RETURN_IF_ERROR(send(at + done, std::min(kPieceBytes, bytes - done), Deadline::after(wait), during));
  return Status::ok();
}

Expected<wire::Header> PeerLink::receiveHeader(const Deadline &deadline, const char *during) {
  wire::HeaderBytes bytes;
  CASTOR_RETURN_IF_ERROR(receive(bytes.data(), bytes.size(), deadline, during));
  auto header = wire::decodeHeader(bytes);
  if (!header)
    return Status::error("replica " + std::to_string(peerRank_) + " sent bytes that are not a Castor frame during " +
                         during + " (another program on the port, or a replica out of step)");
  if (header->kind == wire::Kind::Abort)
    return abortFrom(header->bytes, during);
  return *header;
}

Status PeerLink::expectHeader(wire::Kind kind, uint64_t bytes, const Deadline &deadline, const char *during) {
  auto header = receiveHeader(deadline, during);
  if (!header)
    return header.status();
  const std::string peer = "replica " + std::to_string(peerRank_);
  if (header->kind != kind)
    return Status::error(peer + " sent a " + wire::kindName(header->kind) + " frame where a " + wire::kindName(kind) +
                         " frame was due during " + during);
  if (header->bytes != bytes)
    return Status::error(peer + " sent " + std::to_string(header->bytes) + " bytes where " + std::to_string(bytes) +
                         " were due during " + during);
  return Status::ok();
}

} // namespace castor::dist
