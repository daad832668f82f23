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

namespace {

// Appends `text` with control bytes other than tab and newline as \xNN.
void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7F)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
}

}  // namespace

std::string Error::to_string() const {
  std::string out = fmt::format("E{:04} {}: ", id, code_name(code));
  append_escaped(out, message);
  return out;
}

std::string excerpt(std::string_view text, size_t max) {
  std::string out;
  if (text.size() <= max) {
    append_escaped(out, text);
    return out;
  }
  append_escaped(out, text.substr(0, max));
  out += fmt::format("... ({} bytes)", text.size());
  return out;
}

}  // namespace galaxy
