// A small JSON reader, enough for safetensors headers and npy-adjacent metadata.
// Numbers keep their integer value exactly when they are integers.
#pragma once

#include "castor/status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace castor::json {

struct Value {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  double number = 0;
  bool isInteger = false;
  int64_t integer = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object; // in file order

  const Value *get(const std::string &key) const;
};

Expected<Value> parse(const std::string &text);

// A JSON string literal, quotes included.
std::string quote(const std::string &s);

} // namespace castor::json
