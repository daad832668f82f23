// Helpers shared by the wire tests: hex dumps for golden vectors, error matching.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace galaxy::wire::testing {

inline std::string hex(std::span<const uint8_t> b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s += digits[x >> 4];
    s += digits[x & 15];
  }
  return s;
}

inline std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < s.size(); i += 2) {
    b.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  }
  return b;
}

// Fails unless `r` is an error whose message contains `needle`.
template <class R>
::testing::AssertionResult FailsWith(const R& r, const std::string& needle) {
  if (r.ok()) return ::testing::AssertionFailure() << "decoded, expected error with " << needle;
  if (r.error().message.find(needle) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "error '" << r.error().message << "' lacks '" << needle << "'";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace galaxy::wire::testing
