// What the management server knows of its fabric after discovery (docs/system.md 2.5.5): every chip
// with its id and a source route to it, every port-to-port adjacency, as a fabric::Topology so
// that routing engines, path trace and cabling checks run on it.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fabric/topology.h"
#include "nm/mgmt_port.h"

namespace galaxy::nm {

struct FabricMap {
  fabric::Topology topology;          // node ids in discovery order; the server NIC is node 0
  std::vector<wire::ChipId> chip_id;  // node -> chip id
  std::vector<MgmtTarget> target;     // node -> how to reach it (NICs: through their NRC)
  std::vector<uint8_t> hops;          // node -> h (NRCs strictly between the server and it)
  std::unordered_map<wire::ChipId, uint32_t> node_of;  // chip id -> node
  uint32_t server_node = 0;
  // For the routing engines: no range write may cover a destination the engine left without a
  // route at that (node, input class). The chips never use such entries (no packet for that
  // destination enters that state), so by default ranges run across them; an InfiniBand LFT has
  // one entry for every input port, and route_ib merges the classes' sets into it.
  bool exact_ranges = false;

  uint32_t num_nodes() const { return topology.num_nodes(); }
};

}  // namespace galaxy::nm

namespace galaxy::nm {

// The map discovery should find, computed from a known topology (chip id = node id, as the
// simulated engine programs them): for tests and for verifying discovery. Routes follow a
// BFS shortest-path tree from the server NIC (node `server_nic_node`).
Result<FabricMap> map_from_topology(const fabric::Topology& topology, uint32_t server_nic_node);

// Rebuilds `map.target`/`map.hops` from `map.topology` by BFS from the server (chip ids kept);
// a chip the server cannot reach, or reaches only by a route longer than a management packet's
// source route holds (docs/system.md 2.2), gets hops = UINT8_MAX and empty routes.
void recompute_routes(FabricMap& map);

// Source routes to `to` along the BFS tree `parent`/`parent_port` (see map_from_topology);
// nullopt when either would need more hops than a source route holds.
std::optional<MgmtTarget> target_along(const fabric::Topology& t,
                                       const std::vector<uint32_t>& parent,
                                       const std::vector<uint8_t>& port_to_parent, uint32_t to,
                                       wire::ChipId chip);

}  // namespace galaxy::nm
