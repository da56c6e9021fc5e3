// The plan schema (generated from plan.proto) and the small facts every user of it needs.
#pragma once

#include "castor/shape_rules.h"
#include "castor/status.h"
#include "plan/plan.pb.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castor::plan {

// Version of the Plan message's meaning (Plan.format_version).
constexpr uint32_t kPlanFormatVersion = 1;
// Version of the file container around it (magic, length, checksum).
constexpr uint32_t kContainerVersion = 1;
// Every arena offset is a multiple of this.
constexpr uint64_t kArenaAlignment = 256;

// Bytes per element; 0 for DTYPE_UNSPECIFIED or an unknown value.
uint64_t dtypeSize(DType dtype);
// "f32", "f16", "bf16", "f64", "i64".
std::string dtypeName(DType dtype);
// "activation", "parameter", "input", "output", "state".
std::string kindName(Tensor::Kind kind);
// "file", "kaiming_normal", "linear_uniform", "zeros", "ones", "fill".
std::string initName(Parameter::Init init);

// Element count of a shape, or nullopt when a dimension is negative or the product overflows.
std::optional<int64_t> elementCount(const Tensor &tensor);

// The last line of defence a backend runs on load: the tensor's byte size matches its shape and
// dtype and its slot lies inside an arena of `arenaBytes`; empty when it does, else the reason.
std::string slotError(const Tensor &tensor, uint64_t arenaBytes);

// "[2, 3, 4]"
std::string shapeString(const Tensor &tensor);

// The rows layer norm normalises (x's dimensions from `axis` on make one row) and their length,
// by the shared rule (shape::layerNormRows): one geometry for every backend.
struct LayerNormRows {
  int64_t rows, length;
};
Expected<LayerNormRows> layerNormRows(const Tensor &x, const Tensor &scale, int64_t axis);

// Convenience builders for attributes (used by the compiler's serializer and by tests).
Attr intsAttr(std::vector<int64_t> values);
Attr floatsAttr(std::vector<double> values);
Attr floatAttr(double value);
Attr intAttr(int64_t value);
Attr stringAttr(std::string value);
Attr boolAttr(bool value);

// One-line rendering of an attribute value: "[1, 1]", "0.1", "\"mean\"", "true".
std::string attrString(const Attr &attr);

} // namespace castor::plan
