#include "nm/ib_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "nm/routing.h"

namespace galaxy::nm {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint16_t kFar = std::numeric_limits<uint16_t>::max();

struct PortSetHash {
  size_t operator()(const chip::PortSet& s) const {
    size_t h = 0;
    for (unsigned w = 0; w < chip::PortSet::kWords; ++w)
      h = h * 0x9E3779B97F4A7C15ull + std::hash<uint64_t>{}(s.word(w));
    return h;
  }
};

bool valid_unicast(uint16_t lid) {
  return lid >= 1 && lid <= wire::kMaxUnicastLid;
}

// Every port that takes a LID: a switch's port 0, a CA's linked ports (those it was entered by).
template <class F>
void for_each_lid_port(IbSubnet& net, F&& f) {
  for (auto& node : net.nodes) {
    if (node.is_switch()) {
      f(node.ports[0]);
    } else {
      for (size_t p = 1; p < node.ports.size(); ++p)
        if (node.ports[p].entered) f(node.ports[p]);
    }
  }
}

struct CaDest {
  uint16_t lid;
  uint32_t node, port;  // the CA port
  uint32_t sw = kNone;  // the switch it is cabled to (index into switches)
  uint8_t sw_port = 0;
};

// The switches (dense indices) and the CA ports that take LIDs.
// What lies beyond a switch port (SubnetIndex::beyond): a switch's index, kToCa + a CA port's
// index in `cas`, or kNone.
constexpr uint32_t kToCa = 1u << 31;

struct SubnetIndex {
  std::vector<uint32_t> switches;
  std::vector<uint32_t> sw_of;  // node -> switch index, kNone for CAs
  std::vector<CaDest> cas;
  uint16_t max_lid = 0;
  // Per switch port, flat: [port_base[i] + p] for switch i's IB port p (port 0 included).
  std::vector<size_t> port_base;
  std::vector<uint32_t> beyond;
};

SubnetIndex index_subnet(const IbSubnet& net) {
  SubnetIndex x;
  const uint32_t n_nodes = static_cast<uint32_t>(net.nodes.size());
  x.sw_of.assign(n_nodes, kNone);
  for (uint32_t n = 0; n < n_nodes; ++n) {
    if (!net.nodes[n].is_switch()) continue;
    x.sw_of[n] = static_cast<uint32_t>(x.switches.size());
    x.switches.push_back(n);
    x.max_lid = std::max(x.max_lid, net.nodes[n].lid());
  }
  for (uint32_t n = 0; n < n_nodes; ++n) {
    const IbNode& node = net.nodes[n];
    if (node.is_switch()) continue;
    for (uint32_t p = 1; p < node.ports.size(); ++p) {
      const IbPort& port = node.ports[p];
      if (!port.entered || port.lid == 0) continue;
      CaDest d{port.lid, n, p};
      if (port.linked() && net.nodes[port.peer_node].is_switch()) {
        d.sw = x.sw_of[port.peer_node];
        d.sw_port = port.peer_port;
      }
      x.cas.push_back(d);
      x.max_lid = std::max(x.max_lid, port.lid);
    }
  }
  const uint32_t S = static_cast<uint32_t>(x.switches.size());
  x.port_base.assign(S + 1u, 0);
  for (uint32_t i = 0; i < S; ++i)
    x.port_base[i + 1] = x.port_base[i] + net.nodes[x.switches[i]].ports.size();
  x.beyond.assign(x.port_base[S], kNone);
  for (uint32_t i = 0; i < S; ++i) {
    const IbNode& node = net.nodes[x.switches[i]];
    for (uint32_t p = 1; p < node.ports.size(); ++p)
      if (node.ports[p].linked() && x.sw_of[node.ports[p].peer_node] != kNone)
        x.beyond[x.port_base[i] + p] = x.sw_of[node.ports[p].peer_node];
  }
  for (uint32_t c = 0; c < x.cas.size(); ++c)
    if (x.cas[c].sw != kNone) x.beyond[x.port_base[x.cas[c].sw] + x.cas[c].sw_port] = kToCa + c;
  return x;
}

}  // namespace

