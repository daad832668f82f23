// Dimension-order routing for meshes and tori. A discovered map knows no coordinates, so they
// are recovered from the port convention of the mesh/torus builders (docs/topologies.md):
// NICs on ports 0..nics-1, then -x, +x, -y, +y, -z, +z. A dimension whose +d walk from the
// origin comes back to it wraps (torus); the shorter way round is taken (ties: +d).
// One data VC: a torus ring has a cyclic channel dependency that DOR cannot break without a
// second (dateline) VC, so verify_routes reports tori as not deadlock free — honestly.
#include <fmt/format.h>

#include <algorithm>
#include <array>

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

}  // namespace

Result<RouteSet> route_dor(const FabricMap& map, const Spec& spec) {
  GALAXY_TRY(spec.check_known({"nics"}));
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
  std::vector<uint8_t> port_class(g.peer.size(), 0);
  auto rs =
      build_route_set(map, g, 1, port_class, [&](uint32_t d, std::vector<chip::PortSet>& sets) {
        const auto& target = gr.coord[d];
        for (uint32_t v : g.nrcs) {
          if (v == d || gr.coord[v][0] == kInf) continue;
          for (uint32_t k = 0; k < gr.dims; ++k) {
            uint32_t here = gr.coord[v][k], there = target[k];
            if (here == there) continue;
            bool plus = there > here;
            if (gr.wrap[k]) {
              uint32_t fwd = (there + gr.size[k] - here) % gr.size[k];
              plus = fwd <= gr.size[k] - fwd;
            }
            uint32_t port = gr.nics + 2 * k + (plus ? 1 : 0);
            if (step(g, v, port) != fabric::kNoNode) sets[v] = chip::PortSet::of(port);
            break;
          }
        }
      });
  rs.engine = "dor";
  return rs;
}

}  // namespace galaxy::nm::detail
