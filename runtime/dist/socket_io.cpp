#include "dist/socket_io.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sstream>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace castor::dist {

namespace {

// Milliseconds left until `deadline`, rounded up, for poll() (0 once it has passed).
int msUntil(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : left > 1 << 30 ? 1 << 30 : int(left);
}

// Waits until the socket is ready for `events`; false when the deadline passes first.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, msUntil(deadline));
    if (n > 0)
      return true; // ready, or an error/hang-up that the next recv/send reports
    if (n == 0)
      return false;
    if (errno != EINTR)
      return true; // let the recv/send report it
  }
}

bool isClosedError(int error) { return error == ECONNRESET || error == EPIPE || error == ENOTCONN; }

void prepareStream(int fd) {
  int one = 1;
  // Collectives exchange small frames back and forth: no Nagle delay.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

std::string errnoText(int error) { return std::strerror(error); }

} // namespace

std::string secondsText(std::chrono::milliseconds span) {
  std::ostringstream text;
  text << double(span.count()) / 1000.0 << " s";
  return text.str();
}

Socket &Socket::operator=(Socket &&other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

namespace {

// Moves `bytes` through `io` (one non-blocking recv or send of at most n bytes at `at`, its
// result) as the socket becomes ready for `events`, until done, the deadline, or the peer is
// gone. A read of 0 bytes is the peer's orderly close.
template <typename Byte, typename Io>
IoResult transferExact(const Socket &socket, Byte *at, size_t bytes, short events, Clock::time_point deadline,
                       Io io) {
  while (bytes > 0) {
    if (!waitFor(socket.fd(), events, deadline))
      return {IoOutcome::TimedOut};
    ssize_t n = io(at, bytes);
    if (n == 0 && events == POLLIN)
      return {IoOutcome::Closed};
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return isClosedError(errno) ? IoResult{IoOutcome::Closed} : IoResult{IoOutcome::Failed, errno};
    }
    at += n;
    bytes -= size_t(n);
  }
  return {};
}

} // namespace

IoResult readExact(const Socket &socket, void *data, size_t bytes, Clock::time_point deadline) {
  const int fd = socket.fd();
  return transferExact(socket, static_cast<char *>(data), bytes, POLLIN, deadline,
                       [fd](char *at, size_t n) { return ::recv(fd, at, n, MSG_DONTWAIT); });
}

IoResult writeExact(const Socket &socket, const void *data, size_t bytes, Clock::time_point deadline) {
  const int fd = socket.fd();
  // MSG_NOSIGNAL: a peer that is gone is an error to report, not a SIGPIPE to die of.
  return transferExact(socket, static_cast<const char *>(data), bytes, POLLOUT, deadline,
                       [fd](const char *at, size_t n) { return ::send(fd, at, n, MSG_DONTWAIT | MSG_NOSIGNAL); });
}

bool readableNow(const Socket &socket) {
  pollfd p{socket.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

Expected<Socket> listenOn(int port) {
  // Dual-stack IPv6 where the host has it, else IPv4.
  bool v6 = true;
  Socket listener(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener.isOpen()) {
    v6 = false;
    listener = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  }
  if (!listener.isOpen())
    return Status::error("cannot create a socket: " + errnoText(errno));
  int one = 1, zero = 0;
  ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound;
  if (v6) {
    ::setsockopt(listener.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(uint16_t(port));
    bound = ::bind(listener.fd(), reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(uint16_t(port));
    bound = ::bind(listener.fd(), reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  }
  if (bound != 0)
    return Status::error("cannot listen on port " + std::to_string(port) + ": " + errnoText(errno));
  if (::listen(listener.fd(), SOMAXCONN) != 0)
    return Status::error("cannot listen on port " + std::to_string(port) + ": " + errnoText(errno));
  ::fcntl(listener.fd(), F_SETFL, ::fcntl(listener.fd(), F_GETFL) | O_NONBLOCK);
  return listener;
}

int listeningPort(const Socket &listener) {
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  if (::getsockname(listener.fd(), reinterpret_cast<sockaddr *>(&addr), &length) != 0)
    return 0;
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
}

Expected<Socket> acceptBefore(const Socket &listener, Clock::time_point deadline) {
  for (;;) {
    if (!waitFor(listener.fd(), POLLIN, deadline))
      return Socket();
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      prepareStream(fd);
      return Socket(fd);
    }
    // The connection may have gone again before accept(): wait for the next.
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
      continue;
    return Status::error("accept failed: " + errnoText(errno));
  }
}

namespace {
// One attempt at each address of host:port; returns the connected socket or the last error.
Expected<Socket> connectOnce(const std::string &host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0)
    return Status::error(std::string("cannot resolve the address: ") + ::gai_strerror(resolved));
  std::string lastError = "no address";
  for (addrinfo *a = found; a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s.isOpen()) {
      lastError = errnoText(errno);
      continue;
    }
    int rc = ::connect(s.fd(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!waitFor(s.fd(), POLLOUT, deadline)) {
        lastError = "connection attempt timed out";
        continue;
      }
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
      rc = error == 0 ? 0 : -1;
      errno = error;
    }
    if (rc == 0) {
      ::freeaddrinfo(found);
      prepareStream(s.fd());
      return s;
    }
    lastError = errnoText(errno);
  }
  ::freeaddrinfo(found);
  return Status::error(lastError);
}
} // namespace

Expected<Socket> connectBefore(const std::string &host, int port, Clock::time_point deadline) {
  // Replica 0 may start after the others: keep trying until it listens or time runs out.
  for (;;) {
    auto attempt = connectOnce(host, port, deadline);
    if (attempt || Clock::now() + std::chrono::milliseconds(50) >= deadline)
      return attempt;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

} // namespace castor::dist