Result<IbLidReport> assign_lids(IbSubnet& net) {
  IbLidReport r;
  std::vector<uint8_t> taken(wire::kMaxUnicastLid + 1u, 0);
  for_each_lid_port(net, [&](IbPort& p) {
    const uint16_t held = p.known ? p.info.lid() : 0;
    if (valid_unicast(held) && !taken[held]) {
      taken[held] = 1;
      p.lid = held;
      r.kept += 1;
    } else {
      p.lid = 0;
    }
  });
  uint32_t next = 1;
  bool full = false;
  for_each_lid_port(net, [&](IbPort& p) {
    if (p.lid != 0 || full) return;
    while (next <= wire::kMaxUnicastLid && taken[next]) ++next;
    if (next > wire::kMaxUnicastLid) {
      full = true;
      return;
    }
    taken[next] = 1;
    p.lid = static_cast<uint16_t>(next);
    r.assigned += 1;
  });
  if (full) {
    return make_error(
        Code::kResourceExhausted, 7120,
        fmt::format("LIDs: the subnet needs more than {} unicast LIDs", wire::kMaxUnicastLid));
  }
  for_each_lid_port(net, [&](IbPort& p) { r.max_lid = std::max(r.max_lid, p.lid); });
  return r;
}

Result<IbRoutes> route_ib(const IbSubnet& net, const std::string& engine_spec, bool check) {
  IbRoutes out;
  out.engine = engine_spec;
  const uint32_t n_nodes = static_cast<uint32_t>(net.nodes.size());

  SubnetIndex x = index_subnet(net);
  const auto& switches = x.switches;
  const auto& sw_of = x.sw_of;
  const auto& cas = x.cas;
  out.max_lid = x.max_lid;
  for (uint32_t n : switches) {
    if (net.nodes[n].info.num_ports > fabric::kMaxPorts) {
      return make_error(Code::kUnsupported, 7130,
                        fmt::format("{}: {} ports; the routing engines handle at most {}",
                                    net.name(n), net.nodes[n].info.num_ports, fabric::kMaxPorts));
    }
  }
  const uint32_t S = static_cast<uint32_t>(switches.size());
  out.lft.assign(n_nodes, {});
  for (uint32_t n : switches) out.lft[n].assign(out.max_lid + 1u, wire::kLftNoPort);

  // The engine, on the subnet as a topology: switches are NRCs (IB port k is port k-1), each
  // linked CA port a one-port NIC whose chip id is its LID.
  // [ca index * S + switch]: an index into the switch's palette of the distinct port sets it
  // allows (a few dozen at most switches, fewer than 2^16 at any: one per CA at most), so that
  // the table costs 2 bytes per entry, not 16. A destination's entries lie together, as the
  // balancing below reads them.
  std::vector<uint16_t> allowed;
  std::vector<chip::PortSet> palette;  // every switch's palette, switch after switch
  std::vector<size_t> palette_base(S + 1u, 0);
  if (!cas.empty() && S > 0) {
    FabricMap map;
    std::vector<uint32_t> topo_of_sw(S);
    for (uint32_t i = 0; i < S; ++i) {
      const uint32_t n = switches[i];
      auto t =
          map.topology.add_node(fabric::NodeKind::kNrc, net.nodes[n].info.num_ports, net.name(n));
      if (!t) return t.error();
      topo_of_sw[i] = *t;
      map.chip_id.push_back(net.nodes[n].lid());
    }
    std::vector<uint32_t> topo_of_ca(cas.size());
    std::unordered_map<uint64_t, uint32_t> ca_index;  // (node << 8 | port) -> cas index
    for (uint32_t c = 0; c < cas.size(); ++c) {
      auto t = map.topology.add_node(fabric::NodeKind::kNic, 1,
                                     fmt::format("{} port {}", net.name(cas[c].node), cas[c].port));
      if (!t) return t.error();
      topo_of_ca[c] = *t;
      map.chip_id.push_back(cas[c].lid);
      ca_index[uint64_t{cas[c].node} << 8 | cas[c].port] = c;
    }
    auto endpoint = [&](uint32_t n, uint32_t p) -> std::optional<fabric::PortRef> {
      if (sw_of[n] != kNone) {
        if (p == 0) return std::nullopt;
        return fabric::PortRef{topo_of_sw[sw_of[n]], static_cast<uint8_t>(p - 1)};
      }
      auto it = ca_index.find(uint64_t{n} << 8 | p);
      if (it == ca_index.end()) return std::nullopt;
      return fabric::PortRef{topo_of_ca[it->second], 0};
    };
    for (uint32_t n = 0; n < n_nodes; ++n) {
      for (uint32_t p = 0; p < net.nodes[n].ports.size(); ++p) {
        const IbPort& port = net.nodes[n].ports[p];
        if (!port.linked()) continue;
        if (std::pair(port.peer_node, uint32_t{port.peer_port}) < std::pair(n, p)) continue;
        auto a = endpoint(n, p);
        auto b = endpoint(port.peer_node, port.peer_port);
        if (!a || !b) continue;
        if (Status s = map.topology.connect(*a, *b); !s) return s.error();
      }
    }
    for (uint32_t t = 0; t < map.topology.num_nodes(); ++t) map.node_of[map.chip_id[t]] = t;
    map.target.resize(map.topology.num_nodes());
    map.hops.resize(map.topology.num_nodes(), 0);
    map.server_node = topo_of_ca[0];
    // The sets of every input class are merged below: a class's range stretched over a LID it
    // has no route for (where LIDs of other switches' CAs interleave) would offer its ports there.
    map.exact_ranges = true;
    auto routes = compute_routes(map, engine_spec);
    if (!routes) return routes.error();
    out.engine = routes->engine;

    // For each (switch, CA): the ports every input that the engine routes agrees on; where the
    // inputs disagree, any port one of them allows.
    std::vector<uint32_t> ca_of_lid(out.max_lid + 1u, kNone);
    for (uint32_t c = 0; c < cas.size(); ++c) ca_of_lid[cas[c].lid] = c;
    allowed.resize(cas.size() * size_t{S});
    // A tile of switches at a time, so that each destination's row is written a run at once.
    constexpr uint32_t kTile = 32;
    const size_t C = cas.size();
    std::vector<std::vector<chip::PortSet>> palettes(S);
    std::vector<std::unordered_map<chip::PortSet, uint16_t, PortSetHash>> index_of(kTile);
    // A short palette is scanned; past kScan entries a hash map takes over.
    constexpr size_t kScan = 64;
    auto palette_index = [&](uint32_t k, uint32_t i, const chip::PortSet& set) -> uint16_t {
      auto& pal = palettes[i];
      if (pal.size() <= kScan) {
        for (size_t j = 0; j < pal.size(); ++j)
          if (pal[j] == set) return static_cast<uint16_t>(j);
        if (pal.size() < kScan) {
          pal.push_back(set);
          return static_cast<uint16_t>(pal.size() - 1);
        }
        for (size_t j = 0; j < pal.size(); ++j) index_of[k].emplace(pal[j], j);
      }
      auto [it, added] = index_of[k].emplace(set, static_cast<uint16_t>(pal.size()));
      if (added) pal.push_back(set);
      return it->second;
    };
    // Per switch, the LIDs its writes cover are cut where any write starts or ends: within a
    // piece every LID has the same writes over it, so the piece's set is made once and only its
    // palette index is stored per CA ([k * C + c], then copied into `allowed` a tile at a time).
    std::vector<uint16_t> ix(kTile * C);
    std::vector<uint32_t> cuts;
    std::vector<chip::PortSet> piece_meet, piece_any;
    for (uint32_t i0 = 0; i0 < S; i0 += kTile) {
      const uint32_t tile = std::min(kTile, S - i0);
      for (auto& m : index_of) m.clear();
      for (uint32_t k = 0; k < tile; ++k) {
        const auto& writes = routes->writes[topo_of_sw[i0 + k]];
        auto end_of = [&](const RangeWrite& w) {
          return std::min<uint32_t>(uint32_t{w.first_dest} + w.count, out.max_lid + 1u);
        };
        cuts.clear();
        for (const RangeWrite& w : writes) {
          if (w.ports.none() || w.first_dest >= end_of(w)) continue;
          cuts.push_back(w.first_dest);
          cuts.push_back(end_of(w));
        }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
        const size_t pieces = cuts.empty() ? 0 : cuts.size() - 1;
        piece_meet.assign(pieces, ~chip::PortSet{});
        piece_any.assign(pieces, chip::PortSet{});
        for (const RangeWrite& w : writes) {
          if (w.ports.none() || w.first_dest >= end_of(w)) continue;
          for (size_t j = std::lower_bound(cuts.begin(), cuts.end(), w.first_dest) - cuts.begin();
               j < pieces && cuts[j] < end_of(w); ++j) {
            piece_meet[j] &= w.ports;
            piece_any[j] |= w.ports;
          }
        }
        // No write over a LID: no set, so that the minimum-hop fill below takes it.
        uint16_t* row = &ix[k * C];
        std::fill(row, row + C, palette_index(k, i0 + k, chip::PortSet{}));
        for (size_t j = 0; j < pieces; ++j) {
          if (piece_any[j].none()) continue;
          const chip::PortSet& set = piece_meet[j].any() ? piece_meet[j] : piece_any[j];
          const uint16_t at = palette_index(k, i0 + k, set);
          for (uint32_t lid = cuts[j]; lid < cuts[j + 1]; ++lid)
            if (const uint32_t c = ca_of_lid[lid]; c != kNone) row[c] = at;
        }
      }
      for (uint32_t c = 0; c < C; ++c)
        for (uint32_t k = 0; k < tile; ++k) allowed[c * size_t{S} + i0 + k] = ix[k * C + c];
    }
    for (uint32_t i = 0; i < S; ++i) palette_base[i + 1] = palette_base[i] + palettes[i].size();
    palette.reserve(palette_base[S]);
    for (auto& p : palettes) palette.insert(palette.end(), p.begin(), p.end());
  }

  // Switch-to-switch hop counts, for switch LIDs and for CA entries an engine left open.
  std::vector<std::vector<std::pair<uint8_t, uint32_t>>> nbr(S);  // (IB port, switch index)
  for (uint32_t i = 0; i < S; ++i) {
    const IbNode& node = net.nodes[switches[i]];
    for (uint32_t p = 1; p < node.ports.size(); ++p)
      if (node.ports[p].linked() && sw_of[node.ports[p].peer_node] != kNone)
        nbr[i].emplace_back(static_cast<uint8_t>(p), sw_of[node.ports[p].peer_node]);
  }
  std::vector<std::vector<uint16_t>> dist(S, std::vector<uint16_t>(S, kFar));  // [to][from]
  for (uint32_t t = 0; t < S; ++t) {
    auto& d = dist[t];
    std::deque<uint32_t> q{t};
    d[t] = 0;
    while (!q.empty()) {
      uint32_t u = q.front();
      q.pop_front();
      for (auto [p, v] : nbr[u])
        if (d[v] == kFar) {
          d[v] = static_cast<uint16_t>(d[u] + 1);
          q.push_back(v);
        }
    }
  }

  // CA LIDs, one destination at a time, from the switches farthest from it inwards: each switch
  // knows how many CA sources pass it on their way to the destination before it picks a port,
  // and takes the allowed port that carries the fewest routes so far (then the fewest LIDs).
  // Sources behind one switch share a path and the others spread over the alternatives, which is
  // what OpenSM's ftree arranges by construction; a choice per switch and LID alone would send
  // every pod through the same top switch.
  // Per (switch, port), flat: [port_base[i] + p]. A port's load is one number, its routes above
  // its LIDs (fewer than 2^16 LIDs can use a port), so that the lighter of two ports is one
  // comparison: fewest routes, then fewest LIDs.
  constexpr unsigned kRouteShift = 16;
  const auto& port_base = x.port_base;
  std::vector<uint64_t> weight(port_base[S], 0);
  std::vector<uint64_t> sources(S, 0);
  for (const CaDest& d : cas)
    if (d.sw != kNone) sources[d.sw] += 1;
  auto lighter = [&](uint32_t i, uint8_t a, uint8_t b) {  // is port a a better choice than b?
    if (b == wire::kLftNoPort) return true;
    return weight[port_base[i] + a] < weight[port_base[i] + b];
  };
  // Links are two-way, so dist[to][v] == dist[v][to]. The CA LIDs take one `to` for every switch
  // and read along dist[to]; the switch LIDs take every `to` for one switch and read along its
  // neighbours' rows.
  auto pick_min_hop = [&](uint32_t i, uint32_t to) -> uint8_t {
    uint8_t best = wire::kLftNoPort;
    const auto& row = dist[to];
    for (auto [p, v] : nbr[i])
      if (row[v] != kFar && row[v] + 1 == row[i] && lighter(i, p, best)) best = p;
    return best;
  };
  auto pick_min_hop_to_switch = [&](uint32_t i, uint32_t to) -> uint8_t {
    uint8_t best = wire::kLftNoPort;
    const uint16_t here = dist[i][to];
    for (auto [p, v] : nbr[i])
      if (dist[v][to] != kFar && dist[v][to] + 1 == here && lighter(i, p, best)) best = p;
    return best;
  };
  std::vector<uint64_t> flow(S);
  std::vector<std::vector<uint32_t>> by_distance;  // switches by hops to `by_distance_of`
  uint32_t by_distance_of = kNone;
  // Destinations leaf by leaf (as OpenSM's ftree takes them); the switches' order by distance
  // is the same for every CA of one leaf.
  std::vector<uint32_t> order(cas.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return cas[a].sw < cas[b].sw; });
  // The choices of a batch of destinations, [b * S + switch], go into the switches' tables a
  // switch at a time: one table's lines at once rather than every table's for every LID.
  constexpr uint32_t kBatch = 64;
  std::vector<uint8_t> batch(kBatch * size_t{S}, wire::kLftNoPort);
  std::vector<uint16_t> batch_lid;
  auto flush = [&] {
    for (uint32_t i = 0; i < S; ++i) {
      auto& lft = out.lft[switches[i]];
      for (uint32_t b = 0; b < batch_lid.size(); ++b) lft[batch_lid[b]] = batch[b * size_t{S} + i];
    }
    batch_lid.clear();
    std::fill(batch.begin(), batch.end(), wire::kLftNoPort);
  };
  for (uint32_t c : order) {
    const CaDest& d = cas[c];
    if (d.sw == kNone) continue;  // cabled to another CA: no switch forwards to it
    if (batch_lid.size() == kBatch) flush();
    uint8_t* choice = &batch[batch_lid.size() * size_t{S}];
    batch_lid.push_back(d.lid);
    if (by_distance_of != d.sw) {
      by_distance_of = d.sw;
      const auto& to_d = dist[d.sw];
      for (auto& v : by_distance) v.clear();
      for (uint32_t i = 0; i < S; ++i) {
        if (to_d[i] == kFar) continue;
        if (by_distance.size() <= to_d[i]) by_distance.resize(to_d[i] + 1u);
        by_distance[to_d[i]].push_back(i);
      }
    }
    for (uint32_t i = 0; i < S; ++i) flow[i] = sources[i];
    flow[d.sw] -= 1;
    const uint16_t* allowed_c = allowed.empty() ? nullptr : &allowed[c * size_t{S}];
    choice[d.sw] = d.sw_port;
    out.entries += 1;
    for (size_t h = by_distance.size(); h-- > 1;) {
      for (uint32_t i : by_distance[h]) {
        const size_t base = port_base[i];
        const size_t num_ports = port_base[i + 1] - base;
        uint8_t port = wire::kLftNoPort;
        if (allowed_c) {
          uint64_t lightest = UINT64_MAX;
          palette[palette_base[i] + allowed_c[i]].for_each([&](unsigned p) {
            const size_t ib = p + 1;
            if (ib < num_ports && weight[base + ib] < lightest) {
              lightest = weight[base + ib];
              port = static_cast<uint8_t>(ib);
            }
          });
        }
        if (port == wire::kLftNoPort) {
          port = pick_min_hop(i, d.sw);
          if (port == wire::kLftNoPort) continue;
          out.fallback_entries += 1;
        }
        choice[i] = port;
        out.entries += 1;
        weight[port_base[i] + port] += (flow[i] << kRouteShift) + 1;
        if (const uint32_t next = x.beyond[port_base[i] + port]; next < kToCa)
          flow[next] += flow[i];
      }
    }
  }
  flush();
  // Switch LIDs (management traffic): minimum hop, the least-loaded port.
  std::vector<uint16_t> sw_lid(S);
  for (uint32_t t = 0; t < S; ++t) sw_lid[t] = net.nodes[switches[t]].lid();
  for (uint32_t i = 0; i < S; ++i) {
    for (uint32_t t = 0; t < S; ++t) {
      const uint16_t lid = sw_lid[t];
      if (lid == 0) continue;
      const uint8_t port = t == i ? 0 : pick_min_hop_to_switch(i, t);
      if (port == wire::kLftNoPort) continue;
      out.lft[switches[i]][lid] = port;
      if (port != 0) weight[port_base[i] + port] += 1;
      out.entries += 1;
    }
  }

  if (check) check_ib_routes(net, out);
  return out;
}

