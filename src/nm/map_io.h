// A discovered fabric map saved to a file and read back (`galaxy discover --save-map`, `--map`
// on the standalone commands): a command that acts on a few chips then starts from the map
// instead of discovering the whole fabric again (on TH-2, 35,000 requests).
//
// The file is text: a first line of JSON, {"format": "galaxy-map", "version": 1, "server_node",
// "exact_ranges", "chip_id": [one per node]}, then the map's topology in fabric/io.h's JSON
// (nodes in discovery order). The management routes are not stored: they follow from the
// topology (nm/fabric_map.h recompute_routes), as discovery found them.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "fabric/topology.h"
#include "nm/fabric_map.h"

namespace galaxy::nm {

inline constexpr int kMapFormatVersion = 1;

std::string write_map(const FabricMap& map);
// Every field checked (E5700-E5709), the routes rebuilt; `source` names the file in errors.
Result<FabricMap> read_map(std::string_view text, std::string_view source = "<map>");

// Whether a map read from a file describes `plan` (the fabric the command runs on): every chip
// of the map is the plan's chip of that id, of the same kind and port count, and every link of
// the map is cabled so in the plan. A map of another fabric, or of this one before it was
// recabled, is refused (E5708) with the first difference.
Status check_map_against(const FabricMap& map, const fabric::Topology& plan);

}  // namespace galaxy::nm
