// Route verification of what the chips hold (docs/system.md 2.5.1 "Configuration"): after loading,
// the tables as the NRCs hold them are read through the chip models and compared, entry by entry
// at every NIC destination and every linked input port, with the tables the writes were meant
// to produce. verify_routes checked the computed tables (reachability, loops, deadlock freedom);
// where every held entry equals its computed one, following the held tables visits exactly the
// states that check followed, so the two together verify what packets will meet. A lost or
// corrupted write, or a chip that stored a set other than the one sent, fails bring-up here
// instead of as lost traffic later.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chip/route_table.h"
#include "nm/fabric_map.h"
#include "nm/routing.h"

namespace galaxy::nm {

// The table an NRC of the map holds for one input port; nullptr when it cannot be read.
using LoadedTableFn = std::function<const chip::RouteTable*(uint32_t node, uint8_t in_port)>;
// The VC rule (chip/data_vc.h) an NRC of the map holds for a port.
using LoadedVcRuleFn = std::function<uint8_t(uint32_t node, uint8_t port)>;

struct LoadedCheck {
  uint64_t nrcs = 0;                  // NRCs whose tables were compared
  uint64_t comparisons = 0;           // distinct (computed, held) table pairs compared
  uint64_t entries_differ = 0;        // (NRC, input port, NIC destination) entries held otherwise
  uint64_t unreadable = 0;            // NRCs whose tables could not be read
  uint64_t rules_differ = 0;          // (NRC, linked port) VC rules held otherwise
  std::vector<std::string> problems;  // the first few, each with its error id
  bool ok() const { return entries_differ == 0 && unreadable == 0 && rules_differ == 0; }
};

// With `rules`, the ports' VC rules are compared too, on every NRC the routes give rules for
// (a lost dateline would leave a ring that deadlocks with every table right).
LoadedCheck check_loaded_tables(const FabricMap& map, const RouteSet& routes,
                                const LoadedTableFn& loaded, const LoadedVcRuleFn& rules = {});

}  // namespace galaxy::nm
