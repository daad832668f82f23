// Minimal routing on a dragonfly (Kim et al. 2008), deadlock free with two VC classes: a packet
// for another group takes one global link, the one (or, where groups are joined more than once,
// the ones) of its group towards the destination's group: a local hop to that link's router if
// it is not here, the global link, and a local hop to the destination's router if the link does
// not land there. Every global link is a dateline (chip/data_vc.h: VC_RULES), so the hop before
// it runs in class 0 and the two after it in class 1; the channel dependencies then go
// local(0) -> global(1) -> local(1) and can close no cycle, which verify_routes checks over
// (link, class). Shortest paths alone (minhop) can take two global links, which one dateline
// per path does not make safe.
//
// `nonminimal=1` adds, beside the minimal ways, non-minimal ones no longer than them (in the
// spirit of UGAL, Kim et al.; the NRC's adaptive choice, by output load, picks among them): a
// packet fresh from its NIC may leave its router by one of that router's own global links to an
// intermediate group I, land on a router that has a global link to the destination's group D,
// and take it. Input ports then come in three classes (from a NIC, a local link, a global link),
// so a router tells a packet in transit through I from one fresh from its NIC. Two global links
// in a row both run in class 1; the dependency global -> global that this adds is made acyclic
// by taking only intermediate groups numbered above the destination's (a cycle would need the
// numbers to fall all the way round), which verify_routes again checks over (link, class). An
// adversarial shift (every NIC of a group to the next group) then spreads over many global
// links instead of the one between the two groups.
//
// Groups are found from the discovered map, not from names or port numbers. The two ends of a
// local link share every other router of their group as neighbours (a - 2 of them); the ends of
// a global link share only routers that happen to hold global links to both. Links are taken as
// local in decreasing order of shared neighbours, as long as the groups they join stay
// all-to-all; the last such grouping is the dragonfly's. (A link wrongly taken as global only
// becomes a dateline more: verify_routes still proves the result deadlock free or says it is
// not.) A group pair with no global link between them is an error naming the groups.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "chip/data_vc.h"
#include "nm/routing_internal.h"

namespace galaxy::nm::detail {

namespace {

uint32_t find(std::vector<uint32_t>& parent, uint32_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

struct Exit {
  uint32_t router;  // in the source group
  uint8_t port;     // its global port
  uint32_t lands;   // the router it leads to, in the destination group
};

}  // namespace

Result<RouteSet> route_dragonfly(const FabricMap& map, const Spec& spec) {
  GALAXY_TRY(spec.check_known({"nonminimal"}));
  auto nonminimal_r = spec.get_int("nonminimal", 0, 0, 1);
  GALAXY_TRY(nonminimal_r);
  const bool nonminimal = *nonminimal_r != 0;
  PortGraph g(map.topology);
  const uint32_t n = map.num_nodes();
  // Neighbour routers of each router, sorted, for the triangle test.
  std::vector<std::vector<uint32_t>> nbr(n);
  for (uint32_t v : g.nrcs) {
    for (uint32_t p = 0; p < g.ports(v); ++p)
      if (g.nrc_peer(g.base[v] + p)) nbr[v].push_back(g.peer[g.base[v] + p]);
    std::sort(nbr[v].begin(), nbr[v].end());
  }
  auto shared = [&](uint32_t u, uint32_t w) {
    const auto& a = nbr[u];
    const auto& b = nbr[w];
    uint32_t c = 0;
    for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
      if (a[i] == b[j]) {
        ++c;
        ++i;
        ++j;
      } else {
        (a[i] < b[j]) ? ++i : ++j;
      }
    }
    return c;
  };
  struct Link {
    uint32_t shared, u, w;
  };
  std::vector<Link> links;
  for (uint32_t v : g.nrcs)
    for (size_t i = 0; i < nbr[v].size(); ++i)
      if (v < nbr[v][i] && (i == 0 || nbr[v][i - 1] != nbr[v][i]))  // parallel links once
        links.push_back({shared(v, nbr[v][i]), v, nbr[v][i]});
  std::sort(links.begin(), links.end(), [](const Link& x, const Link& y) {
    return x.shared != y.shared ? x.shared > y.shared : std::tie(x.u, x.w) < std::tie(y.u, y.w);
  });
  std::vector<uint32_t> parent(n), size(n, 1), kept;
  std::iota(parent.begin(), parent.end(), 0u);
  kept = parent;
  uint64_t pairs = 0, joined = 0;  // sum of size * (size - 1) / 2 over groups; links inside them
  for (size_t i = 0; i < links.size() && links[i].shared > 0;) {
    const uint32_t level = links[i].shared;
    for (; i < links.size() && links[i].shared == level; ++i) {
      uint32_t a = find(parent, links[i].u), b = find(parent, links[i].w);
      ++joined;
      if (a == b) continue;
      pairs += uint64_t{size[a]} * size[b];
      parent[a] = b;
      size[b] += size[a];
    }
    if (joined != pairs) break;  // a group no longer all-to-all: the level before was the last
    kept = parent;
  }
  parent = kept;
  std::vector<uint32_t> group(n, kInf), group_size;
  std::vector<uint32_t> first_of;  // group -> a router of it
  for (uint32_t v : g.nrcs) {
    const uint32_t r = find(parent, v);
    if (group[r] == kInf) {
      group[r] = static_cast<uint32_t>(group_size.size());
      group_size.push_back(0);
      first_of.push_back(v);
    }
    group[v] = group[r];
    ++group_size[group[v]];
  }
  // Local ports (to each member of the group) and exits (group pair -> global links).
  std::vector<std::vector<std::pair<uint32_t, uint8_t>>> local(n);  // (member, port), sorted
  std::vector<std::vector<Exit>> exits(group_size.size() * group_size.size());
  const size_t groups = group_size.size();
  std::vector<uint8_t> dateline_port(g.peer.size(), 0);
  for (uint32_t v : g.nrcs) {
    for (uint32_t p = 0; p < g.ports(v); ++p) {
      const uint32_t slot = g.base[v] + p;
      if (!g.nrc_peer(slot)) continue;
      const uint32_t w = g.peer[slot];
      if (group[w] == group[v]) {
        local[v].emplace_back(w, static_cast<uint8_t>(p));
      } else {
        exits[group[v] * groups + group[w]].push_back({v, static_cast<uint8_t>(p), w});
        dateline_port[slot] = 1;
      }
    }
    std::sort(local[v].begin(), local[v].end());
    if (local[v].size() + 1 != group_size[group[v]])
      return make_error(Code::kInvalidArgument, 5120,
                        fmt::format("dragonfly: NRC chip {} has local links to {} of the {} other "
                                    "routers of its group: not a dragonfly (groups all-to-all)",
                                    map.chip_id[v], local[v].size(), group_size[group[v]] - 1));
  }
  for (size_t a = 0; a < groups; ++a)
    for (size_t b = 0; b < groups; ++b)
      if (a != b && exits[a * groups + b].empty())
        return make_error(Code::kInvalidArgument, 5121,
                          fmt::format("dragonfly: no global link from the group of NRC chip {} "
                                      "to the group of NRC chip {}",
                                      map.chip_id[first_of[a]], map.chip_id[first_of[b]]));
  auto port_to = [&](uint32_t v, uint32_t member) {
    auto it =
        std::lower_bound(local[v].begin(), local[v].end(), std::pair<uint32_t, uint8_t>{member, 0});
    return it->second;
  };

