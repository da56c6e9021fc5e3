// Where this process stands among the replicas of a data-parallel job, as its launcher says.
//
// One process per replica, started by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT), by Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, plus MASTER_ADDR and
// MASTER_PORT, which Slurm does not set), or by hand. With none of these: one replica alone.
#pragma once

#include "castor/status.h"

#include <string>

namespace castor::dist {

struct ReplicaEnv {
  int rank = 0;       // this replica, in [0, worldSize)
  int worldSize = 1;  // replicas in the job
  int localRank = 0;  // this replica among those on its machine: which GPU it takes
  std::string masterAddr; // where replica 0 listens (empty when worldSize is 1)
  int masterPort = 0;     // its TCP port (0 when worldSize is 1)
};

// Reads the launcher's variables. torchrun's win where both are set (torchrun under Slurm sets
// its own for each process it starts). A missing LOCAL_RANK is taken to be RANK (one machine).
// MASTER_ADDR and MASTER_PORT are required once there is more than one replica. Every error
// names the variable at fault.
Expected<ReplicaEnv> replicaEnvFromEnvironment();

} // namespace castor::dist
