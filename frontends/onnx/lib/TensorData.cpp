#include "TensorData.h"

#include "mlir/IR/BuiltinTypes.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

using onnx::TensorProto;

namespace castor::onnx_import {

mlir::Type elementTypeOf(mlir::MLIRContext &ctx, int32_t t) {
  switch (t) {
  case TensorProto::FLOAT: return mlir::Float32Type::get(&ctx);
  case TensorProto::FLOAT16: return mlir::Float16Type::get(&ctx);
  case TensorProto::BFLOAT16: return mlir::BFloat16Type::get(&ctx);
  case TensorProto::DOUBLE: return mlir::Float64Type::get(&ctx);
  case TensorProto::INT64: return mlir::IntegerType::get(&ctx, 64);
  default: return {};
  }
}

std::string onnxTypeName(int32_t t) {
  if (TensorProto::DataType_IsValid(t))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t));
  return "data type " + std::to_string(t);
}

static size_t elementSize(int32_t t) {
  switch (t) {
  case TensorProto::DOUBLE:
  case TensorProto::INT64: return 8;
  case TensorProto::FLOAT:
  case TensorProto::INT32: return 4;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16: return 2;
  case TensorProto::BOOL: return 1;
  default: return 0;
  }
}

std::optional<std::vector<int64_t>> tensorShape(const TensorProto &tensor, std::string &why) {
  std::vector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  int64_t n = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > (int64_t(1) << 40)) {
      why = "tensor '" + tensor.name() + "' has invalid dimensions";
      return std::nullopt;
    }
  return dims;
}

// External data keys: location (relative to the model), offset, length.
static DataStatus readExternal(const TensorProto &tensor, const std::string &baseDir, size_t expected,
                               std::vector<char> &bytes, std::string &why) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : tensor.external_data()) {
    char *end = nullptr;
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::strtoll(kv.value().c_str(), &end, 10);
    else if (kv.key() == "length")
      length = std::strtoll(kv.value().c_str(), &end, 10);
  }
  if (location.empty() || location[0] == '/' || location.find("..") != std::string::npos) {
    why = "external data of '" + tensor.name() + "' has an invalid location '" + location + "'";
    return DataStatus::Invalid;
  }
  if (offset < 0 || (length >= 0 && size_t(length) != expected)) {
    why = "external data of '" + tensor.name() + "' has an invalid offset or length";
    return DataStatus::Invalid;
  }
  std::string path = baseDir.empty() ? location : baseDir + "/" + location;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    why = "external data file '" + path + "' of '" + tensor.name() + "' does not exist";
    return DataStatus::Missing;
  }
  if (uint64_t(st.st_size) < uint64_t(offset) + expected) {
    why = "external data file '" + path + "' is too short for '" + tensor.name() + "' (needs " +
          std::to_string(uint64_t(offset) + expected) + " bytes, has " + std::to_string(st.st_size) + ")";
    return DataStatus::Invalid;
  }
  std::ifstream in(path, std::ios::binary);
  bytes.resize(expected);
  in.seekg(offset);
  if (!in.read(bytes.data(), std::streamsize(expected))) {
    why = "cannot read external data file '" + path + "'";
    return DataStatus::Invalid;
  }
  return DataStatus::Ok;
}

template <typename Dst, typename Field>
static void appendAs(const Field &field, std::vector<char> &bytes) {
  for (auto v : field) {
    Dst d = static_cast<Dst>(v);
    const char *p = reinterpret_cast<const char *>(&d);
    bytes.insert(bytes.end(), p, p + sizeof(Dst));
  }
}

