// Reading and writing plan files.
//
//   Status s = castor::plan::writePlanFile(plan, "model.plan");
//   Expected<Plan> p = castor::plan::readPlanFile("model.plan");
//   if (!p) fprintf(stderr, "%s\n", p.message().c_str());
//
// The container is "CASTORPL" | uint32 container version | uint64 payload length |
// SHA-256 of the payload (32 bytes) | serialized castor.plan.Plan, integers little-endian.
// Neither function throws. Reading checks the container (magic, version, length, checksum)
// and the plan's format_version; call validatePlan (plan_validator.h) before running it.
#pragma once

#include "castor/status.h"
#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor::plan {

constexpr char kPlanMagic[8] = {'C', 'A', 'S', 'T', 'O', 'R', 'P', 'L'};
constexpr size_t kContainerHeaderBytes = 8 + 4 + 8 + 32;

// Writes atomically: a temporary file in the same directory, fsync, then rename over `path`.
Status writePlanFile(const Plan &plan, const std::string &path);
Expected<Plan> readPlanFile(const std::string &path);

// The same, in memory (what the files hold).
Expected<std::vector<uint8_t>> encodePlan(const Plan &plan);

// SHA-256 of a file's bytes, lower-case hex.
Expected<std::string> fileSha256(const std::string &path);

// The weights file to load for `plan`, read from `planPath`: `explicitPath` when given (it
// wins); else the file the plan names (weights_file) in the plan's folder, refused when it is
// missing or its SHA-256 differs from the plan's; else "" (the plan's parameters have
// initializers).
Expected<std::string> weightsFileFor(const Plan &plan, const std::string &planPath, const std::string &explicitPath);
Expected<Plan> decodePlan(const uint8_t *data, size_t size);

} // namespace castor::plan
