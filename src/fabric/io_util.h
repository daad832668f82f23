// Shared by the topology readers in this folder (not a public header).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace galaxy::fabric::detail {

// Byte offset -> 1-based line and column.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text) {
    starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') starts_.push_back(i + 1);
  }
  size_t line(size_t offset) const {
    return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                               starts_.begin());
  }
  size_t column(size_t offset) const { return offset - starts_[line(offset) - 1] + 1; }

 private:
  std::vector<size_t> starts_;
};

// "topo.dot:12: <message>" (column 0 = not given).
inline Error file_error(Code code, uint16_t id, std::string_view source, size_t line, size_t column,
                        const std::string& message) {
  if (column == 0) return make_error(code, id, fmt::format("{}:{}: {}", source, line, message));
  return make_error(code, id, fmt::format("{}:{}:{}: {}", source, line, column, message));
}

// Re-anchors an error from the Topology API (which knows no file) at a file line.
inline Error at_line(const Error& e, std::string_view source, size_t line) {
  return make_error(e.code, e.id, fmt::format("{}:{}: {}", source, line, e.message));
}

}  // namespace galaxy::fabric::detail
