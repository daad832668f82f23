#include "cli/option_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "base/status.h"
#include "cli/peers.h"

namespace galaxy::cli {

namespace {

std::string range_text(double lo, double hi, Bounds b) {
  return fmt::format("{}{}, {}{}", b == Bounds::kAboveLow ? "(" : "[", lo, hi,
                     b == Bounds::kBelowHigh ? ")" : "]");
}

}  // namespace

CLI::Validator real_in(double lo, double hi, Bounds bounds) {
  const std::string range = range_text(lo, hi, bounds);
  return CLI::Validator(
      [lo, hi, bounds, range](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        const double v = text.empty() ? 0 : std::strtod(begin, &end);
        // strtod also reads "nan", "inf" and hex floats, and overflows to inf: refused here, since
        // a non-finite interval or time overflows the integer clocks it is converted to.
        if (text.empty() || end != begin + text.size() || !std::isfinite(v))
          return make_error(Code::kInvalidArgument, 9700,
                            fmt::format("'{}' is not a finite number (expected {})", text, range))
              .to_string();
        const bool low_ok = bounds == Bounds::kAboveLow ? v > lo : v >= lo;
        const bool high_ok = bounds == Bounds::kBelowHigh ? v < hi : v <= hi;
        if (!low_ok || !high_ok)
          return make_error(Code::kOutOfRange, 9701, fmt::format("{} is outside {}", text, range))
              .to_string();
        return {};
      },
      range);
}

CLI::Validator integer_in(int64_t lo, uint64_t hi) {
  const std::string range = fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        auto not_integer = [&] {
          return make_error(Code::kInvalidArgument, 9702,
                            fmt::format("'{}' is not an integer (decimal without a leading 0, "
                                        "or 0x hex; expected {})",
                                        text, range))
              .to_string();
        };
        auto outside = [&] {
          return make_error(Code::kOutOfRange, 9703, fmt::format("{} is outside {}", text, range))
              .to_string();
        };
        std::string_view s = text;
        const bool negative = !s.empty() && s.front() == '-';
        if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
        int base = 10;
        if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
          s.remove_prefix(2);
          base = 16;
        } else if (s.size() > 1 && s[0] == '0') {
          return not_integer();  // CLI11 would read it as octal
        }
        uint64_t magnitude = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude, base);
        if (s.empty() || p != s.data() + s.size()) return not_integer();
        if (ec == std::errc::result_out_of_range) return outside();
        if (ec != std::errc()) return not_integer();
        if (negative && magnitude != 0) {
          // -magnitude >= lo, without forming a value outside int64_t.
          if (lo >= 0 || magnitude - 1 > static_cast<uint64_t>(-(lo + 1))) return outside();
          return {};
        }
        if (magnitude > hi || (lo > 0 && magnitude < static_cast<uint64_t>(lo))) return outside();
        return {};
      },
      range);
}

CLI::Validator peer_list() {
  return CLI::Validator(
      [](std::string& text) {
        auto p = parse_peer_list(text);
        return p.ok() ? std::string() : p.error().to_string();
      },
      "");
}

CLI::Validator any_uint64() {
  CLI::Validator v = integer_in(0, std::numeric_limits<uint64_t>::max());
  v.description("");  // the type says it: UINT
  return v;
}

}  // namespace galaxy::cli
