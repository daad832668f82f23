// Which chips share a chassis's monitor board (docs/system.md 2.1: one board per chassis). Chips
// with a cabinet and a chassis in their location share the board of that chassis; chips
// without one (file fabrics, small builders) are boxed in node order, kChipsPerUnlocatedChassis
// to a board. A chassis with more chips than a board has mux channels takes several boards.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/topology.h"

namespace galaxy::fabric {

inline constexpr uint32_t kChipsPerUnlocatedChassis = 32;

// The boards, each its chips in ascending node order; `channels` bounds a board's chips.
std::vector<std::vector<uint32_t>> monitor_boards(const Topology& t, uint32_t channels);

}  // namespace galaxy::fabric
