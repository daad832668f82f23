#include "fabric/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "base/spec.h"

namespace galaxy::fabric {

const char* node_kind_name(NodeKind kind) {
  return kind == NodeKind::kNic ? "nic" : "nrc";
}

Result<uint32_t> Topology::add_node(NodeKind kind, uint32_t ports, std::string name,
                                    Location location, uint8_t level) {
  // A switch has at least 2 ports, a NIC at least one; InfiniBand's 8-bit port numbers bound
  // both (kMaxTopologyPorts).
  const uint32_t min_ports = kind == NodeKind::kNrc ? 2 : 1;
  if (ports < min_ports || ports > kMaxTopologyPorts)
    return make_error(
        Code::kOutOfRange, 3000,
        fmt::format("node '{}': ports = {} is outside [{}, {}] for {} {}", name, ports, min_ports,
                    kMaxTopologyPorts, kind == NodeKind::kNrc ? "an" : "a", node_kind_name(kind)));
  if (num_nodes() == kNoNode - 1)
    return make_error(Code::kResourceExhausted, 3001, "topology has too many nodes");
  uint32_t id = num_nodes();
  kind_.push_back(kind);
  level_.push_back(level);
  name_.push_back(std::move(name));
  location_.push_back(std::move(location));
  if (!identity_.empty()) identity_.emplace_back();
  if (kind == NodeKind::kNic) {
    nic_index_.push_back(num_nics());
    nic_nodes_.push_back(id);
  } else {
    nic_index_.push_back(kNoNode);
  }
  first_port_.push_back(first_port_.back() + ports);
  peer_node_.resize(first_port_.back(), kFree);
  peer_port_.resize(first_port_.back(), 0);
  return id;
}

void Topology::reserve(uint32_t nodes, uint32_t ports) {
  kind_.reserve(nodes);
  level_.reserve(nodes);
  name_.reserve(nodes);
  location_.reserve(nodes);
  nic_index_.reserve(nodes);
  first_port_.reserve(nodes + 1);
  peer_node_.reserve(ports);
  peer_port_.reserve(ports);
}

Status Topology::connect(PortRef a, PortRef b) {
  for (const PortRef& p : {a, b}) {
    if (p.node >= num_nodes())
      return make_error(
          Code::kOutOfRange, 3002,
          fmt::format("link end: node {} does not exist ({} nodes)", p.node, num_nodes()));
    if (p.port >= num_ports(p.node))
      return make_error(Code::kOutOfRange, 3003,
                        fmt::format("link end: port {} of node {} ('{}') exceeds its {} ports",
                                    p.port, p.node, name_[p.node], num_ports(p.node)));
  }
  if (a == b)
    return make_error(Code::kInvalidArgument, 3004,
                      fmt::format("link joins port {} of node {} ('{}') to itself", a.port, a.node,
                                  name_[a.node]));
  for (const PortRef& p : {a, b}) {
    uint32_t s = slot(p);
    if (peer_node_[s] != kFree)
      return make_error(
          Code::kInvalidArgument, 3005,
          fmt::format("port {} of node {} ('{}') is already linked to port {} of node {} ('{}')",
                      p.port, p.node, name_[p.node], peer_port_[s], peer_node_[s],
                      name_[peer_node_[s]]));
  }
  peer_node_[slot(a)] = b.node;
  peer_port_[slot(a)] = b.port;
  peer_node_[slot(b)] = a.node;
  peer_port_[slot(b)] = a.port;
  ++num_links_;
  return {};
}

std::optional<PortRef> Topology::peer(PortRef p) const {
  if (p.node >= num_nodes() || p.port >= num_ports(p.node)) return std::nullopt;
  uint32_t s = slot(p);
  if (peer_node_[s] == kFree) return std::nullopt;
  return PortRef{peer_node_[s], peer_port_[s]};
}

std::optional<uint32_t> Topology::find_node(const std::string& name) const {
  for (uint32_t i = 0; i < num_nodes(); ++i)
    if (name_[i] == name) return i;
  return std::nullopt;
}

const Identity Topology::kNoIdentity{};

std::string guid_name(char prefix, uint64_t guid) {
  return fmt::format("{}-{:016x}", prefix, guid);
}

void Topology::set_identity(uint32_t node, Identity identity) {
  if (node >= num_nodes()) return;
  if (identity_.empty()) {
    if (identity.empty()) return;
    identity_.resize(num_nodes());
  }
  identity_[node] = std::move(identity);
}

std::optional<uint64_t> parse_guid(std::string_view text) {
  if (text.size() > 2 && (text[0] == 'S' || text[0] == 'H' || text[0] == 'R') && text[1] == '-')
    text.remove_prefix(2);
  else if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
    text.remove_prefix(2);
  else
    return std::nullopt;  // bare hex would take chip ids and names such as "add1" for GUIDs
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0) return std::nullopt;
  return v;
}

