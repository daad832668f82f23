// Routing engines (docs/system.md 2.5.1, 1.2): from the discovered FabricMap, compute for every NRC
// the per-input-port route tables of allowed output-port sets (adaptive routing), expressed as
// the range writes that the RT_SELECT / RT_DATA registers take (docs/registers.md "Route
// tables"), and verify them: every NIC reaches every NIC whatever allowed port the chips pick,
// no loops, and an acyclic channel-dependency graph over (link, VC class) (deadlock freedom).
//
// Engines are plug-ins in a name-keyed registry (`routing_engines()`), each describing its
// parameters:
//   minhop   all shortest-path next hops, any topology; may deadlock (the verifier says so).
//   updown   up*/down* from BFS ranks of a root; all minimal legal next hops; deadlock free.
//   fattree  up*/down* with ranks = distance from the NIC-bearing NRCs, balanced over every
//            parallel up-link; plus a last-hops detour through a "middle" NRC (routing.cc)
//            that TH-2's 6-NRC bottom switches need. Deadlock free on th2 and k-ary fat trees.
//   dor      dimension order on mesh/torus (builder port convention); on a torus each
//            dimension is a ring whose wrap-around link is a dateline (class 1 VCs beyond it,
//            chip/data_vc.h), so tori are deadlock free too.
//   dragonfly minimal local-global-local on a dragonfly, global links as datelines
//            (routing_dragonfly.cc); deadlock free, and its ranges follow the groups.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/registry.h"
#include "base/spec.h"
#include "chip/route_table.h"
#include "nm/fabric_map.h"

namespace galaxy::nm {

// One range write: `ports` for destinations [first_dest, first_dest + count) on every input
// port in `inputs` (one RT_SELECT + RT_DATA packet on a TH-2 NRC; chip::rt_writes says how many
// on a wider switch). Ranges run over destination chip ids; ids between two NICs
// that are not NICs may be covered by a range to merge it with its neighbours: nothing is ever
// addressed to them, so their entries are harmless.
struct RangeWrite {
  chip::PortSet inputs;
  uint32_t first_dest = 0;
  uint32_t count = 0;  // 1..chip::kMaxRtCount
  chip::PortSet ports;
  bool operator==(const RangeWrite&) const = default;
};

// The tables of a whole fabric, by FabricMap node (NICs have none). Within one node, writes
// whose input masks intersect cover disjoint destination ranges, so their order does not matter.
struct RouteSet {
  std::string engine;
  std::vector<std::vector<RangeWrite>> writes;  // node -> its writes
  // node -> the VC rule of each of its ports (chip/data_vc.h: datelines and rings), loaded into
  // its VC_RULES registers; empty where the engine sets none (the ports keep theirs: power-on,
  // one ring and no dateline). Engines that route rings (dor on tori) set them.
  std::vector<std::vector<uint8_t>> vc_rules;
  uint64_t num_writes() const;
  uint8_t vc_rule(uint32_t node, uint32_t port) const {
    return node < vc_rules.size() && port < vc_rules[node].size() ? vc_rules[node][port] : 0;
  }
  bool has_vc_rules() const;
};

using RoutingEngineFn = std::function<Result<RouteSet>(const FabricMap&, const Spec&)>;
const Registry<RoutingEngineFn>& routing_engines();

// "fattree", "updown:root=12" ... : finds the engine and runs it.
Result<RouteSet> compute_routes(const FabricMap& map, const std::string& spec);

// Range compression for one (node, input mask): feed destinations in increasing chip id order.
// A destination with the open range's set extends it (covering any ids skipped in between);
// another set closes it. A destination with no route (set 0) is skipped: engines leave the
// entries of states no packet for that destination enters empty, and a neighbouring range may
// cover them (verify_routes checks every state a packet can reach, with the loaded tables).
// `exact` (FabricMap::exact_ranges): a destination with no route closes the open range instead.
class RangeCompressor {
 public:
  explicit RangeCompressor(chip::PortSet inputs = {}, bool exact = false)
      : inputs_(inputs), exact_(exact) {}
  void add(uint32_t dest, chip::PortSet ports, std::vector<RangeWrite>& out);
  void finish(std::vector<RangeWrite>& out);

 private:
  chip::PortSet inputs_;
  bool exact_ = false;
  bool open_ = false;
  uint32_t first_ = 0;
  uint32_t last_ = 0;
  chip::PortSet ports_;
};

// Writes of one node that differ only in the input mask become one write with the masks joined.
void merge_input_masks(std::vector<RangeWrite>& writes);

struct RouteCheck {
  uint64_t nic_pairs = 0;             // ordered (src, dst) NIC pairs, src != dst
  uint64_t reachable_pairs = 0;       // pairs delivered whatever allowed port each NRC picks
  uint64_t loops = 0;                 // destinations whose next-hop graph has a cycle
  uint64_t misrouted = 0;             // destinations where a path dead-ends or reaches another NIC
  bool deadlock_free = false;         // channel-dependency graph acyclic
  uint64_t channels = 0;              // (directed NRC-to-NRC link, VC class) carrying traffic
  uint64_t dependencies = 0;          // edges of the channel-dependency graph
  uint32_t max_path_nrcs = 0;         // longest routed path, in NRCs
  std::vector<std::string> problems;  // the first few, readable
};

// Checks the tables exactly as the chips would hold them (the writes applied per input port).
RouteCheck verify_routes(const FabricMap& map, const RouteSet& routes);

// Ordered NIC pairs some path of the map joins (through NRCs only; a fabric cut in parts counts
// the pairs within each part): what a complete routing joins, as verify_routes counts.
uint64_t connected_nic_pairs(const FabricMap& map);
// The same over `t`'s links that `usable` accepts at either end it is asked about (all: empty).
uint64_t connected_nic_pairs(const fabric::Topology& t,
                             const std::function<bool(fabric::PortRef)>& usable);

// Routes by `engine`, verified. When they leave pairs the fabric connects unjoined (a fat-tree
// engine on a tree that lost switches, where some pairs need a turn up*/down* ranks from the
// NICs forbid) and the `fallback` engine joins more, the fallback's routes instead: OpenSM's
// engine chain ("-R ftree,updown"). An empty `fallback`: none.
struct CheckedRoutes {
  RouteSet routes;
  RouteCheck check;
  std::string engine;  // the engine whose routes these are
  bool fell_back = false;
  uint64_t connected_pairs = 0;
  double compute_ms = 0;  // wall time of the computations and verifications on this host
};
// The engine a management server routes with unless told otherwise (galaxy nmd, galaxy route,
// galaxy trace), and the one it falls back to.
inline constexpr const char* kDefaultRoutingEngine = "fattree";
inline constexpr const char* kFallbackRoutingEngine = "updown";
Result<CheckedRoutes> compute_checked_routes(const FabricMap& map, const std::string& engine,
                                             const std::string& fallback = kFallbackRoutingEngine);

}  // namespace galaxy::nm
