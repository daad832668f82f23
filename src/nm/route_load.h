// Loading route tables into the NRCs through in-band management (docs/system.md 2.5.1
// "Configuration"): one two-register write packet (RT_SELECT, RT_DATA) per range write (on
// switches wider than TH-2's, one per input group and output half: chip::rt_writes), through
// the Requester, whose windows the caller sets (1 = serial, the paper's mode; larger =
// pipelined). Optionally the same tables go into each NRC's EEPROM as its boot image, so the
// chip routes from power-on (docs/registers.md "EEPROM boot image").
#pragma once

#include <cstdint>
#include <vector>

#include "nm/fabric_map.h"
#include "nm/requester.h"
#include "nm/routing.h"

namespace galaxy::nm {

struct LoadOptions {
  bool also_eeprom = false;  // 6 bytes per packet and ~3 ms per byte simulated: slow
  // Read back this many range writes per NRC (RT_SELECT count 1, then RT_DATA) and compare.
  uint32_t verify_per_nrc = 0;
};

struct LoadResult {
  uint64_t nrcs = 0;
  uint64_t packets = 0;          // route-table write packets
  uint64_t vc_rule_packets = 0;  // VC_RULES write packets
  uint64_t eeprom_packets = 0;
  uint64_t verify_packets = 0;
  uint64_t failed = 0;             // requests that failed after retries or were refused
  uint64_t verify_mismatches = 0;  // read-back sets that differ from what was written
  Picoseconds elapsed = 0;         // on the port's clock, all phases
  Picoseconds eeprom_elapsed = 0;
};

Result<LoadResult> load_routes(Requester& requester, const FabricMap& map, const RouteSet& routes,
                               const LoadOptions& options = {});

}  // namespace galaxy::nm