void check_ib_routes(const IbSubnet& net, IbRoutes& out) {
  const SubnetIndex x = index_subnet(net);
  const auto& switches = x.switches;
  const auto& sw_of = x.sw_of;
  const auto& cas = x.cas;
  const uint32_t S = static_cast<uint32_t>(switches.size());
  out.unreachable = 0;
  out.max_paths_per_port = 0;
  out.max_lids_per_port = 0;
  // Check every (switch, CA LID) route as the switches will forward it, and count the CA-to-CA
  // routes through every switch port (the balance OpenSM's ftree is judged by).
  std::vector<uint32_t> sources(S, 0);  // CA ports cabled to each switch
  for (const CaDest& d : cas)
    if (d.sw != kNone) sources[d.sw] += 1;
  std::vector<std::vector<uint64_t>> paths(S);
  std::vector<std::vector<uint64_t>> lids(S);  // CA LIDs routed out of each port
  for (uint32_t i = 0; i < S; ++i) {
    paths[i].assign(net.nodes[switches[i]].ports.size(), 0);
    lids[i].assign(net.nodes[switches[i]].ports.size(), 0);
  }
  const auto& port_base = x.port_base;
  const auto& beyond_port = x.beyond;
  // The CAs in LID order, a tile of LIDs at a time: each switch's entries for the tile are one
  // run of its table, read once ([k * S + switch]) rather than one line per switch per LID.
  std::vector<uint32_t> by_lid(cas.size());
  std::iota(by_lid.begin(), by_lid.end(), 0u);
  std::sort(by_lid.begin(), by_lid.end(),
            [&](uint32_t a, uint32_t b) { return cas[a].lid < cas[b].lid; });
  constexpr uint32_t kTile = wire::kLftBlockLids;
  std::vector<uint8_t> tile(kTile * size_t{S});
  std::vector<uint32_t> next(S), depth(S), walk, count, order(S);
  std::vector<uint8_t> state(S);  // 0 unknown, 1 on the walk, 2 reaches, 3 does not
  std::vector<uint64_t> flow(S);
  for (size_t t0 = 0; t0 < by_lid.size(); t0 += kTile) {
    const size_t t1 = std::min(by_lid.size(), t0 + kTile);
    const uint16_t lid0 = cas[by_lid[t0]].lid;
    const uint32_t span = cas[by_lid[t1 - 1]].lid - lid0 + 1u;
    if (span <= kTile) {
      for (uint32_t i = 0; i < S; ++i) {
        const auto& lft = out.lft[switches[i]];
        for (uint32_t k = 0; k < span; ++k)
          tile[k * size_t{S} + i] = lid0 + k < lft.size() ? lft[lid0 + k] : wire::kLftNoPort;
      }
    }
    for (size_t t = t0; t < t1; ++t) {
      const CaDest& d = cas[by_lid[t]];
      const uint32_t k = d.lid - lid0;
      auto entry = [&](uint32_t i) -> uint8_t {
        if (span <= kTile) return tile[k * size_t{S} + i];
        const auto& lft = out.lft[switches[i]];
        return d.lid < lft.size() ? lft[d.lid] : wire::kLftNoPort;
      };
      const uint32_t c = by_lid[t];
      for (uint32_t i = 0; i < S; ++i) {
        const uint8_t o = entry(i);
        next[i] = kNone;
        state[i] = 3;
        if (o == 0 || o >= port_base[i + 1] - port_base[i]) continue;  // kLftNoPort too
        const uint32_t beyond = beyond_port[port_base[i] + o];
        if (beyond == kToCa + c) {
          state[i] = 2;
          depth[i] = 0;
        } else if (beyond < kToCa) {
          next[i] = beyond;
          state[i] = 0;
        }
      }
      uint32_t max_depth = 0;
      for (uint32_t i = 0; i < S; ++i) {
        walk.clear();
        uint32_t u = i;
        while (state[u] == 0) {
          state[u] = 1;
          walk.push_back(u);
          u = next[u];
        }
        const bool ok = state[u] == 2;  // state 1: a loop
        uint32_t dep = ok ? depth[u] : 0;
        for (auto it = walk.rbegin(); it != walk.rend(); ++it) {
          state[*it] = ok ? 2 : 3;
          depth[*it] = ++dep;
        }
        if (ok) max_depth = std::max(max_depth, dep);
      }
      // The switches that reach the LID, farthest first (a counting sort by depth), so that
      // every switch has its sources' routes before it passes them on.
      count.assign(max_depth + 2u, 0);
      for (uint32_t i = 0; i < S; ++i) {
        if (state[i] == 2) {
          count[max_depth - depth[i] + 1] += 1;
        } else if (sources[i] > 0 || i == d.sw) {
          out.unreachable += 1;
          if (out.problems.size() < 8)
            out.problems.push_back(
                fmt::format("{}: no route to LID {}", net.name(switches[i]), d.lid));
        }
      }
      for (size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
      for (uint32_t i = 0; i < S; ++i)
        if (state[i] == 2) order[count[max_depth - depth[i]]++] = i;
      const uint32_t reaching = count.empty() ? 0 : count[max_depth];
      std::fill(flow.begin(), flow.end(), 0);
      for (uint32_t j = 0; j < reaching; ++j) {
        const uint32_t i = order[j];
        const uint8_t o = entry(i);
        flow[i] += sources[i] - (i == d.sw ? 1u : 0u);
        paths[i][o] += flow[i];
        lids[i][o] += 1;
        if (next[i] != kNone) flow[next[i]] += flow[i];
      }
    }
  }
  // Over the links between switches: a CA's own cable carries every route to it whatever the
  // tables say.
  for (uint32_t i = 0; i < S; ++i) {
    const IbNode& node = net.nodes[switches[i]];
    for (uint32_t p = 1; p < node.ports.size(); ++p) {
      if (!node.ports[p].linked() || sw_of[node.ports[p].peer_node] == kNone) continue;
      out.max_paths_per_port = std::max(out.max_paths_per_port, paths[i][p]);
      out.max_lids_per_port = std::max(out.max_lids_per_port, lids[i][p]);
    }
  }
}

}  // namespace galaxy::nm
