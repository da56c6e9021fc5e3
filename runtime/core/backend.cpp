// What every backend shares, whatever it runs on.
#include "castor/backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace castor {

bool poisonRequestedByEnvironment() {
  const char *v = std::getenv("CASTOR_POISON");
  return v && *v && std::strcmp(v, "0") != 0;
}

// A host clock around run(): right for a backend whose run() returns when the step is done; a
// device backend times with its own events instead.
Expected<double> Backend::timedRun() {
  const auto start = std::chrono::steady_clock::now();
  CASTOR_RETURN_IF_ERROR(run());
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

} // namespace castor
