// Plain POSIX TCP with a deadline on every blocking step (poll() before each send and recv), so
// that a replica that dies or stalls costs a bounded wait, never a hang.
#pragma once

#include "castor/status.h"

#include <chrono>
#include <cstddef>
#include <string>

namespace castor::dist {

using Clock = std::chrono::steady_clock;

// A point in time to give up at, and the wait it stands for (for messages: "within 30 s").
struct Deadline {
  Clock::time_point at;
  std::chrono::milliseconds span;
  static Deadline after(std::chrono::milliseconds span) { return {Clock::now() + span, span}; }
};

// "0.5 s", "30 s".
std::string secondsText(std::chrono::milliseconds span);

// An owned socket descriptor, closed on destruction. Non-blocking: the waiting is poll()'s.
class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket &operator=(Socket &&other) noexcept;
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool isOpen() const { return fd_ >= 0; }
  void close();

private:
  int fd_ = -1;
};

enum class IoOutcome { Done, Closed, TimedOut, Failed };
struct IoResult {
  IoOutcome outcome = IoOutcome::Done;
  int error = 0; // errno, when Failed
  bool ok() const { return outcome == IoOutcome::Done; }
};

// Moves exactly `bytes` bytes, or says why not: the peer closed (or reset) the connection, the
// deadline passed, or another socket error.
IoResult readExact(const Socket &socket, void *data, size_t bytes, Clock::time_point deadline);
IoResult writeExact(const Socket &socket, const void *data, size_t bytes, Clock::time_point deadline);
// True when something can be read now (for a message the peer sent before closing).
bool readableNow(const Socket &socket);

// Listens on `port` of every interface (IPv6 and IPv4 where the host has IPv6), with
// SO_REUSEADDR so that a job restarted at once can take the port of the one before.
Expected<Socket> listenOn(int port);
// The port a listening socket got (for port 0).
int listeningPort(const Socket &listener);
// The next connection, or a closed Socket when the deadline passes first.
Expected<Socket> acceptBefore(const Socket &listener, Clock::time_point deadline);
// Connects to host:port, retrying (every 50 ms) while nobody listens there yet, until the deadline.
Expected<Socket> connectBefore(const std::string &host, int port, Clock::time_point deadline);

} // namespace castor::dist
