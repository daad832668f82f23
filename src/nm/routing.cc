#include "nm/routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <future>
#include <memory>
#include <numeric>
#include <span>
#include <tuple>

#include "base/sysinfo.h"
#include "chip/network_port.h"
#include "chip/rt_select.h"
#include "nm/routing_internal.h"

namespace galaxy::nm {

using chip::PortSet;
using detail::kInf;
using detail::PortGraph;

uint64_t RouteSet::num_writes() const {
  uint64_t n = 0;
  for (const auto& w : writes) n += w.size();
  return n;
}

bool RouteSet::has_vc_rules() const {
  for (const auto& r : vc_rules)
    for (uint8_t x : r)
      if (x != 0) return true;
  return false;
}

void RangeCompressor::add(uint32_t dest, PortSet ports, std::vector<RangeWrite>& out) {
  if (ports.none()) {  // no route: a state no packet enters, so any set will do
    if (exact_) finish(out);
    return;
  }
  // RT_SELECT's count field bounds a range.
  if (open_ && ports == ports_ && dest > last_ && dest - first_ < chip::kMaxRtCount) {
    last_ = dest;
    return;
  }
  finish(out);
  open_ = true;
  first_ = last_ = dest;
  ports_ = ports;
}

void RangeCompressor::finish(std::vector<RangeWrite>& out) {
  if (open_) out.push_back({inputs_, first_, last_ - first_ + 1, ports_});
  open_ = false;
}

void merge_input_masks(std::vector<RangeWrite>& writes) {
  std::sort(writes.begin(), writes.end(), [](const RangeWrite& a, const RangeWrite& b) {
    return std::tie(a.first_dest, a.count, a.ports, a.inputs) <
           std::tie(b.first_dest, b.count, b.ports, b.inputs);
  });
  size_t out = 0;
  for (size_t i = 0; i < writes.size(); ++i) {
    if (out > 0 && writes[out - 1].first_dest == writes[i].first_dest &&
        writes[out - 1].count == writes[i].count && writes[out - 1].ports == writes[i].ports) {
      writes[out - 1].inputs |= writes[i].inputs;
    } else {
      writes[out++] = writes[i];
    }
  }
  writes.resize(out);
}

namespace detail {

PortGraph::PortGraph(const fabric::Topology& t) : topo(t) {
  const uint32_t n = t.num_nodes();
  base.resize(n + 1, 0);
  for (uint32_t v = 0; v < n; ++v) base[v + 1] = base[v] + t.num_ports(v);
  peer.assign(base[n], fabric::kNoNode);
  peer_port.assign(base[n], 0);
  nic_nrc.assign(n, fabric::kNoNode);
  nic_port.assign(n, 0);
  has_nics.assign(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    if (!t.is_nic(v)) nrcs.push_back(v);
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, static_cast<uint8_t>(p)});
      if (!q) continue;
      peer[base[v] + p] = q->node;
      peer_port[base[v] + p] = q->port;
    }
  }
  // Table-routed data leave a NIC on its network port (chip/network_port.h), so an HCA cabled
  // on its second port only is routed as well.
  for (uint32_t v = 0; v < n; ++v) {
    const auto p = chip::planned_network_port(t, v);
    if (!p) continue;
    nic_nrc[v] = peer[base[v] + *p];
    nic_port[v] = peer_port[base[v] + *p];
    has_nics[nic_nrc[v]] = 1;
  }
}

std::vector<uint32_t> PortGraph::bfs(const std::vector<uint32_t>& sources) const {
  std::vector<uint32_t> dist(topo.num_nodes(), kInf), queue;
  queue.reserve(nrcs.size());
  for (uint32_t s : sources)
    if (dist[s] == kInf) {
      dist[s] = 0;
      queue.push_back(s);
    }
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    uint32_t u = queue[qi];
    for (uint32_t s = base[u]; s < base[u + 1]; ++s) {
      if (!nrc_peer(s) || dist[peer[s]] != kInf) continue;
      dist[peer[s]] = dist[u] + 1;
      queue.push_back(peer[s]);
    }
  }
  return dist;
}