  // Input port classes: one for all (minimal), or from a NIC, a local link, a global link.
  enum : uint8_t { kFromNic = 0, kFromLocal = 1, kFromGlobal = 2 };
  const uint32_t classes = nonminimal ? 3 : 1;
  std::vector<uint8_t> port_class(g.peer.size(), 0);
  if (nonminimal)
    for (uint32_t v : g.nrcs)
      for (uint32_t p = 0; p < g.ports(v); ++p) {
        const uint32_t slot = g.base[v] + p;
        if (g.nrc_peer(slot)) port_class[slot] = dateline_port[slot] ? kFromGlobal : kFromLocal;
      }
  // The global link of router v to group gd, if it has one.
  auto own_exit = [&](uint32_t v, uint32_t gd) -> const Exit* {
    for (const Exit& e : exits[group[v] * groups + gd])
      if (e.router == v) return &e;
    return nullptr;
  };
  auto rs = build_route_set(
      map, g, classes, port_class, [&](uint32_t d, std::vector<chip::PortSet>& sets, unsigned) {
        const uint32_t gd = group[d];
        for (uint32_t v : g.nrcs) {
          if (v == d) continue;
          if (group[v] == gd) {
            for (uint32_t k = 0; k < classes; ++k)
              sets[v * classes + k] = chip::PortSet::of(port_to(v, d));
            continue;
          }
          // The exits of v's group that reach d in the fewest hops.
          unsigned best = UINT32_MAX;
          chip::PortSet s;
          for (const Exit& e : exits[group[v] * groups + gd]) {
            const unsigned hops = (e.router != v) + 1u + (e.lands != d);
            const uint8_t port = e.router == v ? e.port : port_to(v, e.router);
            if (hops < best) {
              best = hops;
              s = chip::PortSet::of(port);
            } else if (hops == best) {
              s.set(port);
            }
          }
          if (!nonminimal) {
            sets[v] = s;
            continue;
          }
          sets[v * classes + kFromLocal] = s;
          // In transit through this group (arrived over a global link, not in D's group): on
          // by this router's own link to D, taken only from groups numbered above D's.
          if (group[v] > gd)
            if (const Exit* e = own_exit(v, gd)) sets[v * classes + kFromGlobal].set(e->port);
          // Fresh from a NIC: also by this router's own global links to an intermediate group
          // numbered above D's whose landing router goes on to D, where no longer than minimal.
          chip::PortSet fresh = s;
          for (uint32_t p = 0; p < g.ports(v); ++p) {
            const uint32_t slot = g.base[v] + p;
            if (!dateline_port[slot]) continue;
            const uint32_t lands = g.peer[slot];
            if (group[lands] <= gd) continue;
            const Exit* on = own_exit(lands, gd);
            if (on && 2u + (on->lands != d) <= best) fresh.set(p);
          }
          sets[v * classes + kFromNic] = fresh;
        }
      });
  rs.engine = "dragonfly";
  rs.vc_rules.assign(n, {});
  for (uint32_t v : g.nrcs) {
    rs.vc_rules[v].assign(g.ports(v), 0);
    for (uint32_t p = 0; p < g.ports(v); ++p)
      if (dateline_port[g.base[v] + p]) rs.vc_rules[v][p] = chip::vc_rule(true, 0);
  }
  return rs;
}

}  // namespace galaxy::nm::detail
