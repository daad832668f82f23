#include "base/status.h"

#include <fmt/format.h>

namespace galaxy {

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kOutOfRange:
      return "out of range";
    case Code::kMalformed:
      return "malformed";
    case Code::kCrcMismatch:
      return "crc mismatch";
    case Code::kNotFound:
      return "not found";
    case Code::kUnsupported:
      return "unsupported";
    case Code::kPermissionDenied:
      return "permission denied";
    case Code::kTimeout:
      return "timeout";
    case Code::kIoError:
      return "i/o error";
    case Code::kResourceExhausted:
      return "resource exhausted";
  }
  return "unknown";
}

std::string Error::to_string() const {
  return fmt::format("E{:04} {}: {}", id, code_name(code), message);
}

}  // namespace galaxy
