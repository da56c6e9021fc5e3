// SHA-256 (FIPS 180-4): the plan container's checksum, the digest that pairs a plan with its
// weights file, the plan cache's keys. Computed by OpenSSL's libcrypto.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct evp_md_ctx_st; // OpenSSL's EVP_MD_CTX, kept out of this header

namespace castor::plan {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t size);
  Sha256Digest finish();

private:
  struct Free {
    void operator()(evp_md_ctx_st *context) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> context_;
};

Sha256Digest sha256(const void *data, size_t size);
std::string toHex(const Sha256Digest &digest);

} // namespace castor::plan
