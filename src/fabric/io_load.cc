#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fabric/io.h"
#include "fabric/io_ibsim.h"

namespace galaxy::fabric {

namespace {

bool starts_with_word(std::string_view text, std::string_view word) {
  return text.substr(0, word.size()) == word &&
         (text.size() == word.size() ||
          !std::isalnum(static_cast<unsigned char>(text[word.size()])));
}

// Skips whitespace and dot/C comments so that a dot file may start with a comment.
std::string_view skip_preamble(std::string_view text) {
  for (;;) {
    size_t i = text.find_first_not_of(" \t\r\n");
    if (i == std::string_view::npos) return {};
    text.remove_prefix(i);
    if (text.substr(0, 2) == "//") {
      size_t nl = text.find('\n');
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl);
    } else if (text.substr(0, 2) == "/*") {
      size_t close = text.find("*/");
      if (close == std::string_view::npos) return text;
      text.remove_prefix(close + 2);
    } else {
      return text;
    }
  }
}

}  // namespace

TopologyFormat detect_format(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte order mark
  std::string_view head = skip_preamble(text);
  if (!head.empty() && head.front() == '{') return TopologyFormat::kJson;
  if (starts_with_word(head, "graph") || starts_with_word(head, "digraph") ||
      starts_with_word(head, "strict"))
    return TopologyFormat::kDot;
  return TopologyFormat::kIbnetdiscover;
}

Result<Topology> parse_topology(std::string_view text, std::string_view source) {
  // Checks every reader would otherwise answer with a confusing syntax error.
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return make_error(Code::kMalformed, 3954,
                      fmt::format("topology '{}' is empty: expected ibnetdiscover output, or a "
                                  "JSON or dot topology",
                                  source));
  if (text.substr(0, 2) == "\x1f\x8b")
    return make_error(
        Code::kUnsupported, 3955,
        fmt::format("topology '{}' is gzip-compressed: decompress it first (zcat)", source));
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + nul, '\n'));
    return make_error(Code::kMalformed, 3956,
                      fmt::format("topology '{}' holds binary data (a NUL byte on line {}): "
                                  "topology files are text",
                                  source, line));
  }
  switch (detect_format(text)) {
    case TopologyFormat::kJson:
      return read_json(text, source);
    case TopologyFormat::kDot:
      return read_dot(text, source);
    case TopologyFormat::kIbnetdiscover:
      break;
  }
  return read_ibnetdiscover(text, source);
}

Result<std::string> read_fabric_file(const std::string& path, std::string_view what,
                                     size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(Code::kInvalidArgument, 3957,
                      fmt::format("{} '{}' is a directory; name a file in it", what, path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(Code::kNotFound, 3950,
                      fmt::format("{} '{}': cannot open: {}", what, path, std::strerror(errno)));
  // Read in pieces up to the bound, so that a device or pipe that never ends (/dev/zero) is
  // refused instead of read until memory runs out.
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes)
      return make_error(Code::kResourceExhausted, 3958,
                        fmt::format("{} '{}' is larger than {} MiB (the largest fabrics' "
                                    "ibnetdiscover output is a few tens of MiB)",
                                    what, path, max_bytes >> 20));
  }
  if (in.bad())
    return make_error(Code::kIoError, 3951, fmt::format("{} '{}': read failed", what, path));
  return text;
}

Result<Topology> load_topology_file(const std::string& path) {
  auto text = read_fabric_file(path, "topology file");
  if (!text.ok()) return text.error();
  return parse_topology(*text, path);
}

Status save_topology_file(const Topology& topology, const std::string& path) {
  const bool dot = path.ends_with(".dot") || path.ends_with(".gv");
  const bool ibsim = path.ends_with(".net") || path.ends_with(".ibsim");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return make_error(
        Code::kIoError, 3952,
        fmt::format("topology file '{}': cannot create: {}", path, std::strerror(errno)));
  out << (dot ? write_dot(topology) : ibsim ? write_ibsim_net(topology) : write_json(topology));
  out.close();
  if (!out)
    return make_error(Code::kIoError, 3953, fmt::format("topology file '{}': write failed", path));
  return {};
}

}  // namespace galaxy::fabric
