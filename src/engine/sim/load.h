// Flow-level background loads (docs/simulation.md): a load gives every directed link
// a utilisation; a management packet meeting a busy link waits for the residual of the data
// packet on the wire (SimFabric::start_transmission). Loads live in a self-describing registry.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/registry.h"
#include "base/spec.h"
#include "engine/sim/sim_fabric.h"

namespace galaxy::sim {

// Returns the utilisation of every output (indexed like SimFabric::output_index).
using LoadFn = std::function<Result<std::vector<float>>(const SimFabric&, const Spec&)>;

const Registry<LoadFn>& loads();
std::string load_names();

struct LoadSummary {
  std::string name;
  double mean_utilisation = 0;  // over links that carry traffic
  double max_utilisation = 0;
  uint32_t busy_outputs = 0;
};
// Applies a load spec ("none", "uniform:util=0.5", "alltoall:groups=8") to the fabric.
Result<LoadSummary> apply_load(SimFabric& fabric, const std::string& spec);

}  // namespace galaxy::sim
