// Status and Expected<T>: the error currency of the runtime's public API.
//
// Header-only and exception-free, so that code built without exceptions (the MLIR-based
// compiler) can call the plan library.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace castor {

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }

  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return message_; }

  // Prefixes the message with some context ("reading plan.bin: ...").
  Status withContext(const std::string &context) const {
    return failed_ ? error(context + ": " + message_) : *this;
  }

private:
  bool failed_ = false;
  std::string message_;
};

template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status status) : status_(std::move(status)) {
    if (status_.isOk())
      status_ = Status::error("internal error: Expected built from a successful Status");
  }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return value_.has_value(); }
  const Status &status() const { return status_; }
  const std::string &message() const { return status_.message(); }

  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace castor

// Returns early from a function returning Status (or Expected) when `expr` fails.
#define CASTOR_RETURN_IF_ERROR(expr)                                                               \
  do {                                                                                             \
    ::castor::Status castor_status_ = (expr);                                                      \
    if (!castor_status_.isOk())                                                                    \
      return castor_status_;                                                                       \
  } while (0)
