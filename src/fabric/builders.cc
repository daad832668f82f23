#include "fabric/builders.h"

namespace galaxy::fabric {

namespace {

Registry<BuilderFn> make_registry() {
  Registry<BuilderFn> r("topology builder");
  r.add(
      {"th2",
       "TH-2 three-level fat tree of 6-NRC bottom/root switches and 1-NRC leaves (docs/system.md "
       "2.7)",
       {{"cabinets", "int", "143", "compute cabinets, 1..143 (4 bottom switches, 128 NICs each)"}},
       {},
       build_th2});
  r.add({"fattree",
         "k-ary fat tree of K-port switches: 2(K/2)^N hosts (Al-Fares for N=3)",
         {{"k", "int", "4", "switch ports, even, 4..128"},
          {"levels", "int", "3", "switch levels N, 1..8 (at most 4M nodes)"}},
         {},
         build_fattree});
  r.add({"mesh",
         "1-3 dimensional mesh of routers, positional size AxBxC",
         {{"size", "dims", "", "positional, e.g. 4x4 or 8x8x8"},
          {"nics", "int", "1", "NICs per router (ports: NICs, then -x,+x,-y,+y,-z,+z)"}},
         {},
         build_mesh});
  r.add({"torus",
         "1-3 dimensional torus of routers, positional size AxBxC (size-2 rings: one link)",
         {{"size", "dims", "", "positional, e.g. 4x4 or 8x8x8"},
          {"nics", "int", "1", "NICs per router (ports: NICs, then -x,+x,-y,+y,-z,+z)"}},
         {},
         build_torus});
  r.add({"dragonfly",
         "groups of a all-to-all routers joined by global links",
         {{"a", "int", "4", "routers per group"},
          {"p", "int", "2", "NICs per router"},
          {"h", "int", "2", "global links per router"},
          {"g", "int", "a*h+1", "groups, 2..a*h+1"}},
         {},
         build_dragonfly});
  r.add({"line",
         "chain of n NRCs with one NIC each (hop-count tests)",
         {{"n", "int", "4", "NRCs, 1..21"}},
         {},
         build_line});
  return r;
}

}  // namespace

const Registry<BuilderFn>& topology_builders() {
  static const Registry<BuilderFn> registry = make_registry();
  return registry;
}

Result<Topology> build_topology(const std::string& spec_text) {
  auto spec = Spec::parse(spec_text);
  GALAXY_TRY(spec);
  auto entry = topology_builders().find(spec->name);
  GALAXY_TRY(entry);
  return (*entry)->factory(*spec);
}

}  // namespace galaxy::fabric
