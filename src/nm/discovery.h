// Topology discovery (docs/system.md 2.5.5): breadth-first search from the server's NIC. Reach the
// NRC attached to it, read the peer identity of every port (PEER_SUMMARY, two ports per
// register, two registers per packet), record NIC peers as adjacencies, queue new NRCs with a
// source route, skip known ones, until the queue is empty.
//   serial    — one request at a time, as the paper did;
//   pipelined — every known NRC's reads in flight at once, bounded by per-chip and global
//               windows of the Requester.
#pragma once

#include <string>
#include <vector>

#include "nm/fabric_map.h"
#include "nm/requester.h"

namespace galaxy::nm {

struct DiscoveryOptions {
  bool pipelined = false;
  unsigned global_window = 256;  // pipelined only
  unsigned per_chip_window = 6;  // pipelined only: one NRC's six summary reads at once
};

struct DiscoveryResult {
  FabricMap map;
  uint64_t requests = 0;
  uint64_t failed_requests = 0;       // chips that never answered (their links stay unknown)
  Picoseconds elapsed = 0;            // on the port's clock
  std::vector<std::string> problems;  // e.g. "NRC 5 port 3 reports peer 9:2 but 9:2 reports 7:1"
};

Result<DiscoveryResult> discover(Requester& requester, const DiscoveryOptions& options);

// Cabling check against a planned topology (docs/system.md 2.5.5): links missing from the fabric,
// extra links, and miswired ones (same chip and port, other peer), each with both ends named.
struct CablingIssue {
  enum class Kind { kMissing, kExtra, kMiswired } kind;
  std::string a;  // "name:port"
  std::string b;
  std::string detail;
};
// `plan` nodes are matched to discovered chips by chip id = plan node id.
std::vector<CablingIssue> check_cabling(const FabricMap& found, const fabric::Topology& plan);
// True when `found` has exactly the chips and links of `plan` (chip id = plan node id).
bool same_fabric(const FabricMap& found, const fabric::Topology& plan);

}  // namespace galaxy::nm
