// connected_nic_pairs and compute_checked_routes (routing.h): an engine's routes checked against
// what the fabric connects, with a fallback engine when they fall short.
#include <chrono>
#include <functional>

#include "nm/routing.h"

namespace galaxy::nm {

uint64_t connected_nic_pairs(const fabric::Topology& t,
                             const std::function<bool(fabric::PortRef)>& usable) {
  std::vector<bool> seen(t.num_nodes(), false);
  uint64_t pairs = 0;
  for (uint32_t first = 0; first < t.num_nodes(); ++first) {
    if (seen[first] || !t.is_nic(first)) continue;
    // One connected part of the fabric: its NICs, over paths through NRCs only.
    std::vector<uint32_t> todo{first};
    seen[first] = true;
    uint64_t nics = 0;
    while (!todo.empty()) {
      const uint32_t v = todo.back();
      todo.pop_back();
      if (t.is_nic(v)) {
        ++nics;
        if (v != first) continue;  // NICs do not forward
      }
      for (uint8_t p = 0; p < t.num_ports(v); ++p) {
        if (usable && !usable({v, p})) continue;
        if (auto peer = t.peer({v, p}); peer && !seen[peer->node]) {
          seen[peer->node] = true;
          todo.push_back(peer->node);
        }
      }
    }
    pairs += nics < 2 ? 0 : nics * (nics - 1);
  }
  return pairs;
}

uint64_t connected_nic_pairs(const FabricMap& map) {
  return connected_nic_pairs(map.topology, {});
}

Result<CheckedRoutes> compute_checked_routes(const FabricMap& map, const std::string& engine,
                                             const std::string& fallback) {
  const auto t0 = std::chrono::steady_clock::now();
  CheckedRoutes out;
  auto routes = compute_routes(map, engine);
  if (!routes.ok()) return routes.error();
  out.routes = std::move(*routes);
  out.check = verify_routes(map, out.routes);
  out.engine = engine;
  out.connected_pairs = connected_nic_pairs(map);
  if (!fallback.empty() && fallback != engine && out.check.reachable_pairs < out.connected_pairs) {
    auto other = compute_routes(map, fallback);
    if (other.ok()) {
      RouteCheck check = verify_routes(map, *other);
      // More pairs joined, no loop, and deadlock free if the engine's were (destinations cut
      // off from everything count as misrouted in both).
      if (check.reachable_pairs > out.check.reachable_pairs && check.loops == 0 &&
          (check.deadlock_free || !out.check.deadlock_free)) {
        out.routes = std::move(*other);
        out.check = std::move(check);
        out.engine = fallback;
        out.fell_back = true;
      }
    }
  }
  out.compute_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace galaxy::nm
