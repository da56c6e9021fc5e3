// Images encoded on the host straight into the plan's dtype (weights::encodeValues into a
// reused buffer), so that the session uploads the bytes as they are (no f64 copy and second
// conversion of every value).
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <vector>

namespace castor::data {

// The images' dtype on the host: the plan's own when it is a float type (so the session uploads
// the bytes as they are), otherwise f64, which the session then refuses with its message.
plan::DType hostImageDType(plan::DType planDType);

} // namespace castor::data
