// Topology files: native JSON (read/write), Graphviz dot (read/write), infiniband-diags
// ibnetdiscover text (read). Schemas and the accepted subsets are in docs/topologies.md.
//
// Every reader error names the source and the line (and column where it helps):
// "topo.dot:12: port 40 of node n3 exceeds its 24 ports".
#pragma once

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

// `graph fabric { n0 [label="...", kind=nrc, ports=24]; n0 -- n1 [taillabel=3, headlabel=7]; }`
std::string write_dot(const Topology& topology);
Result<Topology> read_dot(std::string_view text, std::string_view source = "<dot>");

// ibnetdiscover output: Switch -> NRC, Ca -> NIC (multi-port HCAs keep their port count),
// Router -> NRC.
Result<Topology> read_ibnetdiscover(std::string_view text,
                                    std::string_view source = "<ibnetdiscover>");

// By content: a leading '{' is JSON, 'graph'/'digraph'/'strict' is dot, anything else
// ibnetdiscover.
TopologyFormat detect_format(std::string_view text);
Result<Topology> parse_topology(std::string_view text, std::string_view source);
Result<Topology> load_topology_file(const std::string& path);

// Writes JSON, or dot when the path ends in ".dot" or ".gv".
Status save_topology_file(const Topology& topology, const std::string& path);

}  // namespace galaxy::fabric
