// Dragonfly (Kim et al. 2008): groups of `a` routers joined all-to-all, `p` NICs and `h` global
// links per router. The global wiring is in docs/topologies.md ("dragonfly").
#include <fmt/format.h>

#include "fabric/builder_util.h"
#include "fabric/builders.h"

namespace galaxy::fabric {

namespace {
constexpr uint64_t kMaxNodes = uint64_t{1} << 22;
}

Result<Topology> build_dragonfly(const Spec& spec) {
  GALAXY_TRY(spec.check_known({"a", "p", "h", "g"}));
  if (!spec.positional.empty())
    return make_error(
        Code::kInvalidArgument, 3500,
        fmt::format("dragonfly: unexpected positional parameter '{}'", spec.positional.front()));
  auto a_r = spec.get_int("a", 4, 1, kMaxPorts);
  GALAXY_TRY(a_r);
  auto p_r = spec.get_int("p", 2, 1, kMaxPorts);
  GALAXY_TRY(p_r);
  auto h_r = spec.get_int("h", 2, 1, kMaxPorts);
  GALAXY_TRY(h_r);
  const uint32_t a = static_cast<uint32_t>(*a_r);
  const uint32_t p = static_cast<uint32_t>(*p_r);
  const uint32_t h = static_cast<uint32_t>(*h_r);
  const uint32_t ports = p + (a - 1) + h;
  if (ports > kMaxPorts)
    return make_error(Code::kOutOfRange, 3501,
                      fmt::format("dragonfly: p + (a - 1) + h = {} + {} + {} = {} ports exceeds {}",
                                  p, a - 1, h, ports, kMaxPorts));
  const uint32_t global_ports = a * h;
  auto g_r = spec.get_int("g", global_ports + 1, 2, global_ports + 1);
  GALAXY_TRY(g_r);
  const uint32_t g = static_cast<uint32_t>(*g_r);
  uint64_t nodes = uint64_t{g} * a * (1 + p);
  if (nodes > kMaxNodes)
    return make_error(Code::kOutOfRange, 3502,
                      fmt::format("dragonfly: {} nodes is more than {}", nodes, kMaxNodes));
  detail::TopologyWriter w(static_cast<uint32_t>(nodes),
                           static_cast<uint32_t>(g * a * (ports + p)));

  std::vector<uint32_t> router(g * a);
  for (uint32_t grp = 0; grp < g; ++grp)
    for (uint32_t r = 0; r < a; ++r) {
      uint32_t id = grp * a + r;
      router[id] =
          w.node(NodeKind::kNrc, ports, fmt::format("g{:03}/r{:02}", grp, r),
                 Location{static_cast<int32_t>(grp), -1, static_cast<int32_t>(r), -1, "router"}, 1);
      for (uint32_t k = 0; k < p; ++k) {
        uint32_t nic =
            w.node(NodeKind::kNic, 1, fmt::format("nic{:05}", id * p + k),
                   Location{static_cast<int32_t>(grp), -1, static_cast<int32_t>(r), -1, "nic"}, 0);
        w.link(router[id], k, nic, 0);
      }
    }
  // Local: all-to-all inside a group; router r reaches router s on port p + (s < r ? s : s-1).
  for (uint32_t grp = 0; grp < g; ++grp)
    for (uint32_t r = 0; r < a; ++r)
      for (uint32_t s = r + 1; s < a; ++s)
        w.link(router[grp * a + r], p + s - 1, router[grp * a + s], p + r);
  // Global: group i's global port gp (router gp / h, its global link gp % h) belongs to round
  // gp / (g-1) and leads to the (gp % (g-1))-th other group in increasing order. Ports of an
  // incomplete last round connect only where the far group's matching port exists too.
  const uint32_t others = g - 1;
  auto global_port = [&](uint32_t grp, uint32_t gp) {
    return std::pair{router[grp * a + gp / h], p + (a - 1) + gp % h};
  };
  for (uint32_t i = 0; i < g; ++i)
    for (uint32_t gp = 0; gp < global_ports; ++gp) {
      uint32_t round = gp / others;
      uint32_t t = gp % others;
      uint32_t j = t < i ? t : t + 1;
      if (j < i) continue;                // each pair once, from its lower group
      uint32_t far = round * others + i;  // i < j, so i is j's i-th other group
      if (far >= global_ports) continue;
      auto [ra, pa] = global_port(i, gp);
      auto [rb, pb] = global_port(j, far);
      w.link(ra, pa, rb, pb);
    }
  return w.finish();
}

}  // namespace galaxy::fabric
