// A shape as messages show it: "[2, 1, 28, 28]" (as plan::shapeString shows a tensor's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace castor::data {

inline std::string shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

} // namespace castor::data
