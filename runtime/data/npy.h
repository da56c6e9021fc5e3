// NumPy .npy files (format versions 1.0, 2.0 and 3.0), little-endian, C order.
// Read: <f4, <f8, <f2, <i8, and <i4 (widened to i64). Write: f32, f64, f16, i64.
#pragma once

#include "castor/status.h"
#include "weights/safetensors.h"

#include <string>

namespace castor::npy {

// The array's name field is left empty.
Expected<weights::NamedTensor> readNpy(const std::string &path);
Status writeNpy(const weights::NamedTensor &array, const std::string &path);

} // namespace castor::npy
