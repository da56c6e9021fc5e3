#include "dist/launch_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>

namespace castor::dist {

namespace {

std::optional<std::string> variable(const char *name) {
  const char *value = std::getenv(name);
  if (!value)
    return std::nullopt;
  return std::string(value);
}

// A whole decimal integer in [lowest, highest]: "3", not "3x", "", " 3" or "3.0".
Expected<int> integerVariable(const char *name, const std::string &text, long lowest, long highest) {
  const std::string shown = std::string(name) + "='" + text + "'";
  if (text.empty() || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
    return Status::error(shown + " is not an integer");
  errno = 0;
  char *end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0')
    return Status::error(shown + " is not an integer");
  if (errno == ERANGE || value < lowest || value > highest)
    return Status::error(shown + " is out of range: it must lie in [" + std::to_string(lowest) + ", " +
                         std::to_string(highest) + "]");
  return int(value);
}

// The rank/world/local-rank variables of one launcher.
struct LauncherNames {
  const char *launcher, *rank, *worldSize, *localRank;
};
constexpr LauncherNames kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"};
constexpr LauncherNames kSlurm{"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

Status readPlacement(const LauncherNames &names, ReplicaEnv &env) {
  auto rankText = variable(names.rank), worldText = variable(names.worldSize);
  if (!rankText)
    return Status::error(std::string(names.worldSize) + " is set but " + names.rank + " is not (" +
                         names.launcher + " sets both)");
  if (!worldText)
    return Status::error(std::string(names.rank) + " is set but " + names.worldSize + " is not (" +
                         names.launcher + " sets both)");
  auto world = integerVariable(names.worldSize, *worldText, 1, INT_MAX);
  if (!world)
    return world.status();
  auto rank = integerVariable(names.rank, *rankText, 0, INT_MAX);
  if (!rank)
    return rank.status();
  if (*rank >= *world)
    return Status::error(std::string(names.rank) + "=" + *rankText + " is not below " + names.worldSize +
                         "=" + *worldText + " (ranks count from 0)");
  env.rank = *rank;
  env.worldSize = *world;
  env.localRank = *rank;
  if (auto localText = variable(names.localRank)) {
    auto local = integerVariable(names.localRank, *localText, 0, INT_MAX);
    if (!local)
      return local.status();
    if (*local > *rank)
      return Status::error(std::string(names.localRank) + "=" + *localText + " exceeds " + names.rank +
                           "=" + *rankText + " (a replica's place on its machine cannot exceed its place in the job)");
    env.localRank = *local;
  }
  return Status::ok();
}

} // namespace

Expected<ReplicaEnv> replicaEnvFromEnvironment() {
  ReplicaEnv env;
  const bool torchrun = variable("RANK") || variable("WORLD_SIZE");
  const bool slurm = variable("SLURM_PROCID") || variable("SLURM_NTASKS");
  if (torchrun) {
    CASTOR_RETURN_IF_ERROR(readPlacement(kTorchrun, env));
  } else if (slurm) {
    CASTOR_RETURN_IF_ERROR(readPlacement(kSlurm, env));
  }

  auto addr = variable("MASTER_ADDR"), port = variable("MASTER_PORT");
  if (env.worldSize > 1) {
    // Slurm knows its nodes but names no rendezvous; the job script picks one.
    const char *hint = torchrun ? "" : " (under Slurm, export MASTER_ADDR=$(scontrol show hostnames "
                                       "\"$SLURM_JOB_NODELIST\" | head -n 1) and a free MASTER_PORT)";
    if (!addr || addr->empty())
      return Status::error("MASTER_ADDR is not set: " + std::to_string(env.worldSize) +
                           " replicas need the address of replica 0" + hint);
    if (!port)
      return Status::error("MASTER_PORT is not set: " + std::to_string(env.worldSize) +
                           " replicas need the TCP port replica 0 listens on" + hint);
  }
  if (addr)
    env.masterAddr = *addr;
  if (port) {
    auto number = integerVariable("MASTER_PORT", *port, 1, 65535);
    if (!number)
      return number.status();
    env.masterPort = *number;
  }
  return env;
}

} // namespace castor::dist
