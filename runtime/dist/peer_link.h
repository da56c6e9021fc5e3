// One replica's end of its TCP connection to another, framing what crosses it and turning every
// failure into a message that names the other replica and the collective under way.
#pragma once

#include "dist/socket_io.h"
#include "dist/wire_format.h"

namespace castor::dist {

class PeerLink {
public:
  PeerLink(int peerRank, Socket socket) : peerRank_(peerRank), socket_(std::move(socket)) {}

  int peerRank() const { return peerRank_; }
  void close() { socket_.close(); }
  Socket releaseSocket() { return std::move(socket_); }

  Status send(const void *data, size_t bytes, const Deadline &deadline, const char *during);
  Status receive(void *data, size_t bytes, const Deadline &deadline, const char *during);

  // A header, then the payload in pieces of at most `pieceBytes`, each with its own `wait` (a
  // large buffer takes as long as it takes; a stall of `wait` does not).
  Status sendFrame(wire::Kind kind, uint64_t sequence, const void *payload, size_t bytes,
                   std::chrono::milliseconds wait, const char *during);
  // The next frame's header. An Abort frame from replica 0 becomes the error it carries.
  Expected<wire::Header> receiveHeader(const Deadline &deadline, const char *during);
  // The next header, which must be of `kind` with a payload of `bytes` bytes.
  Status expectHeader(wire::Kind kind, uint64_t bytes, const Deadline &deadline, const char *during);

private:
  Status ioError(const IoResult &result, const Deadline &deadline, const char *during, bool sending);
  // The Abort frame replica 0 left before it closed, if one is there to read.
  std::optional<Status> abortLeftBehind(const char *during);
  Status abortFrom(uint64_t textBytes, const char *during);

  int peerRank_;
  Socket socket_;
};

// Payload pieces: a stalled peer is noticed within one wait of its last progress.
constexpr size_t kPieceBytes = size_t(1) << 20;

} // namespace castor::dist
