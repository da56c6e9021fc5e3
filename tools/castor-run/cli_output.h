// What castor-run's commands print: errors (exit code 1) and numbers and strings in JSON lines.
#pragma once

#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace castor::run {

// Prints "<who>: error: <message>" on stderr and returns the failure exit code.
inline int fail(const std::string &message, const char *who = "castor-run") {
  fmt::print(stderr, "{}: error: {}\n", who, message);
  return 1;
}

// A JSON number; null for inf and NaN, which JSON cannot hold.
inline std::string jsonNumber(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : "null"; }

inline std::string jsonString(const std::string &v) {
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\')
      out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20)
      out += fmt::format("\\u{:04x}", int(ch));
    else
      out += ch;
  }
  return out + "\"";
}

} // namespace castor::run