namespace {
std::atomic<unsigned> g_route_workers{0};
}  // namespace

void set_route_workers(unsigned workers) {
  g_route_workers.store(workers, std::memory_order_relaxed);
}

unsigned route_workers(size_t pieces) {
  const unsigned set = g_route_workers.load(std::memory_order_relaxed);
  const unsigned threads = set > 0 ? set : online_cores();
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min<size_t>({pieces, threads, kMaxRouteWorkers})));
}

RouteSet build_route_set(const FabricMap& map, const PortGraph& g, uint32_t classes,
                         const std::vector<uint8_t>& port_class, const SwitchRouteFn& fn) {
  const uint32_t n = map.num_nodes();
  RouteSet rs;
  rs.writes.resize(n);
  // One compressor per (NRC, class) that has input ports.
  std::vector<RangeCompressor> comp(static_cast<size_t>(n) * classes);
  std::vector<uint8_t> used(static_cast<size_t>(n) * classes, 0);
  for (uint32_t v : g.nrcs) {
    std::vector<PortSet> mask(classes);
    // Only linked ports: a discovered NRC is given 24 ports, the chip may have fewer and
    // refuses a mask naming ports it does not have.
    for (uint32_t p = 0; p < g.ports(v); ++p)
      if (g.peer[g.base[v] + p] != fabric::kNoNode) mask[port_class[g.base[v] + p]].set(p);
    for (uint32_t k = 0; k < classes; ++k) {
      comp[v * classes + k] = RangeCompressor(mask[k], map.exact_ranges);
      used[v * classes + k] = mask[k].any();
    }
  }
  std::vector<std::pair<wire::ChipId, uint32_t>> nics;  // (chip id, NIC node)
  for (uint32_t v = 0; v < n; ++v)
    if (map.topology.is_nic(v) && g.nic_nrc[v] != fabric::kNoNode)
      nics.emplace_back(map.chip_id[v], v);
  std::sort(nics.begin(), nics.end());
  // Runs of NICs (in chip id order) on one NRC see the same sets everywhere but there, so the
  // other NRCs are fed the run's first and last chip id only: the same ranges, less work.
  struct Group {
    size_t first, last;  // the run nics[first..last]
    uint32_t dest_switch;
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < nics.size();) {
    const uint32_t dest_switch = g.nic_nrc[nics[i].second];
    size_t j = i;
    while (j + 1 < nics.size() && g.nic_nrc[nics[j + 1].second] == dest_switch) ++j;
    groups.push_back({i, j, dest_switch});
    i = j + 1;
  }
  const unsigned workers = route_workers(groups.size());
  // Up to 16 switches a worker per batch (fewer thread starts), within 64 MiB of sets: they are
  // indexed by node, so a large fabric's are large.
  const size_t set_bytes = std::max<size_t>(1, size_t{n} * classes * sizeof(PortSet));
  const size_t batch =
      std::min<size_t>({groups.size(), size_t{workers} * 16,
                        std::max<size_t>(workers, (size_t{64} << 20) / set_bytes)});
  std::vector<std::vector<PortSet>> sets(batch,
                                         std::vector<PortSet>(static_cast<size_t>(n) * classes));
  // Worker w computes the batch's groups w, w + workers, ...
  auto compute = [&](unsigned w, size_t first, size_t count) {
    for (size_t b = w; b < count; b += workers) {
      for (uint32_t v : g.nrcs)
        std::fill_n(sets[b].begin() + static_cast<std::ptrdiff_t>(v * classes), classes, PortSet{});
      fn(groups[first + b].dest_switch, sets[b], w);
    }
  };
  for (size_t first = 0; first < groups.size(); first += batch) {
    const size_t count = std::min(batch, groups.size() - first);
    std::vector<std::future<void>> others;
    for (unsigned w = 1; w < workers && w < count; ++w)
      others.push_back(std::async(std::launch::async, compute, w, first, count));
    compute(0, first, count);
    for (auto& f : others) f.get();
    for (size_t b = 0; b < count; ++b) {
      const Group& gr = groups[first + b];
      for (uint32_t v : g.nrcs)
        for (uint32_t k = 0; k < classes; ++k) {
          size_t c = static_cast<size_t>(v) * classes + k;
          if (!used[c]) continue;
          if (v == gr.dest_switch) {
            for (size_t x = gr.first; x <= gr.last; ++x)
              comp[c].add(nics[x].first, PortSet::of(g.nic_port[nics[x].second]), rs.writes[v]);
          } else {
            comp[c].add(nics[gr.first].first, sets[b][c], rs.writes[v]);
            if (gr.last > gr.first) comp[c].add(nics[gr.last].first, sets[b][c], rs.writes[v]);
          }
        }
    }
  }
  for (uint32_t v : g.nrcs) {
    for (uint32_t k = 0; k < classes; ++k) comp[v * classes + k].finish(rs.writes[v]);
    merge_input_masks(rs.writes[v]);
  }
  return rs;
}

}  // namespace detail

