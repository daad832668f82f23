// Topology builders, found by name in a self-describing registry (`galaxy fabric --help` lists
// them with their parameters). Spec strings as in base/spec.h: "fattree:k=24,levels=3",
// "torus:8x8x8,nics=2", "th2". docs/topologies.md gives the exact wiring of each builder.
#pragma once

#include <functional>
#include <string>

#include "base/registry.h"
#include "base/spec.h"
#include "fabric/topology.h"

namespace galaxy::fabric {

using BuilderFn = std::function<Result<Topology>(const Spec&)>;

// The built-in builders (th2, fattree, mesh, torus, dragonfly, line); filled on first use.
const Registry<BuilderFn>& topology_builders();

// Parses `spec` and runs the builder it names.
Result<Topology> build_topology(const std::string& spec);

// The builders themselves (what the registry entries call).
Result<Topology> build_th2(const Spec& spec);
Result<Topology> build_fattree(const Spec& spec);
Result<Topology> build_mesh(const Spec& spec);
Result<Topology> build_torus(const Spec& spec);
Result<Topology> build_dragonfly(const Spec& spec);
Result<Topology> build_line(const Spec& spec);

}  // namespace galaxy::fabric