Result<uint32_t> Topology::resolve(std::string_view text) const {
  const std::string s(text);
  if (s.rfind("nic:", 0) == 0) {
    if (num_nics() == 0)
      return make_error(Code::kNotFound, 3006,
                        fmt::format("chip '{}': the fabric has no NICs", excerpt(text)));
    auto i = parse_int("nic index", s.substr(4), 0, static_cast<int64_t>(num_nics()) - 1);
    if (!i.ok()) return i.error();
    return nic_node(static_cast<uint32_t>(*i));
  }
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
    auto id = parse_int("chip", s, 0, static_cast<int64_t>(num_nodes()) - 1);
    if (!id.ok())
      return make_error(
          Code::kNotFound, 3007,
          fmt::format("chip {} is not in the fabric ({} chips)", excerpt(text), num_nodes()));
    return static_cast<uint32_t>(*id);
  }
  if (auto n = find_node(s)) return *n;
  const auto guid = parse_guid(text);
  std::vector<uint32_t> described;
  for (uint32_t v = 0; v < static_cast<uint32_t>(identity_.size()); ++v) {
    if (guid && identity_[v].guid == *guid) return v;
    if (!text.empty() && identity_[v].description == text) described.push_back(v);
  }
  if (described.size() == 1) return described[0];
  if (described.size() > 1) {
    std::string names;
    for (size_t k = 0; k < described.size() && k < 8; ++k)
      names += fmt::format("{}{} ({})", k ? ", " : "", described[k], name(described[k]));
    return make_error(
        Code::kInvalidArgument, 3008,
        fmt::format("chip '{}' is the description of {} chips: {}{}; name one by chip id, name or "
                    "GUID",
                    excerpt(text), described.size(), names, described.size() > 8 ? ", ..." : ""));
  }
  return make_error(Code::kNotFound, 3009,
                    fmt::format("chip '{}' is neither a chip id, nic:<index>, a chip name, a "
                                "description nor a GUID of this fabric",
                                excerpt(text)));
}

std::vector<uint32_t> Topology::bfs_distances(uint32_t source) const {
  std::vector<uint32_t> dist(num_nodes(), kNoNode);
  if (source >= num_nodes()) return dist;
  std::vector<uint32_t> queue;
  queue.reserve(num_nodes());
  dist[source] = 0;
  queue.push_back(source);
  for (size_t head = 0; head < queue.size(); ++head) {
    uint32_t u = queue[head];
    // NICs do not forward: a NIC other than the source ends a path.
    if (u != source && kind_[u] == NodeKind::kNic) continue;
    for (uint32_t s = first_port_[u]; s < first_port_[u + 1]; ++s) {
      uint32_t v = peer_node_[s];
      if (v == kFree || dist[v] != kNoNode) continue;
      dist[v] = dist[u] + (kind_[v] == NodeKind::kNrc ? 1 : 0);
      queue.push_back(v);
    }
  }
  return dist;
}

namespace {

// The NRC-only graph in compressed-sparse-row form, for the all-pairs pass of analyze().
struct SwitchGraph {
  std::vector<uint32_t> index_of;  // node -> switch index (kNoNode for NICs)
  std::vector<uint32_t> offset;    // switch index -> first neighbour in `adjacent`
  std::vector<uint32_t> adjacent;
  std::vector<uint32_t> nics_attached;
};

SwitchGraph make_switch_graph(const Topology& t) {
  SwitchGraph g;
  g.index_of.assign(t.num_nodes(), kNoNode);
  uint32_t n = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    if (!t.is_nic(v)) g.index_of[v] = n++;
  g.offset.assign(n + 1, 0);
  g.nics_attached.assign(n, 0);
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    uint32_t degree = 0;
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, static_cast<uint8_t>(p)});
      if (!q) continue;
      if (t.is_nic(q->node))
        ++g.nics_attached[g.index_of[v]];
      else
        ++degree;
    }
    g.offset[g.index_of[v] + 1] = degree;
  }
  for (uint32_t i = 0; i < n; ++i) g.offset[i + 1] += g.offset[i];
  g.adjacent.resize(g.offset[n]);
  std::vector<uint32_t> fill(g.offset.begin(), g.offset.end() - 1);
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, static_cast<uint8_t>(p)});
      if (q && !t.is_nic(q->node)) g.adjacent[fill[g.index_of[v]]++] = g.index_of[q->node];
    }
  }
  return g;
}

