// Reader for the text that infiniband-diags' ibnetdiscover prints: one block per node,
//
//   Switch  24 "S-0002c90200400001"   # "leaf one" base port 0 lid 2 lmc 0
//   [1]     "H-0002c90300500001"[1](2c90300500002)   # "host one HCA-1" lid 5 4xQDR
//
// IB numbers ports from 1 (switch port 0 is the management port); our ports are 0-based, so
// IB port k is our port k-1. Mapping and accepted variants: docs/topologies.md.
#include <fmt/format.h>

#include <cctype>
#include <unordered_map>

#include "fabric/io.h"
#include "fabric/io_util.h"

namespace galaxy::fabric {

namespace {

using detail::file_error;

struct HalfLink {
  uint32_t node;
  uint32_t port;  // 0-based
  std::string remote;
  uint32_t remote_port;  // IB numbering, checked once the remote node is known
  size_t line;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

class LineParser {
 public:
  LineParser(std::string_view line, std::string_view source, size_t number)
      : s_(line), source_(source), number_(number) {}

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool at(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  Error error(const std::string& message) const {
    return file_error(Code::kMalformed, 3900, source_, number_, pos_ + 1, message);
  }

  Result<uint32_t> number(const char* what) {
    skip_space();
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])) && v < 1000000)
      v = v * 10 + static_cast<uint64_t>(s_[pos_++] - '0');
    if (pos_ == start) return error(fmt::format("expected {}", what));
    if (v >= 1000000) return error(fmt::format("{} is too large", what));
    return static_cast<uint32_t>(v);
  }

  Result<std::string> quoted(const char* what) {
    if (!at('"')) return error(fmt::format("expected {} in double quotes", what));
    size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') ++pos_;
    if (pos_ >= s_.size()) return error(fmt::format("{} has no closing quote", what));
    return std::string(s_.substr(start, pos_++ - start));
  }

  // "[3]", optionally followed by "(portguid)" and "[ext 3]".
  Result<uint32_t> port(const char* what) {
    if (!at('[')) return error(fmt::format("expected {} as [n]", what));
    ++pos_;
    auto n = number(what);
    GALAXY_TRY(n);
    if (!at(']')) return error(fmt::format("expected ']' after {}", what));
    ++pos_;
    if (at('(')) {
      while (pos_ < s_.size() && s_[pos_] != ')') ++pos_;
      if (pos_ >= s_.size()) return error("port GUID has no closing ')'");
      ++pos_;
    }
    if (pos_ + 1 < s_.size() && at('[') && s_.substr(pos_ + 1, 3) == "ext") {
      while (pos_ < s_.size() && s_[pos_] != ']') ++pos_;
      if (pos_ < s_.size()) ++pos_;
    }
    return *n;
  }

  // The description in `# "..."` after a node header, if any.
  std::string comment_description() {
    skip_space();
    if (pos_ >= s_.size() || s_[pos_] != '#') return "";
    ++pos_;
    auto d = quoted("description");
    return d.ok() ? std::move(d).value() : "";
  }

  bool done() {
    skip_space();
    return pos_ >= s_.size() || s_[pos_] == '#';
  }

 private:
  std::string_view s_;
  std::string_view source_;
  size_t number_;
  size_t pos_ = 0;
};

}  // namespace

