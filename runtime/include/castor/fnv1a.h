// FNV-1a, 64 bits, of a byte string: a stable hash across processes and machines (parameter
// names seeding their initial values, keys naming files in the tuning cache).
#pragma once

#include <cstdint>
#include <string_view>

namespace castor {

inline uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

} // namespace castor
