// safetensors files (https://github.com/huggingface/safetensors format): an 8-byte little-endian
// header length, a JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the raw little-endian tensor bytes.
// Supported dtypes: F32, F16, BF16, F64, I64.
#pragma once

#include "castor/status.h"
#include "plan/plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace castor::weights {

struct NamedTensor {
  std::string name;
  plan::DType dtype = plan::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data; // element count x dtype size bytes
};

struct TensorFile {
  std::vector<NamedTensor> tensors; // in data order
  std::map<std::string, std::string> metadata;

  const NamedTensor *find(const std::string &name) const;
};

// Writes atomically (temporary file, fsync, rename).
Status writeSafetensors(const TensorFile &file, const std::string &path);
// Deletes the temporary files writeSafetensors leaves beside `path` when its process is killed
// mid-write ("PATH.tmp.XXXXXX"); returns how many. Only for a path no other process is writing.
int removeInterruptedWrites(const std::string &path);
Expected<TensorFile> readSafetensors(const std::string &path);
// The same, from the file's bytes; `what` names them in error messages.
Expected<TensorFile> parseSafetensors(const uint8_t *bytes, size_t size, const std::string &what);

// "F32" <-> plan::F32, ...
std::string safetensorsDtypeName(plan::DType dtype);
bool parseSafetensorsDtype(const std::string &name, plan::DType &out);

} // namespace castor::weights
