#include "engine/sim/fabric_spec.h"

#include <fmt/format.h>

#include "fabric/builders.h"
#include "fabric/io.h"

namespace galaxy::sim {

Result<fabric::Topology> resolve_topology(const std::string& spec) {
  auto colon = spec.find(':');
  std::string scheme = spec.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (scheme == "sim") {
    if (rest.empty())
      return make_error(Code::kInvalidArgument, 4220,
                        "--fabric sim: needs a topology, e.g. sim:th2 or sim:fattree:k=4,levels=3");
    return fabric::build_topology(rest);
  }
  if (scheme == "file") {
    if (rest.empty())
      return make_error(Code::kInvalidArgument, 4221, "--fabric file: needs a path");
    return fabric::load_topology_file(rest);
  }
  return make_error(Code::kInvalidArgument, 4222,
                    fmt::format("--fabric '{}': unknown scheme '{}' (use sim:<topology> or "
                                "file:<path>; live: comes with the live engine)",
                                spec, scheme));
}

std::string fabric_spec_help() {
  return "Fabric: sim:<topology> builds a simulated fabric; file:<path> loads one (JSON, dot, "
         "ibnetdiscover).\nTopologies:\n" +
         fabric::topology_builders().describe();
}

}  // namespace galaxy::sim
