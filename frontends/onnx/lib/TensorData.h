// Reading the values of ONNX tensors: inline fields, raw bytes or external data files.
#pragma once

#include "onnx/onnx.pb.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Types.h"

#include <optional>
#include <string>
#include <vector>

namespace castor::onnx_import {

// The castor element type of an ONNX data type, or a null type when Castor has none.
mlir::Type elementTypeOf(mlir::MLIRContext &context, int32_t onnxType);
std::string onnxTypeName(int32_t onnxType);

// Dims of a tensor, or nullopt (with `why`) when any is negative or the count overflows.
std::optional<std::vector<int64_t>> tensorShape(const onnx::TensorProto &tensor, std::string &why);

enum class DataStatus { Ok, Missing, Invalid };

// The tensor's values as dense little-endian bytes of its element type. Missing: external data
// whose file does not exist; Invalid: anything else wrong (with `why`).
DataStatus readTensorBytes(const onnx::TensorProto &tensor, const std::string &baseDir, std::vector<char> &bytes,
                           std::string &why);

// The shortest decimal that reads back as `f`: ONNX stores attributes and scalar constants as
// f32, and the IR should say 1e-5, not 9.99999974e-6.
double decimalOfFloat(float f);

// Integer (int64/int32) or floating-point (f32/f64/f16/bf16) values, converted.
bool readInts(const onnx::TensorProto &tensor, const std::string &baseDir, std::vector<int64_t> &values,
              std::string &why);
bool readDoubles(const onnx::TensorProto &tensor, const std::string &baseDir, std::vector<double> &values,
                 std::string &why);

} // namespace castor::onnx_import
