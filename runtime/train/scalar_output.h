// A scalar output of a step (the loss, the correct count, the loss scale and its counters) as a
// double, whatever its dtype.
#pragma once

#include "castor/status.h"
#include "core/session.h"

#include <string>

namespace castor::train {

// The first element of output `name` (i64 values converted exactly up to 2^53).
Expected<double> scalarOutput(Session &session, const std::string &name);

} // namespace castor::train