Result<Topology> read_ibnetdiscover(std::string_view text, std::string_view source) {
  Topology t;
  std::unordered_map<std::string, uint32_t> by_id;
  std::vector<size_t> node_line;
  std::vector<HalfLink> half_links;
  uint32_t current = kNoNode;
  size_t number = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    std::string_view line = trim(raw);
    if (line.empty()) {
      current = kNoNode;  // a blank line ends a node block
      continue;
    }
    if (line.front() == '#') continue;
    LineParser p(raw, source, number);
    if (line.front() == '[') {
      if (current == kNoNode)
        return file_error(Code::kMalformed, 3901, source, number, 0,
                          "port line outside a Switch/Ca/Rt block");
      auto local = p.port("local port");
      GALAXY_TRY(local);
      auto remote = p.quoted("remote node id");
      GALAXY_TRY(remote);
      auto remote_port = p.port("remote port");
      GALAXY_TRY(remote_port);
      if (!p.done()) return p.error("unexpected text after the remote port");
      if (*local < 1 || *local > t.num_ports(current))
        return file_error(Code::kOutOfRange, 3902, source, number, 0,
                          fmt::format("port {} of {} is outside 1..{} (its declared ports)", *local,
                                      t.name(current), t.num_ports(current)));
      half_links.push_back(
          HalfLink{current, *local - 1, std::move(remote).value(), *remote_port, number});
      continue;
    }
    auto eq = line.find('=');
    auto space = line.find_first_of(" \t");
    if (eq != std::string_view::npos && (space == std::string_view::npos || eq < space))
      continue;  // vendid=, devid=, sysimgguid=, switchguid=, caguid=, routerguid=
    std::string_view word = line.substr(0, space);
    NodeKind kind;
    const char* role;
    if (word == "Switch") {
      kind = NodeKind::kNrc;
      role = "switch";
    } else if (word == "Ca") {
      kind = NodeKind::kNic;
      role = "hca";
    } else if (word == "Rt") {
      kind = NodeKind::kNrc;
      role = "router";
    } else {
      return file_error(Code::kMalformed, 3903, source, number, 0,
                        fmt::format("unrecognised line starting '{}' (expected Switch, Ca, Rt, a "
                                    "port line [n] or key=value)",
                                    word));
    }
    LineParser header(line.substr(word.size()), source, number);
    auto ports = header.number("port count");
    if (!ports.ok())
      return file_error(Code::kMalformed, 3904, source, number, 0,
                        fmt::format("{} line has no port count", word));
    auto id = header.quoted("node id");
    if (!id.ok())
      return file_error(Code::kMalformed, 3905, source, number, 0,
                        fmt::format("{} line has no quoted node id", word));
    const uint64_t min_ports = kind == NodeKind::kNrc ? 2 : 1;
    if (*ports < min_ports || *ports > kMaxPorts)
      return file_error(Code::kOutOfRange, 3906, source, number, 0,
                        fmt::format("{} \"{}\" declares {} ports; a Galaxy {} has {}..{} ports",
                                    word, *id, *ports, node_kind_name(kind), min_ports, kMaxPorts));
    if (by_id.count(*id))
      return file_error(Code::kMalformed, 3907, source, number, 0,
                        fmt::format("node \"{}\" is described twice (first on line {})", *id,
                                    node_line[by_id[*id]]));
    std::string description = header.comment_description();
    Location loc;
    loc.role = role;
    auto node = t.add_node(kind, *ports, description.empty() ? *id : description, std::move(loc),
                           kind == NodeKind::kNic ? 0 : 1);
    if (!node.ok()) return detail::at_line(node.error(), source, number);
    by_id[*id] = *node;
    node_line.push_back(number);
    current = *node;
  }
  // Each link is normally listed from both ends; connect it once and check that both agree.
  for (const HalfLink& h : half_links) {
    auto it = by_id.find(h.remote);
    if (it == by_id.end())
      return file_error(Code::kNotFound, 3908, source, h.line, 0,
                        fmt::format("link to \"{}\", which has no Switch/Ca/Rt block", h.remote));
    uint32_t remote = it->second;
    if (h.remote_port < 1 || h.remote_port > t.num_ports(remote))
      return file_error(Code::kOutOfRange, 3909, source, h.line, 0,
                        fmt::format("port {} of \"{}\" is outside 1..{} (its declared ports)",
                                    h.remote_port, h.remote, t.num_ports(remote)));
    PortRef a{h.node, static_cast<uint8_t>(h.port)};
    PortRef b{remote, static_cast<uint8_t>(h.remote_port - 1)};
    auto existing = t.peer(a);
    if (existing) {
      if (*existing == b) continue;
      return file_error(Code::kMalformed, 3910, source, h.line, 0,
                        fmt::format("port {} of {} is listed as linked to \"{}\"[{}] but is "
                                    "already linked to {}[{}]",
                                    h.port + 1, t.name(h.node), h.remote, h.remote_port,
                                    t.name(existing->node), existing->port + 1));
    }
    if (auto taken = t.peer(b))
      return file_error(Code::kMalformed, 3911, source, h.line, 0,
                        fmt::format("\"{}\"[{}] is already linked to {}[{}]", h.remote,
                                    h.remote_port, t.name(taken->node), taken->port + 1));
    Status s = t.connect(a, b);
    if (!s.ok()) return detail::at_line(s.error(), source, h.line);
  }
  return t;
}

}  // namespace galaxy::fabric