// Every NIC has at most one linked port and it leads to an NRC: NIC-to-NIC distances then
// follow from switch-to-switch distances.
bool nics_are_simple(const Topology& t) {
  for (uint32_t i = 0; i < t.num_nics(); ++i) {
    uint32_t v = t.nic_node(i);
    uint32_t linked = 0;
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, static_cast<uint8_t>(p)});
      if (!q) continue;
      if (t.is_nic(q->node)) return false;
      ++linked;
    }
    if (linked > 1) return false;
  }
  return true;
}

// 64 breadth-first searches at once, one bit per source switch, over the switch graph
// (TH-2: 2,288 sources -> 36 passes).
void max_hops_bitparallel(const Topology& t, FabricStats& stats) {
  SwitchGraph g = make_switch_graph(t);
  std::vector<uint32_t> sources;
  uint64_t attached_nics = 0;
  for (uint32_t s = 0; s + 1 < g.offset.size(); ++s) {
    if (g.nics_attached[s] == 0) continue;
    sources.push_back(s);
    attached_nics += g.nics_attached[s];
    if (g.nics_attached[s] >= 2) stats.max_hops = std::max(stats.max_hops, 1u);
  }
  if (attached_nics < t.num_nics() && t.num_nics() >= 2) stats.connected = false;
  uint32_t n = static_cast<uint32_t>(g.nics_attached.size());
  std::vector<uint64_t> visited(n), frontier(n), next(n);
  uint32_t max_edges = 0;
  for (size_t base = 0; base < sources.size(); base += 64) {
    size_t count = std::min<size_t>(64, sources.size() - base);
    uint64_t all = count == 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
    std::fill(visited.begin(), visited.end(), 0);
    std::fill(frontier.begin(), frontier.end(), 0);
    for (size_t b = 0; b < count; ++b)
      visited[sources[base + b]] = frontier[sources[base + b]] = uint64_t{1} << b;
    for (uint32_t level = 1;; ++level) {
      bool grew = false;
      for (uint32_t v = 0; v < n; ++v) {
        uint64_t reach = 0;
        for (uint32_t a = g.offset[v]; a < g.offset[v + 1]; ++a) reach |= frontier[g.adjacent[a]];
        reach &= ~visited[v];
        next[v] = reach;
        if (reach == 0) continue;
        grew = true;
        if (g.nics_attached[v] != 0) max_edges = std::max(max_edges, level);
      }
      if (!grew) break;
      for (uint32_t v = 0; v < n; ++v) visited[v] |= next[v];
      frontier.swap(next);
    }
    for (uint32_t s : sources)
      if (visited[s] != all) stats.connected = false;
  }
  // A path crossing `max_edges` switch-to-switch links passes max_edges + 1 NRCs.
  if (max_edges > 0) stats.max_hops = std::max(stats.max_hops, max_edges + 1);
}

void max_hops_per_nic(const Topology& t, FabricStats& stats) {
  for (uint32_t i = 0; i < t.num_nics(); ++i) {
    std::vector<uint32_t> dist = t.bfs_distances(t.nic_node(i));
    for (uint32_t j = 0; j < t.num_nics(); ++j) {
      if (j == i) continue;
      uint32_t d = dist[t.nic_node(j)];
      if (d == kNoNode)
        stats.connected = false;
      else
        stats.max_hops = std::max(stats.max_hops, d);
    }
  }
}

}  // namespace

std::vector<uint64_t> hop_histogram(const Topology& topology, uint32_t server_node,
                                    uint32_t* unreachable_nrcs) {
  std::vector<uint64_t> histogram;
  uint32_t unreachable = 0;
  if (server_node >= topology.num_nodes() || !topology.is_nic(server_node)) return histogram;
  std::vector<uint32_t> dist = topology.bfs_distances(server_node);
  for (uint32_t v = 0; v < topology.num_nodes(); ++v) {
    if (topology.is_nic(v)) continue;
    if (dist[v] == kNoNode) {
      ++unreachable;
      continue;
    }
    uint32_t h = dist[v] - 1;
    if (histogram.size() <= h) histogram.resize(h + 1, 0);
    ++histogram[h];
  }
  if (unreachable_nrcs != nullptr) *unreachable_nrcs = unreachable;
  return histogram;
}

FabricStats analyze(const Topology& topology, uint32_t server_nic) {
  FabricStats stats;
  stats.nics = topology.num_nics();
  stats.nrcs = topology.num_nrcs();
  stats.links = topology.num_links();
  if (nics_are_simple(topology))
    max_hops_bitparallel(topology, stats);
  else
    max_hops_per_nic(topology, stats);
  if (server_nic < topology.num_nics())
    stats.hop_histogram =
        hop_histogram(topology, topology.nic_node(server_nic), &stats.unreachable_nrcs);
  return stats;
}

}  // namespace galaxy::fabric
