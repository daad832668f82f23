// `--fabric` specifications: `sim:<builder spec>` (e.g. sim:th2, sim:fattree:k=24,levels=3,
// sim:torus:8x8x8) and `file:<path>` (native JSON, Graphviz dot, or ibnetdiscover text).
#pragma once

#include <string>

#include "base/status.h"
#include "fabric/topology.h"

namespace galaxy::sim {

Result<fabric::Topology> resolve_topology(const std::string& fabric_spec);
std::string fabric_spec_help();

}  // namespace galaxy::sim
