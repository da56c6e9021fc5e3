#include "weights/json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace castor::json {

const Value *Value::get(const std::string &key) const {
  for (const auto &[k, v] : object)
    if (k == key)
      return &v;
  return nullptr;
}

namespace {

class Parser {
public:
  explicit Parser(const std::string &text) : s_(text) {}

  Expected<Value> parseDocument() {
    Value v;
    if (!parseValue(v, 0))
      return Status::error(error_);
    skipSpace();
    if (pos_ != s_.size())
      return Status::error("unexpected data after the JSON value at byte " + std::to_string(pos_));
    return v;
  }

private:
  bool fail(const std::string &why) {
    if (error_.empty())
      error_ = why + " at byte " + std::to_string(pos_);
    return false;
  }

  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0)
      return fail("invalid literal");
    pos_ += n;
    return true;
  }

  bool parseValue(Value &v, int depth) {
    if (depth > 64)
      return fail("JSON nested too deeply");
    skipSpace();
    if (pos_ >= s_.size())
      return fail("unexpected end of JSON");
    char c = s_[pos_];
    if (c == '{')
      return parseObject(v, depth);
    if (c == '[')
      return parseArray(v, depth);
    if (c == '"') {
      v.type = Value::Type::String;
      return parseString(v.string);
    }
    if (c == 't') {
      v.type = Value::Type::Bool;
      v.boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      v.type = Value::Type::Bool;
      return literal("false");
    }
    if (c == 'n')
      return literal("null");
    return parseNumber(v);
  }

  bool parseObject(Value &v, int depth) {
    v.type = Value::Type::Object;
    ++pos_;
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skipSpace();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"')
        return fail("expected a string key");
      if (!parseString(key))
        return false;
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':')
        return fail("expected ':'");
      ++pos_;
      Value item;
      if (!parseValue(item, depth + 1))
        return false;
      v.object.emplace_back(std::move(key), std::move(item));
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool parseArray(Value &v, int depth) {
    v.type = Value::Type::Array;
    ++pos_;
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      Value item;
      if (!parseValue(item, depth + 1))
        return false;
      v.array.push_back(std::move(item));
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t &out) {
    if (pos_ + 4 > s_.size())
      return fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9')
        out |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        out |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        out |= uint32_t(c - 'A' + 10);
      else
        return fail("invalid \\u escape");
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++pos_; // opening quote
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"')
        return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size())
        break;
      char e = s_[pos_++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!hex4(cp))
          return false;
        if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 1 < s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
          pos_ += 2;
          uint32_t lo = 0;
          if (!hex4(lo))
            return false;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        return fail("invalid escape");
      }
    }
    return fail("unterminated string");
  }

  bool parseNumber(Value &v) {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-')
      ++pos_;
    bool integer = true;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integer = false;
        ++pos_;
      } else {
        break;
      }
    }
    std::string text = s_.substr(start, pos_ - start);
    if (text.empty() || text == "-")
      return fail("invalid value");
    char *end = nullptr;
    v.type = Value::Type::Number;
    v.number = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size())
      return fail("invalid number '" + text + "'");
    if (integer) {
      errno = 0;
      long long i = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0) {
        v.isInteger = true;
        v.integer = i;
      }
    }
    return true;
  }

  const std::string &s_;
  size_t pos_ = 0;
  std::string error_;
};

} // namespace

Expected<Value> parse(const std::string &text) { return Parser(text).parseDocument(); }

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        static const char *hex = "0123456789abcdef";
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += char(c);
      }
    }
  }
  return out + "\"";
}

} // namespace castor::json
