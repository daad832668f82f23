// Shared machinery of the routing engines (not a public interface): a port-level view of the
// map's topology and the builder that turns per-destination-switch port sets into range writes.
#pragma once

#include <functional>
#include <vector>

#include "nm/routing.h"

namespace galaxy::nm::detail {

inline constexpr uint32_t kInf = UINT32_MAX;

// Flat per-port arrays: slot = base[node] + port.
struct PortGraph {
  explicit PortGraph(const fabric::Topology& t);

  const fabric::Topology& topo;
  std::vector<uint32_t> base;  // node -> first slot; size num_nodes + 1
  std::vector<uint32_t> peer;  // slot -> peer node (fabric::kNoNode if free)
  std::vector<uint8_t> peer_port;
  std::vector<uint32_t> nic_nrc;  // NIC node -> the NRC on its port 0 (kNoNode if none)
  std::vector<uint8_t> nic_port;  // NIC node -> that NRC's port to it
  std::vector<uint32_t> nrcs;     // NRC nodes
  std::vector<uint8_t> has_nics;  // NRC node -> 1 if a NIC hangs off it

  uint32_t ports(uint32_t v) const { return base[v + 1] - base[v]; }
  bool nrc_peer(uint32_t slot) const {
    return peer[slot] != fabric::kNoNode && !topo.is_nic(peer[slot]);
  }
  // Shortest distances over NRC-to-NRC links from `sources` (kInf if unreachable).
  std::vector<uint32_t> bfs(const std::vector<uint32_t>& sources) const;
};

// Fills sets[v * classes + k] = allowed output ports at NRC v, for packets that arrived on an
// input port of class k, towards NICs hanging off NRC `dest_switch` (the entries at
// dest_switch itself are set by the builder: the port of each NIC). Entries of NRCs it leaves
// alone mean "no route". `worker` (< kMaxRouteWorkers) names the thread that calls: calls with
// different workers run at the same time, each with its own `sets`; calls of one worker come
// one after the other, so state kept per worker needs no lock.
inline constexpr unsigned kMaxRouteWorkers = 8;
using SwitchRouteFn =
    std::function<void(uint32_t dest_switch, std::vector<chip::PortSet>& sets, unsigned worker)>;

// Threads the routing engines and the verifier spread per-destination work over: one per core,
// at most kMaxRouteWorkers, and never more than there are pieces of work. The results do not
// depend on it.
unsigned route_workers(size_t pieces);
// Makes route_workers() use this many threads instead of one per core (0: one per core again);
// tests use it to show that the results do not depend on it.
void set_route_workers(unsigned workers);

// Runs `fn` once per destination switch and compresses the result, in chip id order of the
// switches' NICs, into range writes per (node, class), classes joined where their writes
// coincide. `port_class[slot]` gives each input port's class (< classes). The switches are
// computed in batches spread over route_workers() threads; compression stays in order, so the
// writes are the same whatever the number of threads.
RouteSet build_route_set(const FabricMap& map, const PortGraph& g, uint32_t classes,
                         const std::vector<uint8_t>& port_class, const SwitchRouteFn& fn);

// Engines defined in other files.
Result<RouteSet> route_dor(const FabricMap& map, const Spec& spec);
Result<RouteSet> route_dragonfly(const FabricMap& map, const Spec& spec);

}  // namespace galaxy::nm::detail
