// Dimension-order routing for meshes and tori. A discovered map knows no coordinates, so they
// are recovered from the port convention of the mesh/torus builders (docs/topologies.md):
// NICs on ports 0..nics-1, then -x, +x, -y, +y, -z, +z. A dimension whose +d walk from the
// origin comes back to it wraps (torus); the shorter way round is taken (ties: +d).
// Deadlock freedom on a torus: each ring has a cyclic channel dependency that DOR alone cannot
// break. Its wrap-around link is a dateline: a packet crossing it moves to the VCs of class 1,
// and a packet turning into the next dimension starts again in class 0 (each dimension is its
// own ring; chip/data_vc.h). Minimal routes cross a dateline at most once per dimension, so
// neither class closes a cycle (Dally and Seitz); verify_routes checks it over (link, class).
// `datelines=0` leaves them out (every packet on class 0), for comparison.
//
// The order of the dimensions is free (any fixed order is deadlock free on a mesh), and it
// decides how many range writes the tables take: at an NRC, every destination whose coordinate
// differs in the first dimension goes one of two ways by that coordinate alone. Routed first,
// the dimension along which chip ids change least often (the slowest-varying one, where ids are
// laid out by coordinate) makes those destinations a few long ranges; routed first, the fastest-
// varying one splits them into a run per row. `order=auto` (the default) therefore takes the
// dimensions from slowest- to fastest-varying in chip-id order; `order=xyz`, `zyx`, ... fixes it.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "chip/data_vc.h"
#include "nm/routing_internal.h"

namespace galaxy::nm::detail {

namespace {

constexpr uint32_t kMaxDims = 3;

struct Grid {
  uint32_t nics = 1;
  uint32_t dims = 0;
  uint32_t size[kMaxDims] = {1, 1, 1};
  bool wrap[kMaxDims] = {false, false, false};
  std::vector<std::array<uint32_t, kMaxDims>> coord;  // by node
};

uint32_t step(const PortGraph& g, uint32_t v, uint32_t port) {
  if (port >= g.ports(v) || !g.nrc_peer(g.base[v] + port)) return fabric::kNoNode;
  return g.peer[g.base[v] + port];
}

Result<Grid> recover_grid(const FabricMap& map, const PortGraph& g, uint32_t nics) {
  Grid grid;
  grid.nics = nics;
  uint32_t max_port = 0;
  for (uint32_t v : g.nrcs)
    for (uint32_t p = 0; p < g.ports(v); ++p)
      if (g.nrc_peer(g.base[v] + p)) max_port = std::max(max_port, p);
  if (g.nrcs.empty() || max_port < nics) {
    grid.dims = 0;
  } else {
    grid.dims = (max_port - nics) / 2 + 1;
  }
  if (grid.dims > kMaxDims)
    return make_error(Code::kInvalidArgument, 5110,
                      fmt::format("dor: NRC port {} implies {} dimensions (at most {} with "
                                  "nics = {}): not a mesh or torus",
                                  max_port, grid.dims, kMaxDims, nics));
  // Origin: from the lowest chip id, walk -d until the port is free or the walk comes back.
  uint32_t origin = g.nrcs.empty() ? 0 : g.nrcs[0];
  for (uint32_t v : g.nrcs)
    if (map.chip_id[v] < map.chip_id[origin]) origin = v;
  for (uint32_t d = 0; d < grid.dims; ++d) {
    uint32_t v = origin;
    for (uint32_t i = 0; i <= g.nrcs.size(); ++i) {
      uint32_t w = step(g, v, nics + 2 * d);
      if (w == fabric::kNoNode || w == origin) break;
      v = w;
    }
    origin = v;
  }
  for (uint32_t d = 0; d < grid.dims; ++d) {
    uint32_t v = origin, len = 1;
    while (true) {
      uint32_t w = step(g, v, nics + 2 * d + 1);
      if (w == fabric::kNoNode) break;
      if (w == origin) {
        grid.wrap[d] = true;
        break;
      }
      if (++len > g.nrcs.size())
        return make_error(Code::kInvalidArgument, 5111,
                          "dor: the +d walk never ends: not a mesh or torus");
      v = w;
    }
    grid.size[d] = len;
  }
  std::array<uint32_t, kMaxDims> unset{kInf, kInf, kInf};
  grid.coord.assign(map.num_nodes(), unset);
  grid.coord[origin] = {0, 0, 0};
  std::vector<uint32_t> queue{origin};
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    uint32_t u = queue[qi];
    for (uint32_t d = 0; d < grid.dims; ++d)
      for (uint32_t dir = 0; dir < 2; ++dir) {
        uint32_t w = step(g, u, nics + 2 * d + dir);
        if (w == fabric::kNoNode) continue;
        auto c = grid.coord[u];
        c[d] = (c[d] + (dir ? 1 : grid.size[d] - 1)) % grid.size[d];
        if (grid.coord[w] == unset) {
          grid.coord[w] = c;
          queue.push_back(w);
        } else if (grid.coord[w] != c) {
          return make_error(
              Code::kInvalidArgument, 5112,
              fmt::format("dor: NRC chip {} sits at two coordinates: not a {}-dimensional mesh "
                          "or torus with {} NIC port(s)",
                          map.chip_id[w], grid.dims, nics));
        }
      }
  }
  return grid;
}

// The dimensions in routing order (see the top of this file).
Result<std::vector<uint32_t>> dimension_order(const FabricMap& map, const PortGraph& g,
                                              const Grid& gr, const std::string& spec) {
  static constexpr char kNames[kMaxDims] = {'x', 'y', 'z'};
  std::vector<uint32_t> order;
  if (spec != "auto") {
    bool ok = spec.size() == gr.dims;
    for (char c : spec) {
      const char* at = std::find(kNames, kNames + gr.dims, c);
      const auto k = static_cast<uint32_t>(at - kNames);
      ok = ok && at != kNames + gr.dims && std::find(order.begin(), order.end(), k) == order.end();
      order.push_back(k);
    }
    if (!ok)
      return make_error(
          Code::kInvalidArgument, 5113,
          fmt::format("dor: order = '{}': expected auto or each of the {} "
                      "dimension(s) {} once (e.g. {})",
                      spec, gr.dims, std::string(kNames, gr.dims), std::string(kNames, gr.dims)));
    return order;
  }
  // How often each coordinate changes between NICs taken in chip-id order.
  std::vector<std::pair<wire::ChipId, uint32_t>> nics;  // (chip id, its NRC)
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (map.topology.is_nic(v) && g.nic_nrc[v] != fabric::kNoNode &&
        gr.coord[g.nic_nrc[v]][0] != kInf)
      nics.emplace_back(map.chip_id[v], g.nic_nrc[v]);
  std::sort(nics.begin(), nics.end());
  std::array<uint64_t, kMaxDims> changes{};
  for (size_t i = 1; i < nics.size(); ++i)
    for (uint32_t k = 0; k < gr.dims; ++k)
      changes[k] += gr.coord[nics[i].second][k] != gr.coord[nics[i - 1].second][k];
  for (uint32_t k = 0; k < gr.dims; ++k) order.push_back(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return changes[a] < changes[b]; });
  return order;
}

}  // namespace

