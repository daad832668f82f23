// Reader for the text that infiniband-diags' ibnetdiscover prints, and ibsim's net files (the
// same format, older spelling): one block per node,
//
//   switchguid=0x2c90200400001(2c90200400001)
//   Switch  36 "S-0002c90200400001"   # "leaf one" enhanced port 0 lid 2 lmc 0
//   [1][ext 3]  "H-0002c90300500001"[1](2c90300500002)   # "host one HCA-1" lid 5 4xQDR
//
// IB numbers ports from 1 (switch port 0 is the management port); our ports are 0-based, so
// IB port k is our port k-1. Users paste what they captured: chassis headers (-g), warnings
// from ibnetdiscover's stderr, a header of their own. A line that is not topology is skipped
// with a warning naming it; a topology line that does not parse is an error, since skipping it
// would lose a node or a link silently. Accepted variants: docs/topologies.md.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <unordered_map>

#include "base/log.h"
#include "fabric/io.h"
#include "fabric/io_util.h"

namespace galaxy::fabric {

namespace {

using detail::file_error;

// ibnetdiscover's lines are short (a 64-byte NodeDescription twice, GUIDs, a few numbers); a
// longer one is not its output, and quoting or parsing it whole helps nobody.
constexpr size_t kMaxLineBytes = 4096;
// Skipped lines named one by one; the rest are counted in one last line.
constexpr size_t kNamedSkips = 10;

struct HalfLink {
  uint32_t node;  // index into the nodes read
  uint32_t port;  // 0-based
  std::string remote;
  uint32_t remote_port;  // IB numbering, checked once the remote node is known
  uint16_t remote_lid;   // from the comment; 0 = none
  size_t line;
};

struct NodeRead {
  NodeKind kind;
  const char* role;
  uint32_t ports;
  std::string id;  // "S-0002c90200400001" (ibnetdiscover) or any string (ibsim)
  Identity identity;
  int32_t chassis;
  size_t line;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// "0x2c90200400001" or "2c90200400001"; 0 when it is neither.
uint64_t parse_hex(std::string_view s) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  return ec == std::errc() && end == s.data() + s.size() ? v : 0;
}

// The GUID in an ibnetdiscover node id, "S-0002c90200400001"; 0 for ids of other shapes (ibsim).
uint64_t guid_of_id(std::string_view id) {
  if (id.size() != 18 || id[1] != '-' || (id[0] != 'S' && id[0] != 'H' && id[0] != 'R')) return 0;
  return parse_hex(id.substr(2));
}

// What a `# ...` comment says: the quoted description (first to last quote: a description may
// hold quotes) and the LIDs written before and after it ("# lid 14 lmc 0 "desc" lid 6 4xSDR").
struct Comment {
  std::string description;
  uint16_t lid_before = 0;
  uint16_t lid_after = 0;
};

uint16_t lid_in(std::string_view s) {
  for (size_t at = s.find("lid "); at != std::string_view::npos; at = s.find("lid ", at + 1)) {
    if (at > 0 && !std::isspace(static_cast<unsigned char>(s[at - 1]))) continue;
    std::string_view rest = trim(s.substr(at + 4));
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (ec == std::errc() && end != rest.data() && v <= 0xFFFF) return static_cast<uint16_t>(v);
  }
  return 0;
}

Comment parse_comment(std::string_view c) {
  Comment out;
  size_t open = c.find('"');
  size_t close = c.rfind('"');
  if (open == std::string_view::npos || close == open) {
    out.lid_before = lid_in(c);
    return out;
  }
  out.description = std::string(c.substr(open + 1, close - open - 1));
  out.lid_before = lid_in(c.substr(0, open));
  out.lid_after = lid_in(c.substr(close + 1));
  return out;
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

  // "[3]", followed by "(portguid)" and "[ext 3]" in either order (ibnetdiscover -g prints the
  // external port number before a CA's port GUID, after a switch port).
  Result<uint32_t> port(const char* what) {
    if (!at('[')) return error(fmt::format("expected {} as [n]", what));
    ++pos_;
    auto n = number(what);
    GALAXY_TRY(n);
    if (!at(']')) return error(fmt::format("expected ']' after {}", what));
    ++pos_;
    for (;;) {
      if (at('(')) {
        size_t close = s_.find(')', pos_);
        if (close == std::string_view::npos) return error("port GUID has no closing ')'");
        pos_ = close + 1;
      } else if (at('[') && s_.substr(pos_ + 1, 3) == "ext") {
        size_t close = s_.find(']', pos_);
        if (close == std::string_view::npos) return error("[ext n] has no closing ']'");
        pos_ = close + 1;
      } else {
        return *n;
      }
    }
  }

  // ibsim's link attributes after a port line ("w=4", "s=2"), and ibnetdiscover -f's after its
  // comment; skipped. True when the line then ends or a comment starts.
  bool attributes_then_done() {
    for (;;) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] == '#') return true;
      size_t end = s_.find_first_of(" \t", pos_);
      std::string_view word = s_.substr(pos_, end == std::string_view::npos ? end : end - pos_);
      size_t eq = word.find('=');
      if (eq == 0 || eq == std::string_view::npos) return false;
      pos_ += word.size();
    }
  }

  // The comment after the parsed part, without the '#'.
  std::string_view comment() {
    skip_space();
    if (pos_ >= s_.size() || s_[pos_] != '#') return {};
    return s_.substr(pos_ + 1);
  }
  std::string_view rest() {
    skip_space();
    return s_.substr(pos_);
  }

 private:
  std::string_view s_;
  std::string_view source_;
  size_t number_;
  size_t pos_ = 0;
};