DataStatus readTensorBytes(const TensorProto &tensor, const std::string &baseDir, std::vector<char> &bytes,
                           std::string &why) {
  size_t esize = elementSize(tensor.data_type());
  if (esize == 0) {
    why = "tensor '" + tensor.name() + "' has unsupported " + onnxTypeName(tensor.data_type());
    return DataStatus::Invalid;
  }
  auto dims = tensorShape(tensor, why);
  if (!dims)
    return DataStatus::Invalid;
  int64_t count = 1;
  for (int64_t d : *dims)
    count *= d;
  size_t expected = size_t(count) * esize;
  bytes.clear();

  if (tensor.data_location() == TensorProto::EXTERNAL)
    return readExternal(tensor, baseDir, expected, bytes, why);
  if (tensor.has_raw_data()) {
    bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
  } else {
    switch (tensor.data_type()) {
    case TensorProto::FLOAT: appendAs<float>(tensor.float_data(), bytes); break;
    case TensorProto::DOUBLE: appendAs<double>(tensor.double_data(), bytes); break;
    case TensorProto::INT64: appendAs<int64_t>(tensor.int64_data(), bytes); break;
    case TensorProto::INT32: appendAs<int32_t>(tensor.int32_data(), bytes); break;
    // 16-bit floats travel as their bit patterns in int32_data.
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: appendAs<uint16_t>(tensor.int32_data(), bytes); break;
    case TensorProto::BOOL: appendAs<uint8_t>(tensor.int32_data(), bytes); break;
    default: break;
    }
  }
  if (bytes.size() != expected) {
    why = "tensor '" + tensor.name() + "' holds " + std::to_string(bytes.size()) + " bytes of data, its shape needs " +
          std::to_string(expected);
    return DataStatus::Invalid;
  }
  return DataStatus::Ok;
}

double decimalOfFloat(float f) {
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, double(f));
    if (std::strtof(buf, nullptr) == f)
      return std::strtod(buf, nullptr);
  }
  return double(f);
}

static double halfToDouble(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0)
    return sign * std::ldexp(mant, -24);
  if (exp == 31)
    return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(mant + 1024, exp - 25);
}

static double bf16ToDouble(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool readInts(const TensorProto &tensor, const std::string &baseDir, std::vector<int64_t> &values, std::string &why) {
  std::vector<char> bytes;
  if (readTensorBytes(tensor, baseDir, bytes, why) != DataStatus::Ok)
    return false;
  values.clear();
  if (tensor.data_type() == TensorProto::INT64) {
    values.resize(bytes.size() / 8);
    std::memcpy(values.data(), bytes.data(), values.size() * 8);
  } else if (tensor.data_type() == TensorProto::INT32) {
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      int32_t v;
      std::memcpy(&v, bytes.data() + i, 4);
      values.push_back(v);
    }
  } else if (tensor.data_type() == TensorProto::BOOL) {
    for (char c : bytes)
      values.push_back(c != 0);
  } else {
    why = "tensor '" + tensor.name() + "' must hold integers, holds " + onnxTypeName(tensor.data_type());
    return false;
  }
  return true;
}

bool readDoubles(const TensorProto &tensor, const std::string &baseDir, std::vector<double> &values,
                 std::string &why) {
  std::vector<char> bytes;
  if (readTensorBytes(tensor, baseDir, bytes, why) != DataStatus::Ok)
    return false;
  values.clear();
  auto each = [&](size_t size, auto convert) {
    for (size_t i = 0; i + size <= bytes.size(); i += size)
      values.push_back(convert(bytes.data() + i));
  };
  switch (tensor.data_type()) {
  case TensorProto::FLOAT: each(4, [](const char *p) { float f; std::memcpy(&f, p, 4); return decimalOfFloat(f); }); break;
  case TensorProto::DOUBLE: each(8, [](const char *p) { double d; std::memcpy(&d, p, 8); return d; }); break;
  case TensorProto::FLOAT16: each(2, [](const char *p) { uint16_t h; std::memcpy(&h, p, 2); return halfToDouble(h); }); break;
  case TensorProto::BFLOAT16: each(2, [](const char *p) { uint16_t h; std::memcpy(&h, p, 2); return bf16ToDouble(h); }); break;
  default:
    why = "tensor '" + tensor.name() + "' must hold floating-point values, holds " + onnxTypeName(tensor.data_type());
    return false;
  }
  return true;
}

} // namespace castor::onnx_import
