// Typed status for hot paths (UCX ucs_status_t style) with a stable error id on every error
// (OpenSM "ERR 3304" style). Exceptions are used only at the CLI/server edge.
//
// Error ids are unique across the code base (scripts/check-error-ids enforces it) and stable:
// once published an id keeps its meaning. Ranges: 1xxx wire, 2xxx chip, 3xxx fabric,
// 4xxx engine, 5xxx nm, 6xxx glex, 8xxx nmd, 9xxx cli, 0xxx base.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace galaxy {

enum class Code : uint8_t {
  kOk = 0,
  kInvalidArgument,   // a parameter the caller chose is wrong
  kOutOfRange,        // an address, index or value outside its field's range
  kMalformed,         // bytes that do not decode (truncated, bad marker, reserved bits set)
  kCrcMismatch,       // the CRC of a packet does not match its contents
  kNotFound,          // a named thing (chip, port, registry entry, file) does not exist
  kUnsupported,       // well-formed but not something this model implements
  kPermissionDenied,  // wrong management or memory key
  kTimeout,           // no answer within the allowed time
  kIoError,           // the operating system refused (file, socket)
  kResourceExhausted  // a queue or table is full
};

const char* code_name(Code c);

struct Error {
  Code code = Code::kInvalidArgument;
  uint16_t id = 0;      // stable unique id, printed as E<id>
  std::string message;  // names the field and the bad value

  // "E1203 malformed: hop_num = 21 exceeds the maximum 20"; control bytes of the message (a NUL
  // quoted from a file) shown as \xNN, so that printing it with "%s" neither cuts nor garbles it.
  std::string to_string() const;
};

// User input quoted in a message: at most `max` bytes, cut with "... (N bytes)", control bytes
// and NUL as \xNN. A 50 MB line of a pasted file is named, not echoed.
std::string excerpt(std::string_view text, size_t max = 64);

inline Error make_error(Code code, uint16_t id, std::string message) {
  return Error{code, id, std::move(message)};
}

// Status: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT: implicit on purpose, `return make_error(..)`
  static Status ok_status() { return Status(); }

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }
  std::string to_string() const { return ok() ? "ok" : error_->to_string(); }

 private:
  std::optional<Error> error_;
};

// Result<T>: a value or an Error (std::expected is C++23; Debian 12's g++ 12 lacks it).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit on purpose
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

// Propagate an error from a Status or Result expression.
#define GALAXY_TRY(expr)                                   \
  do {                                                     \
    auto&& galaxy_try_s_ = (expr);                         \
    if (!galaxy_try_s_.ok()) return galaxy_try_s_.error(); \
  } while (0)

}  // namespace galaxy
