// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or not.
//
// Layout: two zero bytes, a type byte (0x08: unsigned byte, the only type read here), the number
// of dimensions d, then d big-endian uint32 sizes and the row-major data.
#pragma once

#include "castor/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor::idx {

struct Array {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads `path`; a gzip stream is detected by its magic and inflated.
Expected<Array> readIdx(const std::string &path);

// `base` in `dir`, as is or with ".gz" appended, whichever exists (the plain file first).
Expected<std::string> findIdx(const std::string &dir, const std::string &base);

// An image set and its labels: "<prefix>-images-idx3-ubyte[.gz]" [n, rows, cols] and
// "<prefix>-labels-idx1-ubyte[.gz]" [n] in `dir` (prefix "train" or "t10k").
struct LabelledImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels; // count x rows x cols
  std::vector<uint8_t> labels; // count
};
Expected<LabelledImages> readLabelledImages(const std::string &dir, const std::string &prefix);

} // namespace castor::idx