Result<RouteSet> route_dor(const FabricMap& map, const Spec& spec) {
  GALAXY_TRY(spec.check_known({"nics", "order", "datelines"}));
  auto datelines = spec.get_int("datelines", 1, 0, 1);
  GALAXY_TRY(datelines);
  PortGraph g(map.topology);
  uint32_t auto_nics = 0;
  for (uint32_t v : g.nrcs) {
    uint32_t c = 0;
    for (uint32_t p = 0; p < g.ports(v); ++p)
      if (g.peer[g.base[v] + p] != fabric::kNoNode && map.topology.is_nic(g.peer[g.base[v] + p]))
        c = std::max(c, p + 1);
    auto_nics = std::max(auto_nics, c);
  }
  auto nics = spec.get_int("nics", std::max(auto_nics, 1u), 0, 30);
  GALAXY_TRY(nics);
  auto grid = recover_grid(map, g, static_cast<uint32_t>(*nics));
  GALAXY_TRY(grid);
  const Grid& gr = *grid;
  auto order = dimension_order(map, g, gr, spec.get_string("order", "auto"));
  GALAXY_TRY(order);
  std::vector<uint8_t> port_class(g.peer.size(), 0);
  auto rs = build_route_set(map, g, 1, port_class,
                            [&](uint32_t d, std::vector<chip::PortSet>& sets, unsigned) {
                              const auto& target = gr.coord[d];
                              for (uint32_t v : g.nrcs) {
                                if (v == d || gr.coord[v][0] == kInf) continue;
                                for (uint32_t k : *order) {
                                  uint32_t here = gr.coord[v][k], there = target[k];
                                  if (here == there) continue;
                                  bool plus = there > here;
                                  if (gr.wrap[k]) {
                                    uint32_t fwd = (there + gr.size[k] - here) % gr.size[k];
                                    plus = fwd <= gr.size[k] - fwd;
                                  }
                                  uint32_t port = gr.nics + 2 * k + (plus ? 1 : 0);
                                  if (step(g, v, port) != fabric::kNoNode)
                                    sets[v] = chip::PortSet::of(port);
                                  break;
                                }
                              }
                            });
  rs.engine = "dor";
  const bool wraps = std::find(gr.wrap, gr.wrap + gr.dims, true) != gr.wrap + gr.dims;
  if (*datelines && wraps) {
    // Each dimension's ports form ring d + 1 (NIC ports ring 0); the link from the last
    // coordinate to the first, either way round, is the dateline.
    rs.vc_rules.assign(map.num_nodes(), {});
    for (uint32_t v : g.nrcs) {
      if (gr.coord[v][0] == kInf) continue;
      auto& rules = rs.vc_rules[v];
      rules.assign(g.ports(v), 0);
      for (uint32_t d = 0; d < gr.dims; ++d)
        for (uint32_t dir = 0; dir < 2; ++dir) {
          const uint32_t port = gr.nics + 2 * d + dir;
          if (step(g, v, port) == fabric::kNoNode) continue;
          const bool dateline =
              gr.wrap[d] && (dir == 1 ? gr.coord[v][d] == gr.size[d] - 1 : gr.coord[v][d] == 0);
          rules[port] = chip::vc_rule(dateline, static_cast<uint8_t>(d + 1));
        }
    }
  }
  return rs;
}

}  // namespace galaxy::nm::detail
