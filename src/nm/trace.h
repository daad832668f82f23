// Path trace (docs/system.md 2.5.4): traceroute for a table-routed fabric. From the NRC the source
// NIC is attached to, read at every hop the route-table entry (input port, destination NIC's
// chip id) through RT_SELECT/RT_DATA and the LINK_STATE of the ports involved, follow the
// lowest usable output port, and stop at the destination NIC or at the hop where the packet
// would be lost, with the reason. The hardware chooses adaptively among the usable ports of a
// hop (docs/registers.md OUTPUT_LOAD); the trace lists them as alternatives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chip/port_set.h"
#include "nm/fabric_map.h"
#include "nm/requester.h"

namespace galaxy::nm {

inline constexpr unsigned kMaxTraceHops = 32;

struct PortLinkState {
  uint8_t port = 0;
  uint64_t link_state = 0;  // LINK_STATE register: [1:0] 0 down, 1 training, 2 up; [11:8] lanes
  bool up() const { return (link_state & 3) == 2; }
  unsigned lanes() const { return static_cast<unsigned>((link_state >> 8) & 0xF); }
};

struct TraceHop {
  uint32_t node = 0;  // FabricMap node
  wire::ChipId chip_id = 0;
  std::string name;
  uint8_t in_port = 0;
  chip::PortSet allowed;  // port set of the route-table entry
  chip::PortSet usable;   // allowed ports whose link is up
  int chosen = -1;        // lowest usable port; -1 when none
  PortLinkState in_link;
  std::vector<PortLinkState> out_links;  // every allowed port, ascending
};

enum class TraceFailure { kNone, kNoRoute, kLinkDown, kLoop, kTooLong, kNoAnswer, kMisrouted };
const char* trace_failure_name(TraceFailure f);

struct Trace {
  uint32_t src_node = 0;
  uint32_t dst_node = 0;
  wire::ChipId dst_chip = 0;
  bool reachable = false;
  std::vector<TraceHop> hops;  // NRCs in path order; the failing one last
  TraceFailure failure = TraceFailure::kNone;
  int failed_hop = -1;  // index into hops (or hops.size() when the chip did not answer)
  std::string reason;
  uint64_t requests = 0;    // request packets sent, retries included
  Picoseconds elapsed = 0;  // on the port's clock
};

// Errors only for bad arguments (not NICs, same NIC, source NIC unlinked); an unreachable
// destination is a Trace with reachable = false.
Result<Trace> trace(Requester& requester, const FabricMap& map, uint32_t src_nic_node,
                    uint32_t dst_nic_node);

// One route-table entry of an NRC (input port, destination chip) as the chip holds it, read
// through management: RT_SELECT the entry, then read RT_DATA, an output half at a time
// (chip/rt_select.h). `failed` is the first reply that was not ok; then `ports` is incomplete.
struct RouteEntryRead {
  chip::PortSet ports;
  std::optional<MgmtReply> failed;
};
RouteEntryRead read_route_entry(Requester& requester, const MgmtTarget& nrc, unsigned num_ports,
                                uint8_t in_port, wire::ChipId dest_chip);

// Debugging aid: programs min-hop route tables towards one destination NIC on every NRC of the
// map (all linked input ports; port set = every port on a shortest path), one RT_SELECT/RT_DATA
// write packet per NRC, pipelined. Cheap enough to run before a trace on a fabric whose tables have
// not been loaded; the routing module (nm/routing.h) loads real tables.
Status load_minhop_for(Requester& requester, const FabricMap& map, uint32_t dst_nic_node);

// The min-hop port sets towards `dst_nic_node`, per map node (0 for NICs and unreachable NRCs).
std::vector<chip::PortSet> minhop_port_sets(const FabricMap& map, uint32_t dst_nic_node);

}  // namespace galaxy::nm
