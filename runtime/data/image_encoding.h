// Images encoded on the host straight into the plan's dtype, so that the session uploads the
// bytes as they are (no f64 copy and second conversion of every value).
#pragma once

#include "host/parallel.h"
#include "plan/plan.h"

#include <cstdint>
#include <vector>

namespace castor::data {

// The images' dtype on the host: the plan's own when it is a float type (so the session uploads
// the bytes as they are), otherwise f64, which the session then refuses with its message.
plan::DType hostImageDType(plan::DType planDType);
// weights::encodeValues(dtype, values) into `out` (resized), on several threads.
void encodeValuesParallel(plan::DType dtype, const std::vector<double> &values, std::vector<uint8_t> &out,
                          int threads = host::hostThreads());

} // namespace castor::data
