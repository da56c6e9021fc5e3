// ONNX ModelProto -> castor dialect.
//
// The importer parses the model with protobuf (no ONNX C++ library: its checker throws, and
// LLVM-style targets build without exceptions), validates it in Castor's own code, and emits
// one `func.func @forward` of castor ops. Errors name the file, node, op type and reason.
#pragma once

#include "castor/Dialect/CastorDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castor::onnx_import {

enum class WeightInit {
  File,    // values from the model's initializers; missing data is an error
  Kaiming, // seeded initialisation as torchvision's; the file's weight data is not needed
};

struct ImportOptions {
  // Fixes the first dimension of every graph input, symbolic or not (a batch baked into
  // the export included). Unset: symbolic first dimensions become 1, static ones stay.
  std::optional<int64_t> batch;
  WeightInit init = WeightInit::File;
  uint64_t seed = 0;
};

// One parameter's initial value as the model file holds it (little-endian, dense).
struct WeightData {
  std::string name;
  mlir::Type elementType;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

struct ImportResult {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  // Values of every castor.parameter whose init is `file`.
  std::vector<WeightData> weights;
  // Empty on success; otherwise one line per problem found.
  std::vector<std::string> errors;
  // What the import decided that the user should know (e.g. a statistic given its own copy).
  std::vector<std::string> notes;
};

// Imports the model file at `path` (external data is resolved next to it).
ImportResult importOnnxFile(mlir::MLIRContext &context, const std::string &path, const ImportOptions &options);

// Imports serialized ModelProto bytes; `displayName` prefixes errors, `baseDir` resolves
// external data.
ImportResult importOnnxBytes(mlir::MLIRContext &context, const std::string &bytes, const std::string &displayName,
                             const std::string &baseDir, const ImportOptions &options);

} // namespace castor::onnx_import
