// SHA-256 (FIPS 180-4), used for the plan container's checksum.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace castor::plan {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t size);
  Sha256Digest finish();

private:
  void compress(const uint8_t *block);
  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t totalBytes_ = 0;
};

Sha256Digest sha256(const void *data, size_t size);
std::string toHex(const Sha256Digest &digest);

} // namespace castor::plan
