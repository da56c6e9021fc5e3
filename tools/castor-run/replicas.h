// castor-run train --replicas N: a data-parallel job of N processes on this machine, each this
// same command without --replicas, told its place the way torchrun tells it (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT: a free port).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace castor::run {

// Starts the N replicas and waits for them. When one fails, the others get `grace` to fail in
// turn (their collectives time out naming it) before they are killed. Returns 0 when every
// replica succeeded, else the first failure's exit status; says on stderr which replica failed.
int runLocalReplicas(const std::vector<std::string> &command, int replicas, std::chrono::seconds grace);

// The command line without "--replicas N" (or "--replicas=N").
std::vector<std::string> withoutReplicasOption(const std::vector<std::string> &argv);

} // namespace castor::run
