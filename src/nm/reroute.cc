#include "nm/reroute.h"

#include <fmt/format.h>

namespace galaxy::nm {

Result<RerouteResult> reroute(Requester& requester, const FabricMap& map, const std::string& engine,
                              const RouteSet& previous) {
  auto computed = compute_checked_routes(map, engine);
  if (!computed.ok()) return computed.error();
  return load_rerouted(requester, map, std::move(*computed), previous);
}

Result<RerouteResult> load_rerouted(Requester& requester, const FabricMap& map,
                                    CheckedRoutes computed, const RouteSet& previous) {
  RerouteResult out;
  out.routes = std::move(computed.routes);
  out.check = std::move(computed.check);
  out.engine = computed.engine;
  out.fell_back = computed.fell_back;
  out.connected_pairs = computed.connected_pairs;
  out.compute_ms = computed.compute_ms;
  // Reload only what changed: an NRC whose writes are identical keeps its tables.
  RouteSet delta = out.routes;
  for (uint32_t v = 0; v < delta.writes.size(); ++v) {
    bool same = v < previous.writes.size() && previous.writes[v] == delta.writes[v];
    if (same || map.topology.is_nic(v) || map.hops[v] == UINT8_MAX)
      delta.writes[v].clear();
    else
      ++out.nrcs_reloaded;
  }
  auto load = load_routes(requester, map, delta);
  if (!load.ok()) return load.error();
  out.load = *load;
  if (out.load.failed)
    return make_error(Code::kTimeout, 5601,
                      fmt::format("reroute: {} of {} route writes were not acknowledged",
                                  out.load.failed, out.load.packets));
  return out;
}

}  // namespace galaxy::nm
