// Topology files: native JSON (read/write), Graphviz dot (read/write), infiniband-diags
// ibnetdiscover text (read). Schemas and the accepted subsets are in docs/topologies.md.
//
// Every reader error names the source and the line (and column where it helps):
// "topo.dot:12: port 40 of node n3 exceeds its 24 ports".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "fabric/topology.h"

namespace galaxy::fabric {

enum class TopologyFormat : uint8_t { kJson, kDot, kIbnetdiscover };

// {"format":"galaxy-topology","version":1,"nodes":[...],"links":[[a,pa,b,pb],...]}; one node or
// link per line. read_json(write_json(t)) reproduces t exactly, except that bytes of names and
// roles that are not UTF-8 (possible in dot or ibnetdiscover input) are written as U+FFFD.
std::string write_json(const Topology& topology);
Result<Topology> read_json(std::string_view text, std::string_view source = "<json>");

// A chip's identity as JSON fields added to `j` (those it has): "guid" ("0x2c90300500001"),
// "description", "lids"; and as text, `guid 0x2c90300500001 "node018 HCA-1" lid 10` ("" if
// none). What the CLI and the daemon print for a chip.
void add_identity_json(nlohmann::json& j, const Identity& id);
std::string identity_text(const Identity& id);

// `graph fabric { n0 [label="...", kind=nrc, ports=24]; n0 -- n1 [taillabel=3, headlabel=7]; }`
std::string write_dot(const Topology& topology);
Result<Topology> read_dot(std::string_view text, std::string_view source = "<dot>");

// ibnetdiscover output and ibsim net files: Switch -> NRC, Ca/Hca -> NIC (multi-port HCAs keep
// their port count), Rt -> NRC; GUIDs, descriptions and LIDs kept (Topology::identity). Lines
// that are not topology are skipped with a warning (log ids 3920-3922).
Result<Topology> read_ibnetdiscover(std::string_view text,
                                    std::string_view source = "<ibnetdiscover>");

// By content: a leading '{' is JSON, 'graph'/'digraph'/'strict' is dot, anything else
// ibnetdiscover.
TopologyFormat detect_format(std::string_view text);
// Empty (or blank) text, gzip-compressed data and text holding a NUL byte are errors whatever
// the format.
Result<Topology> parse_topology(std::string_view text, std::string_view source);
// A directory, and a file larger than kMaxTopologyFileBytes, are errors.
inline constexpr size_t kMaxTopologyFileBytes = size_t{256} << 20;
Result<Topology> load_topology_file(const std::string& path);
// The whole of a file that describes a fabric (`what` names it in errors: "topology file", "map
// file"): a directory (E3957), a file that cannot be opened (E3950) or read (E3951), and one
// larger than max_bytes (E3958; a device that never ends, /dev/zero, is read only that far) are
// errors.
Result<std::string> read_fabric_file(const std::string& path, std::string_view what,
                                     size_t max_bytes = kMaxTopologyFileBytes);

// Writes JSON; dot when the path ends in ".dot" or ".gv"; an ibsim net file (io_ibsim.h) when
// it ends in ".net" or ".ibsim".
Status save_topology_file(const Topology& topology, const std::string& path);

}  // namespace galaxy::fabric
