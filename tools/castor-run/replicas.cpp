#include "replicas.h"

#include "dist/socket_io.h"

#include <fmt/core.h>

#include <csignal>
#include <cstdlib>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace castor::run {
namespace {

// A TCP port nobody listens on now: the kernel's choice for port 0 (runtime/dist's listener).
// Replica 0 binds it again (SO_REUSEADDR) moments later.
int freePort() {
  auto listener = dist::listenOn(0);
  return listener ? dist::listeningPort(*listener) : -1;
}

std::string describe(int status) {
  if (WIFEXITED(status))
    return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "stopped";
}

} // namespace

std::vector<std::string> withoutReplicasOption(const std::vector<std::string> &argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--replicas") {
      ++i; // and its value
      continue;
    }
    if (argv[i].rfind("--replicas=", 0) == 0)
      continue;
    out.push_back(argv[i]);
  }
  return out;
}

int runLocalReplicas(const std::vector<std::string> &command, int replicas, std::chrono::seconds grace) {
  const int port = freePort();
  if (port <= 0) {
    fmt::print(stderr, "castor-run: --replicas: no free TCP port on 127.0.0.1 for the replicas to meet\n");
    return 1;
  }
  std::vector<pid_t> pids;
  for (int rank = 0; rank < replicas; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      fmt::print(stderr, "castor-run: --replicas: cannot start replica {}\n", rank);
      for (pid_t p : pids)
        ::kill(p, SIGTERM);
      return 1;
    }
    if (pid == 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(replicas).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      std::vector<char *> args;
      for (const std::string &a : command)
        args.push_back(const_cast<char *>(a.c_str()));
      args.push_back(nullptr);
      ::execv("/proc/self/exe", args.data());
      std::_Exit(127);
    }
    pids.push_back(pid);
  }

  // Wait for all; after the first failure, give the rest `grace` before killing them.
  int firstFailure = 0, running = replicas;
  auto deadline = std::chrono::steady_clock::time_point::max();
  std::vector<bool> done(size_t(replicas), false);
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int rank = 0; rank < replicas; ++rank) {
        if (pids[size_t(rank)] != pid || done[size_t(rank)])
          continue;
        done[size_t(rank)] = true;
        --running;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok) {
          fmt::print(stderr, "castor-run: replica {} of {} {}\n", rank, replicas, describe(status));
          if (!firstFailure) {
            firstFailure = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
            deadline = std::chrono::steady_clock::now() + grace;
          }
        }
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int rank = 0; rank < replicas; ++rank)
        if (!done[size_t(rank)]) {
          fmt::print(stderr, "castor-run: replica {} still running {} s after the failure: stopped\n", rank,
                     grace.count());
          ::kill(pids[size_t(rank)], SIGKILL);
        }
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return firstFailure;
}

} // namespace castor::run
