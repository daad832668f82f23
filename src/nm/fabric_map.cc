#include "nm/fabric_map.h"

#include <fmt/format.h>

#include <algorithm>

namespace galaxy::nm {

std::optional<MgmtTarget> target_along(const fabric::Topology& t,
                                       const std::vector<uint32_t>& parent,
                                       const std::vector<uint8_t>& port_to_parent, uint32_t to,
                                       wire::ChipId chip) {
  // Walk from `to` back to the server: the forward route is the reverse of the output ports
  // taken by each NRC on the way down; the backward route is each chip's port to its parent.
  std::vector<uint32_t> path;
  for (uint32_t v = to; v != UINT32_MAX; v = parent[v]) path.push_back(v);
  std::reverse(path.begin(), path.end());  // server NIC ... to
  MgmtTarget m;
  m.chip_id = chip;
  m.type = t.is_nic(to) ? wire::ChipType::kNic : wire::ChipType::kNrc;
  for (size_t i = 1; i + 1 < path.size(); ++i) {
    // path[i] is an NRC; its output towards path[i+1] is the peer port of path[i+1]'s link up.
    auto up = t.peer({path[i + 1], port_to_parent[path[i + 1]]});
    if (!m.forward.push(up->port).ok()) return std::nullopt;
  }
  for (size_t i = path.size() - 1; i >= 1; --i) {
    if (t.is_nic(path[i])) continue;  // a NIC has one way out and consumes no hop
    if (!m.backward.push(port_to_parent[path[i]]).ok()) return std::nullopt;
  }
  if (!m.forward.carried() || !m.backward.carried()) return std::nullopt;  // long and wide
  return m;
}

void recompute_routes(FabricMap& map) {
  const auto& t = map.topology;
  const uint32_t n = t.num_nodes();
  std::vector<uint32_t> parent(n, UINT32_MAX), order{map.server_node}, depth(n, 0);
  std::vector<uint8_t> port_to_parent(n, 0);
  std::vector<bool> seen(n, false);
  seen[map.server_node] = true;
  for (size_t qi = 0; qi < order.size(); ++qi) {
    uint32_t v = order[qi];
    if (t.is_nic(v) && v != map.server_node) continue;
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      auto peer = t.peer({v, p});
      if (!peer || seen[peer->node]) continue;
      seen[peer->node] = true;
      parent[peer->node] = v;
      port_to_parent[peer->node] = peer->port;
      depth[peer->node] = depth[v] + 1;
      order.push_back(peer->node);
    }
  }
  for (uint32_t v = 0; v < n; ++v) {
    if (v == map.server_node) continue;
    auto target =
        seen[v] ? target_along(t, parent, port_to_parent, v, map.chip_id[v]) : std::nullopt;
    if (!target) {
      map.target[v] = MgmtTarget{map.chip_id[v], map.target[v].type, {}, {}};
      map.hops[v] = UINT8_MAX;  // unreachable
      continue;
    }
    map.target[v] = *target;
    map.hops[v] = static_cast<uint8_t>(depth[v] - 1);
  }
}

Result<FabricMap> map_from_topology(const fabric::Topology& t, uint32_t server) {
  if (server >= t.num_nodes() || !t.is_nic(server))
    return make_error(Code::kNotFound, 5020, fmt::format("server node {} is not a NIC", server));
  if (t.num_nodes() > wire::kMaxChips)
    return make_error(Code::kOutOfRange, 5021,
                      fmt::format("fabric has {} chips; chip ids are {}-bit (at most {} chips)",
                                  t.num_nodes(), wire::kChipIdBits, wire::kMaxChips));
  FabricMap m;
  m.topology = t;
  m.server_node = server;
  const uint32_t n = t.num_nodes();
  m.chip_id.resize(n);
  m.target.resize(n);
  m.hops.resize(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    m.chip_id[v] = static_cast<wire::ChipId>(v);
    m.node_of[static_cast<wire::ChipId>(v)] = v;
    m.target[v].chip_id = static_cast<wire::ChipId>(v);
    m.target[v].type = t.is_nic(v) ? wire::ChipType::kNic : wire::ChipType::kNrc;
  }
  recompute_routes(m);
  return m;
}

}  // namespace galaxy::nm
