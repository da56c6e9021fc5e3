// Seeded parameter initialization, identical on every backend.
//
// Element i of parameter p, for seed s, comes from one Philox4x32-10 call:
//   h   = FNV-1a 64-bit hash of p.name (UTF-8 bytes)
//   key = {lo32(s), hi32(s)},  counter = {lo32(i), hi32(i), lo32(h), hi32(h)}
//   w   = philox4x32_10(counter, key)                      (four uint32 words)
//   u53(a, b) = ((uint64(a) << 32 | b) >> 11) * 2^-53       (in [0, 1))
// and, computed in double precision, then rounded once to the tensor's dtype:
//   linear_uniform: b = 1 / sqrt(fan_in);  v = -b + 2 b u53(w0, w1)
//   kaiming_normal: std = sqrt(2 / fan_out);
//                   v = std * sqrt(-2 ln(u53(w0, w1) + 2^-54)) * cos(2 pi u53(w2, w3))
//   zeros, ones: 0, 1;  fill: init_value (every element, e.g. a loss scale of 65536).
// So a value depends only on (seed, name, i): not on the order of parameters or on the backend.
#pragma once

#include "castor/status.h"
#include "host/parallel.h"
#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor::weights {

uint64_t parameterNameHash(const std::string &name);

// The first `count` values of a parameter (made on the host's cores, the same bits as on one);
// refuses init FILE (those come from a weights file).
Expected<std::vector<double>> initialValues(const plan::Parameter &parameter, int64_t count, uint64_t seed);

// Element conversion between double and a dtype's little-endian bytes (f16/bf16 rounded to
// nearest even; i64 truncated toward zero), on the host's cores.
std::vector<uint8_t> encodeValues(plan::DType dtype, const std::vector<double> &values);
// The same into `out`, resized (its storage reused from one batch to the next), on up to
// `threads` threads.
void encodeValues(plan::DType dtype, const std::vector<double> &values, std::vector<uint8_t> &out,
                  int threads = host::hostThreads());
// The same into `out` (count * dtypeSize(dtype) bytes) on the caller's thread, so that a large
// buffer can be filled in parts.
void encodeValues(plan::DType dtype, const double *values, size_t count, uint8_t *out);
std::vector<double> decodeValues(plan::DType dtype, const std::vector<uint8_t> &bytes);

} // namespace castor::weights
