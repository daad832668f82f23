// LIDs and linear forwarding tables for an InfiniBand subnet (docs/system.md 3, IBA 18.2.4.3): LMC
// 0, one LID per switch (its port 0) and per linked CA port; the routes come from Galaxy's routing
// engines (nm/routing.h), run on the subnet as a fabric::Topology whose NICs are the CA ports,
// then flattened into one output port per (switch, LID), balanced over the ports an engine
// allows; switch LIDs get minimum-hop routes. The tables are checked: every switch reaches every
// LID, without loops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "nm/ib_subnet.h"

namespace galaxy::nm {

struct IbLidReport {
  uint32_t kept = 0;      // LIDs a port already held, valid and unique
  uint32_t assigned = 0;  // new ones
  uint16_t max_lid = 0;
};
// Keeps a port's LID when it is a valid unicast LID no other port holds; numbers the rest from
// the lowest free LID, in discovery order. Errors when the subnet needs more than 0xBFFF LIDs.
Result<IbLidReport> assign_lids(IbSubnet& subnet);

struct IbRoutes {
  std::string engine;
  uint16_t max_lid = 0;
  // node -> the output port for each LID 0..max_lid (wire::kLftNoPort: none); switches only.
  std::vector<std::vector<uint8_t>> lft;
  uint64_t entries = 0;           // routed (switch, LID) pairs
  uint64_t unreachable = 0;       // (switch, CA LID) pairs whose route dead-ends or loops
  uint64_t fallback_entries = 0;  // CA-LID entries the engine left open, filled by minimum hop
  // Over every port that joins two switches: the CA-to-CA routes through it, and the CA LIDs its
  // switch forwards out of it (what OpenSM's ftree and minhop balance).
  uint64_t max_paths_per_port = 0;
  uint64_t max_lids_per_port = 0;
  std::vector<std::string> problems;
};

// `engine_spec` as compute_routes takes it ("minhop", "updown:root=3", "fattree" ...). With
// `check`, the routes are checked (check_ib_routes) before they are returned.
Result<IbRoutes> route_ib(const IbSubnet& subnet, const std::string& engine_spec,
                          bool check = true);

// Follows every switch's entry for every CA LID as the switches will forward it: fills
// `unreachable` (with the first few in `problems`) `max_paths_per_port` and `max_lids_per_port`.
// route_ib calls it unless told not to.
void check_ib_routes(const IbSubnet& subnet, IbRoutes& routes);

}  // namespace galaxy::nm