namespace {

using detail::SwitchRouteFn;

Result<RouteSet> route_minhop(const FabricMap& map, const Spec& spec) {
  GALAXY_TRY(spec.check_known({}));
  PortGraph g(map.topology);
  std::vector<uint8_t> port_class(g.peer.size(), 0);
  auto rs = detail::build_route_set(map, g, 1, port_class, [&](uint32_t d, auto& sets, unsigned) {
    auto dist = g.bfs({d});
    for (uint32_t v : g.nrcs) {
      if (dist[v] == kInf || v == d) continue;
      PortSet s;
      for (uint32_t p = 0; p < g.ports(v); ++p)
        if (g.nrc_peer(g.base[v] + p) && dist[g.peer[g.base[v] + p]] + 1 == dist[v]) s.set(p);
      sets[v] = s;
    }
  });
  rs.engine = "minhop";
  return rs;
}

// up*/down* (Schroeder et al., Autonet): `order` is a strict total order of the NRCs (higher =
// nearer the top); a legal path goes up zero or more times, then down zero or more times, so
// no channel dependency leads from a down channel to an up one and the dependency graph is
// acyclic. Input ports from a higher neighbour (the packet came down) get the "down" table,
// the others the "up" table; both hold every minimal legal next hop.
//
// With `middle_detour` (fattree): TH-2's bottom switch joins its four edge NRCs only through
// two middle NRCs, and a leaf reaches only the edges of one index, so a NIC on edge e1 reaches
// a NIC on edge e2 != e1 of another bottom switch by no up*/down* path. The path may end with
// a detour: down to a sibling of the destination's edge (an edge sharing a middle with it),
// then up to the middle and down to the destination edge. The detour channels (edge -> middle
// -> destination edge) are followed only by delivery, and a packet reaches them only from an
// injection or a down channel, so no dependency leads from them to an up channel and the
// graph stays acyclic; verify_routes checks it on the tables. The source edge needs no
// detour, so it sends everything outside its own switch up over all its up-links: its table
// compresses to a few ranges. A middle is an NRC at distance 1 from the NICs all of whose NRC
// neighbours carry NICs.
enum UpDownClass : uint8_t { kUpClass = 0, kDownClass = 1 };

struct UpDownPlan {
  std::vector<uint64_t> order;  // by node; NICs unused
  bool middle_detour = false;
  std::vector<uint32_t> rank;  // distance from the NIC-bearing NRCs (detour only)
  std::vector<uint8_t> middle;
};

RouteSet route_updown_with(const FabricMap& map, const PortGraph& g, const UpDownPlan& plan,
                           const std::string& name) {
  const uint32_t n = map.num_nodes();
  const auto& ord = plan.order;
  const bool detour = plan.middle_detour;
  std::vector<uint8_t> port_class(g.peer.size(), kUpClass);
  for (uint32_t v : g.nrcs)
    for (uint32_t s = g.base[v]; s < g.base[v + 1]; ++s)
      if (g.nrc_peer(s) && ord[g.peer[s]] > ord[v]) port_class[s] = kDownClass;
  std::vector<uint32_t> by_order = g.nrcs;
  std::sort(by_order.begin(), by_order.end(),
            [&](uint32_t a, uint32_t b) { return ord[a] > ord[b]; });
  // The NRC-to-NRC links of each NRC with their direction in the order, which the searches
  // below read for every destination (instead of the topology's records and the order of both
  // ends).
  struct Link {
    uint32_t peer;
    uint8_t port;
    bool up;    // towards a higher NRC
    bool down;  // towards a lower one (neither: a link from an NRC to itself)
  };
  std::vector<uint32_t> link_begin(n + 1, 0);
  std::vector<Link> links;
  for (uint32_t v = 0; v < n; ++v) {
    link_begin[v] = static_cast<uint32_t>(links.size());
    if (map.topology.is_nic(v)) continue;
    for (uint32_t p = 0; p < g.ports(v); ++p) {
      const uint32_t s = g.base[v] + p;
      if (g.nrc_peer(s))
        links.push_back(
            {g.peer[s], static_cast<uint8_t>(p), ord[g.peer[s]] > ord[v], ord[g.peer[s]] < ord[v]});
    }
  }
  link_begin[n] = static_cast<uint32_t>(links.size());
  auto links_of = [&](uint32_t v) {
    return std::span<const Link>(links.data() + link_begin[v], link_begin[v + 1] - link_begin[v]);
  };
  // Each worker's own search state (detail::SwitchRouteFn), made at its first destination.
  struct Scratch {
    std::vector<uint32_t> dd, ud, queue, siblings;
    std::vector<PortSet> detour_ports;  // sibling -> its ports to the shared middles
  };
  std::array<std::unique_ptr<Scratch>, detail::kMaxRouteWorkers> scratch;
  auto fn = [&](uint32_t d, std::vector<PortSet>& sets, unsigned worker) {
    if (!scratch[worker]) {
      scratch[worker] = std::make_unique<Scratch>();
      scratch[worker]->dd.resize(n);
      scratch[worker]->ud.resize(n);
      scratch[worker]->detour_ports.resize(n);
      scratch[worker]->queue.reserve(g.nrcs.size());
    }
    auto& [dd, ud, queue, siblings, detour_ports] = *scratch[worker];
    for (uint32_t x : siblings) detour_ports[x] = {};
    siblings.clear();
    if (detour)
      for (uint32_t s = g.base[d]; s < g.base[d + 1]; ++s) {
        if (!g.nrc_peer(s) || !plan.middle[g.peer[s]]) continue;
        uint32_t m = g.peer[s];
        for (uint32_t t = g.base[m]; t < g.base[m + 1]; ++t) {
          uint32_t x = g.peer[t];
          if (!g.nrc_peer(t) || x == d) continue;
          if (!detour_ports[x]) siblings.push_back(x);
          detour_ports[x].set(g.peer_port[t]);
        }
      }
    // dd: shortest strictly descending path to d (or to a sibling, which adds its 2-hop
    // detour), by BFS from d over upward links; siblings join the queue at distance 2.
    for (uint32_t v : g.nrcs) dd[v] = kInf;
    dd[d] = 0;
    queue.clear();
    queue.push_back(d);
    bool seeded = siblings.empty();
    for (size_t qi = 0;; ++qi) {
      if (!seeded && (qi == queue.size() || dd[queue[qi]] >= 2)) {
        for (uint32_t x : siblings)
          if (dd[x] > 2) {
            dd[x] = 2;
            queue.push_back(x);
          }
        seeded = true;
      }
      if (qi == queue.size()) break;
      const uint32_t u = queue[qi];
      for (const Link& l : links_of(u)) {
        if (l.up && dd[l.peer] == kInf) {
          dd[l.peer] = dd[u] + 1;
          queue.push_back(l.peer);
        }
      }
    }
    // ud: shortest up*down* path, highest nodes first.
    for (uint32_t v : by_order) {
      uint32_t best = dd[v];
      for (const Link& l : links_of(v))
        if (l.up && ud[l.peer] != kInf) best = std::min(best, ud[l.peer] + 1);
      ud[v] = best;
    }
    for (uint32_t v : g.nrcs) {
      if (v == d) continue;
      PortSet up, down;
      if (dd[v] == 2 && detour_ports[v]) down = detour_ports[v];
      for (const Link& l : links_of(v)) {
        if (l.down) {
          if (dd[v] != kInf && dd[l.peer] + 1 == dd[v]) down.set(l.port);
        } else if (ud[v] != kInf && ud[l.peer] != kInf && ud[l.peer] + 1 == ud[v]) {
          up.set(l.port);
        }
      }
      if (dd[v] != kInf && ud[v] == dd[v]) up |= down;
      sets[v * 2 + kUpClass] = up;
      sets[v * 2 + kDownClass] = down;
    }
  };
  RouteSet rs = detail::build_route_set(map, g, 2, port_class, fn);
  rs.engine = name;
  return rs;
}

Result<RouteSet> route_updown(const FabricMap& map, const Spec& spec) {
  GALAXY_TRY(spec.check_known({"root"}));
  PortGraph g(map.topology);
  if (g.nrcs.empty())
    return RouteSet{"updown", std::vector<std::vector<RangeWrite>>(map.num_nodes()), {}};
  std::vector<uint32_t> roots;
  if (spec.has("root")) {
    auto chip = spec.get_int("root", 0, 0, wire::kMaxChipId);
    GALAXY_TRY(chip);
    auto it = map.node_of.find(static_cast<wire::ChipId>(*chip));
    if (it == map.node_of.end() || map.topology.is_nic(it->second))
      return make_error(Code::kNotFound, 5100,
                        fmt::format("root = {} is not the chip id of a discovered NRC", *chip));
    roots.push_back(it->second);
  } else {
    // One root: the NRC of the highest level when the map knows levels, else the NRC farthest
    // from the NICs; the lowest chip id among equals. (Several roots do not guarantee that
    // every pair has a legal path: on TH-2 they do not.)
    std::vector<uint32_t> edge;
    for (uint32_t v : g.nrcs)
      if (g.has_nics[v]) edge.push_back(v);
    auto rank = g.bfs(edge);
    auto key = [&](uint32_t x) {
      return std::tuple<int, int64_t, int64_t>(map.topology.level(x),
                                               rank[x] == kInf ? -1 : rank[x], -map.chip_id[x]);
    };
    // Among the NRCs the server reaches: a root cut off from the rest (a switch whose links all
    // died is still in the map) would leave every pair without a legal path.
    auto reached = [&](uint32_t v) { return v < map.hops.size() && map.hops[v] != UINT8_MAX; };
    uint32_t best = UINT32_MAX;
    for (uint32_t v : g.nrcs)
      if (reached(v) && (best == UINT32_MAX || key(v) > key(best))) best = v;
    if (best == UINT32_MAX) {
      best = g.nrcs[0];
      for (uint32_t v : g.nrcs)
        if (key(v) > key(best)) best = v;
    }
    roots.push_back(best);
  }
  auto dist = g.bfs(roots);
  UpDownPlan plan;
  plan.order.assign(map.num_nodes(), 0);
  for (uint32_t v : g.nrcs) {
    uint64_t height = dist[v] == kInf ? 0 : (uint64_t{1} << 20) - dist[v];
    plan.order[v] = (height << 32) | (wire::kChipIdMask - map.chip_id[v]);
  }
  return route_updown_with(map, g, plan, "updown");
}

Result<RouteSet> route_fattree(const FabricMap& map, const Spec& spec) {
  GALAXY_TRY(spec.check_known({}));
  PortGraph g(map.topology);
  std::vector<uint32_t> edge;
  for (uint32_t v : g.nrcs)
    if (g.has_nics[v]) edge.push_back(v);
  UpDownPlan plan;
  plan.middle_detour = true;
  plan.rank = g.bfs(edge);
  plan.order.assign(map.num_nodes(), 0);
  plan.middle.assign(map.num_nodes(), 0);
  for (uint32_t v : g.nrcs) {
    uint64_t r = plan.rank[v] == kInf ? 0 : uint64_t{plan.rank[v]} + 1;
    plan.order[v] = (r << 32) | map.chip_id[v];
    if (plan.rank[v] != 1) continue;
    uint32_t nrc_links = 0;
    bool all_edges = true;
    for (uint32_t s = g.base[v]; s < g.base[v + 1]; ++s)
      if (g.nrc_peer(s)) {
        ++nrc_links;
        all_edges = all_edges && plan.rank[g.peer[s]] == 0;
      }
    plan.middle[v] = all_edges && nrc_links >= 2;
  }
  return route_updown_with(map, g, plan, "fattree");
}

Registry<RoutingEngineFn> make_registry() {
  Registry<RoutingEngineFn> r("routing engine");
  r.add({"minhop",
         "every shortest-path next hop, any topology (may deadlock: see deadlock_free)",
         {},
         {},
         route_minhop});
  r.add({"updown",
         "up*/down* from BFS ranks of a root; every minimal legal next hop; deadlock free",
         {{"root", "int", "auto",
           "chip id of the root NRC (auto: the highest-level NRC, else the NRC farthest from "
           "the NICs)"}},
         {},
         route_updown});
  r.add({"fattree",
         "up*/down* with ranks = distance from the NICs, balanced over all parallel up-links; "
         "TH-2 and k-ary fat trees; deadlock free",
         {},
         {},
         route_fattree});
  r.add({"dor",
         "dimension order for mesh/torus (ports as the mesh/torus builders wire them); on a "
         "torus each ring's wrap-around link is a dateline (VC class 1 beyond it); deadlock free",
         {{"nics", "int", "auto", "NICs per router (ports 0..nics-1)"},
          {"order", "string", "auto",
           "dimensions in routing order, e.g. xyz; auto: slowest-varying in chip-id order first "
           "(fewest range writes)"},
          {"datelines", "int", "1", "0: no datelines (one VC class; a torus then deadlocks)"}},
         {},
         detail::route_dor});
  r.add({"dragonfly",
         "minimal (local, global, local) on a dragonfly of all-to-all groups of 3 or more "
         "routers, global links as datelines (VC class 1 beyond them); deadlock free",
         {},
         {},
         detail::route_dragonfly});
  return r;
}

}  // namespace

const Registry<RoutingEngineFn>& routing_engines() {
  static const Registry<RoutingEngineFn> registry = make_registry();
  return registry;
}

Result<RouteSet> compute_routes(const FabricMap& map, const std::string& spec_text) {
  auto spec = Spec::parse(spec_text);
  GALAXY_TRY(spec);
  auto entry = routing_engines().find(spec->name);
  GALAXY_TRY(entry);
  // Route tables and port sets hold kMaxSwitchPorts ports; a wider (InfiniBand) switch in the
  // map is refused by name rather than routed wrongly.
  const fabric::Topology& t = map.topology;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    if (t.num_ports(v) > kMaxSwitchPorts)
      return make_error(Code::kUnsupported, 5099,
                        fmt::format("{}: {} ({}) has {} ports; route tables hold at most {}",
                                    spec->name, t.name(v), v, t.num_ports(v), kMaxSwitchPorts));
  return (*entry)->factory(map, *spec);
}

}  // namespace galaxy::nm
