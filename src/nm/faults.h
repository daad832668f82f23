// Active fault reports (docs/system.md 2.5.3): the server tells every chip where to send reports
// (FAULT_ROUTE = the chip's backward route, FAULT_DEST = the server's NIC and VP), which faults
// to report (FAULT_MASK) and enables them; reports arriving are decoded and stored with time,
// location, cause and severity. A link-down report makes the server re-discover the region
// around the link (the two chips at its ends) and recompute the source routes that crossed it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nm/fabric_map.h"
#include "nm/requester.h"

namespace galaxy::nm {

struct FaultRecord {
  Picoseconds time = 0;  // when the server received it
  wire::ChipId chip = 0;
  std::string location;  // chip name:port
  uint8_t port = 0;
  uint8_t code = 0;
  std::string cause;      // fault name, e.g. "link_down"
  std::string severity;   // info, minor, major, critical
  uint32_t detail = 0;    // link_up / link_down: the port's HANDSHAKES (nm/fault_ledger.h)
  uint16_t sequence = 0;  // the chip's report sequence number (the packet's transaction id)
};

struct ReportingSetup {
  uint64_t chips = 0;
  uint64_t requests = 0;
  uint64_t failed = 0;
  Picoseconds elapsed = 0;
};

// Configures reporting on every chip of the map (the server's own NIC excluded), or on the
// nodes `include` accepts (a management daemon responsible for one region of the fabric).
Result<ReportingSetup> enable_fault_reporting(
    Requester& requester, const FabricMap& map, uint64_t fault_mask = 0,
    const std::function<bool(uint32_t node)>& include = {});

FaultRecord decode_fault(const wire::MgmtPacket& report, const FabricMap& map, Picoseconds now);

// The outcome of handling a link-down report.
struct RegionUpdate {
  std::vector<std::pair<wire::ChipId, uint8_t>> links_down;  // (chip, port) ends found down
  uint64_t requests = 0;
  uint64_t routes_changed = 0;       // chips whose source route had to change
  uint64_t unreachable = 0;          // chips no longer reachable at all
  std::vector<wire::ChipId> silent;  // chips that answered no read: taken out of the map whole
};

// Removes the reported links from the map, recomputes the source routes of every chip (a BFS on
// the updated map, no requests to chips whose adjacency did not change), then re-reads the peer
// summaries of the chips at both ends of each over their new routes: links found down leave the
// map too, and so does every link of a chip that answers none of its reads (a dead chip; the
// caller may sweep to confirm). One batch for reports that arrived together (the neighbours of
// a chip that died), so that a silent chip costs one timeout, not one per report.
Result<RegionUpdate> rediscover_region(
    Requester& requester, FabricMap& map,
    const std::vector<std::pair<wire::ChipId, uint8_t>>& reported);
Result<RegionUpdate> rediscover_region(Requester& requester, FabricMap& map, wire::ChipId chip,
                                       uint8_t port);

// A port's link as read from the chip (LINK_STATE, HANDSHAKES): what the server checks when
// reports of the chip were lost (nm/fault_ledger.h).
struct PortLink {
  uint8_t port = 0;
  bool up = false;
  uint64_t handshakes = 0;
};
// Every port of map node `node`, one request per port; an error when the chip does not answer.
Result<std::vector<PortLink>> read_port_links(Requester& requester, const FabricMap& map,
                                              uint32_t node);
// One chip's fault audit: its FAULTS_REPORTED count and FAULT_DEST (the server its reports go
// to: NIC id, VP << 16), read in one packet.
struct FaultAuditRead {
  uint32_t node = 0;  // map node
  uint64_t reported = 0;
  uint64_t fault_dest = 0;
};
// The audit read of each of `nodes` (map nodes), pipelined; a node that did not answer is left
// out.
std::vector<FaultAuditRead> read_fault_audit(Requester& requester, const FabricMap& map,
                                             const std::vector<uint32_t>& nodes);
// The FAULT_DEST value that names the requester's own server.
uint64_t fault_dest_of(const MgmtPort& port);

// A copy of `map` without the links at `ends` (either end of each may be named).
FabricMap without_links(const FabricMap& map, const std::vector<fabric::PortRef>& ends);

}  // namespace galaxy::nm