// The node-type word of a header line: ibnetdiscover's Switch, Ca and Rt; ibsim's and older
// ibnetdiscover's Hca; Router as `ibnetdiscover -l` spells it.
bool node_word(std::string_view word, NodeKind* kind, const char** role) {
  if (iequals(word, "Switch")) {
    *kind = NodeKind::kNrc;
    *role = "switch";
  } else if (iequals(word, "Ca") || iequals(word, "Hca")) {
    *kind = NodeKind::kNic;
    *role = "hca";
  } else if (iequals(word, "Rt") || iequals(word, "Router")) {
    *kind = NodeKind::kNrc;
    *role = "router";
  } else {
    return false;
  }
  return true;
}

// "Chassis 3 (guid 0x...)" as ibnetdiscover -g heads each chassis (also written as a comment);
// the chassis number, or -1 when the line is no chassis header.
int32_t chassis_header(std::string_view line) {
  if (!line.empty() && line.front() == '#') line = trim(line.substr(1));
  if (line.substr(0, 8) != "Chassis " && line.substr(0, 8) != "Chassis\t") return -1;
  std::string_view rest = trim(line.substr(8));
  int32_t v = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || end == rest.data() || v < 0) return -1;
  return v;
}

}  // namespace

Result<Topology> read_ibnetdiscover(std::string_view text, std::string_view source) {
  std::vector<NodeRead> nodes;
  std::unordered_map<std::string, uint32_t> by_id;
  std::vector<HalfLink> half_links;
  uint32_t current = kNoNode;
  uint64_t pending_guid = 0;  // switchguid=/caguid=/routerguid= of the block being read
  int32_t chassis = -1;       // under a "Chassis n" header until "Non-Chassis Nodes"
  size_t skipped = 0;
  size_t number = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (raw.size() > kMaxLineBytes)
      return file_error(Code::kMalformed, 3912, source, number, 0,
                        fmt::format("line of {} bytes (ibnetdiscover's are at most a few hundred; "
                                    "the limit is {}): not ibnetdiscover output? It starts '{}'",
                                    raw.size(), kMaxLineBytes, excerpt(raw, 40)));
    std::string_view line = trim(raw);
    if (line.empty()) {
      current = kNoNode;  // a blank line ends a node block
      pending_guid = 0;
      continue;
    }
    if (int32_t c = chassis_header(line); c >= 0) {
      chassis = c;
      current = kNoNode;
      continue;
    }
    if (line.front() == '#') continue;
    if (line == "Non-Chassis Nodes") {
      chassis = -1;
      current = kNoNode;
      continue;
    }
    if (line.substr(0, 9) == "Hostname:") continue;  // the host of a Xsigo chassis (-g)
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
      NodeRead& n = nodes[current];
      if (!p.attributes_then_done())
        log::warn(3921, "{}:{}: text after the remote port ignored: '{}'", source, number,
                  excerpt(p.rest(), 40));
      if (*local < 1 || *local > n.ports)
        return file_error(Code::kOutOfRange, 3902, source, number, 0,
                          fmt::format("port {} of \"{}\" is outside 1..{} (its declared ports)",
                                      *local, excerpt(n.id), n.ports));
      const Comment c = parse_comment(p.comment());
      if (n.kind == NodeKind::kNic && c.lid_before) n.identity.lids[*local - 1] = c.lid_before;
      // After the remote's description: the remote port's LID (a switch's for a switch).
      const uint16_t remote_lid = c.description.empty() ? 0 : c.lid_after;
      half_links.push_back(HalfLink{current, *local - 1, std::move(remote).value(), *remote_port,
                                    remote_lid, number});
      continue;
    }
    auto eq = line.find('=');
    auto space = line.find_first_of(" \t");
    if (eq != std::string_view::npos && (space == std::string_view::npos || eq < space)) {
      // vendid=, devid=, sysimgguid=; the node GUID of the next header from switchguid=,
      // caguid= or routerguid= ("switchguid=0x...(portguid)").
      std::string_view key = line.substr(0, eq);
      if (key == "switchguid" || key == "caguid" || key == "routerguid") {
        std::string_view v = line.substr(eq + 1);
        v = v.substr(0, v.find_first_of("( \t#"));
        pending_guid = parse_hex(v);
      }
      continue;
    }
    std::string_view word = line.substr(0, space);
    NodeKind kind;
    const char* role;
    LineParser header(line.substr(word.size()), source, number);
    auto ports = header.number("port count");
    if (!node_word(word, &kind, &role)) {
      // Not topology: a warning captured from ibnetdiscover's stderr, a title the user added.
      if (++skipped <= kNamedSkips)
        log::warn(3920, "{}:{}: not a topology line, skipped: '{}'", source, number,
                  excerpt(line, 60));
      continue;
    }
    if (!ports.ok())
      return file_error(Code::kMalformed, 3904, source, number, 0,
                        fmt::format("{} line has no port count", excerpt(word, 20)));
    auto id = header.quoted("node id");
    if (!id.ok())
      return file_error(Code::kMalformed, 3905, source, number, 0,
                        fmt::format("{} line has no quoted node id", excerpt(word, 20)));
    const uint32_t min_ports = kind == NodeKind::kNrc ? 2 : 1;
    if (*ports < min_ports || *ports > kMaxTopologyPorts)
      return file_error(
          Code::kOutOfRange, 3906, source, number, 0,
          fmt::format("{} \"{}\" declares {} ports; a {} has {}..{} ports", excerpt(word, 20),
                      excerpt(*id), *ports, role, min_ports, kMaxTopologyPorts));
    if (auto it = by_id.find(*id); it != by_id.end())
      return file_error(Code::kMalformed, 3907, source, number, 0,
                        fmt::format("node \"{}\" is described twice (first on line {})",
                                    excerpt(*id), nodes[it->second].line));
    const Comment c = parse_comment(header.comment());
    NodeRead n{kind, role, *ports, std::move(id).value(), {}, chassis, number};
    n.identity.guid = pending_guid ? pending_guid : guid_of_id(n.id);
    n.identity.description = c.description;
    if (kind == NodeKind::kNic)
      n.identity.lids.assign(n.ports, 0);
    else if (c.lid_after)
      n.identity.lids = {c.lid_after};
    pending_guid = 0;
    current = static_cast<uint32_t>(nodes.size());
    by_id[n.id] = current;
    nodes.push_back(std::move(n));
  }
  if (skipped > kNamedSkips)
    log::warn(3922, "{}: {} lines in all were not topology and were skipped", source, skipped);
  if (nodes.empty())
    return file_error(Code::kMalformed, 3915, source, number, 0,
                      fmt::format("no Switch, Ca (Hca) or Rt line{}: this is not ibnetdiscover "
                                  "output, nor a JSON or dot topology",
                                  skipped ? fmt::format(" among {} lines", skipped) : ""));
  // Each link is normally listed from both ends; resolve both before connecting so that the
  // LIDs a switch lists for its CAs are kept.
  for (const HalfLink& h : half_links) {
    auto it = by_id.find(h.remote);
    if (it == by_id.end())
      return file_error(
          Code::kNotFound, 3908, source, h.line, 0,
          fmt::format("link to \"{}\", which has no Switch/Ca/Rt block", excerpt(h.remote)));
    NodeRead& r = nodes[it->second];
    if (h.remote_port < 1 || h.remote_port > r.ports)
      return file_error(Code::kOutOfRange, 3909, source, h.line, 0,
                        fmt::format("port {} of \"{}\" is outside 1..{} (its declared ports)",
                                    h.remote_port, excerpt(h.remote), r.ports));
    if (h.remote_lid == 0) continue;
    if (r.kind == NodeKind::kNic && r.identity.lids[h.remote_port - 1] == 0)
      r.identity.lids[h.remote_port - 1] = h.remote_lid;
    else if (r.kind == NodeKind::kNrc && r.identity.lids.empty())
      r.identity.lids = {h.remote_lid};
  }
  // Names: the description where no other node has it (what users call the node), else the
  // ibnetdiscover id, which is unique ("S-0002c90200400001"); both stay findable either way.
  std::unordered_map<std::string, uint32_t> described;
  for (const NodeRead& n : nodes) ++described[n.identity.description];
  Topology t;
  for (NodeRead& n : nodes) {
    Location loc;
    loc.role = n.role;
    loc.chassis = n.chassis;
    const std::string& d = n.identity.description;
    std::string name = !d.empty() && described[d] == 1 && !by_id.count(d) ? d : n.id;
    auto node = t.add_node(n.kind, n.ports, std::move(name), std::move(loc),
                           n.kind == NodeKind::kNic ? 0 : 1);
    if (!node.ok()) return detail::at_line(node.error(), source, n.line);
    if (n.kind == NodeKind::kNic &&
        std::all_of(n.identity.lids.begin(), n.identity.lids.end(), [](uint16_t l) { return !l; }))
      n.identity.lids.clear();
    t.set_identity(*node, std::move(n.identity));
  }
  for (const HalfLink& h : half_links) {
    const uint32_t remote = by_id.at(h.remote);
    PortRef a{h.node, static_cast<uint8_t>(h.port)};
    PortRef b{remote, static_cast<uint8_t>(h.remote_port - 1)};
    auto existing = t.peer(a);
    if (existing) {
      if (*existing == b) continue;
      return file_error(
          Code::kMalformed, 3910, source, h.line, 0,
          fmt::format("port {} of {} is listed as linked to \"{}\"[{}] but is "
                      "already linked to {}[{}]",
                      h.port + 1, excerpt(t.name(h.node)), excerpt(h.remote), h.remote_port,
                      excerpt(t.name(existing->node)), existing->port + 1));
    }
    if (auto taken = t.peer(b))
      return file_error(Code::kMalformed, 3911, source, h.line, 0,
                        fmt::format("\"{}\"[{}] is already linked to {}[{}]", excerpt(h.remote),
                                    h.remote_port, excerpt(t.name(taken->node)), taken->port + 1));
    Status s = t.connect(a, b);
    if (!s.ok()) return detail::at_line(s.error(), source, h.line);
  }
  return t;
}

}  // namespace galaxy::fabric
