// Re-routing around a failure (docs/system.md 2.5.3): after a link-down report the region is
// re-discovered (faults.h), then the routing engine recomputes the tables on the updated map
// (falling back to up*/down* when it leaves connected pairs unjoined), they are verified, and
// only the NRCs whose range writes changed are reloaded.
#pragma once

#include <string>

#include "nm/route_load.h"
#include "nm/routing.h"

namespace galaxy::nm {

struct RerouteResult {
  RouteSet routes;
  RouteCheck check;
  uint64_t nrcs_reloaded = 0;
  LoadResult load;
  // The engine that made the routes (the fallback when the asked one left connected pairs
  // unjoined: routing.h compute_checked_routes) and the pairs the fabric connects.
  std::string engine;
  bool fell_back = false;
  uint64_t connected_pairs = 0;
  // Wall time of the computation (engines and verification) on this host: the server's own
  // work, which the fabric's clock (simulated or not) does not show.
  double compute_ms = 0;
};

Result<RerouteResult> reroute(Requester& requester, const FabricMap& map, const std::string& engine,
                              const RouteSet& previous);

// Its second half: routes computed on `map` (compute_checked_routes, which needs no requester
// and may run while others use it) loaded where they differ from `previous`.
Result<RerouteResult> load_rerouted(Requester& requester, const FabricMap& map,
                                    CheckedRoutes computed, const RouteSet& previous);

}  // namespace galaxy::nm
