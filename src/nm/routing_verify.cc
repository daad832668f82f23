// Verification of a RouteSet as the chips hold it. For every destination NIC, the states of a
// packet are (NRC, class of input port) — input ports that every write treats alike, with the
// same VC rule, share one table — and the next-hop graph over them must be acyclic with every
// path, whichever allowed port each NRC picks, ending at that NIC. The channel-dependency graph
// (Dally and Seitz) has a node per (directed NRC-to-NRC link, VC class) and an edge c1 -> c2
// when a packet for some destination can arrive over c1 and leave over c2; the class a packet
// leaves in is chip::next_vc_class of the ports' VC rules, the NRC's own rule. Acyclic (Kahn)
// means no deadlock. Without VC rules every packet stays in class 0: one node per link.
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "chip/data_vc.h"
#include "nm/routing_internal.h"

namespace galaxy::nm {

using chip::PortSet;
using detail::PortGraph;

namespace {

constexpr size_t kMaxProblems = 8;

struct Range {
  uint32_t first = 0;
  uint32_t end = 0;  // exclusive
  PortSet ports;
};

struct Tables {
  std::vector<uint32_t> state_of_slot;  // NRC port slot -> state (kInf for NIC ports)
  std::vector<uint32_t> node_of_state;
  std::vector<uint8_t> rule_of_state;  // the VC rule of its input ports
  std::vector<uint32_t> range_begin;   // state -> ranges [begin, end)
  std::vector<uint32_t> range_end;
  std::vector<Range> ranges;
};

Tables build_tables(const FabricMap& map, const PortGraph& g, const RouteSet& rs, RouteCheck& out) {
  Tables t;
  t.state_of_slot.assign(g.peer.size(), detail::kInf);
  for (uint32_t v : g.nrcs) {
    const auto& w = v < rs.writes.size() ? rs.writes[v] : std::vector<RangeWrite>{};
    // Ports that lie in exactly the same writes share a table: one state.
    std::vector<std::vector<uint32_t>> sig(g.ports(v));
    for (uint32_t i = 0; i < w.size(); ++i)
      for (uint32_t p = 0; p < g.ports(v); ++p)
        if (w[i].inputs.test(p)) sig[p].push_back(i);
    for (uint32_t p = 0; p < g.ports(v); ++p)
      if (const uint8_t r = rs.vc_rule(v, p)) sig[p].push_back(0x80000000u | r);
    std::vector<uint32_t> rep;  // representative port per state of v
    for (uint32_t p = 0; p < g.ports(v); ++p) {
      uint32_t found = detail::kInf;
      for (uint32_t k = 0; k < rep.size(); ++k)
        if (sig[rep[k]] == sig[p]) found = k;
      if (found == detail::kInf) {
        found = static_cast<uint32_t>(rep.size());
        rep.push_back(p);
      }
      t.state_of_slot[g.base[v] + p] = static_cast<uint32_t>(t.node_of_state.size()) + found;
    }
    for (uint32_t r : rep) {
      t.node_of_state.push_back(v);
      t.rule_of_state.push_back(rs.vc_rule(v, r));
      t.range_begin.push_back(static_cast<uint32_t>(t.ranges.size()));
      std::vector<Range> rr;
      for (uint32_t i : sig[r])
        if (!(i & 0x80000000u))
          rr.push_back({w[i].first_dest, uint32_t{w[i].first_dest} + w[i].count, w[i].ports});
      std::sort(rr.begin(), rr.end(),
                [](const Range& a, const Range& b) { return a.first < b.first; });
      for (size_t i = 1; i < rr.size(); ++i)
        if (rr[i].first < rr[i - 1].end && out.problems.size() < kMaxProblems)
          out.problems.push_back(fmt::format(
              "NRC chip {} input port {}: writes for destinations {}.. and {}.. overlap",
              map.chip_id[v], r, rr[i - 1].first, rr[i].first));
      t.ranges.insert(t.ranges.end(), rr.begin(), rr.end());
      t.range_end.push_back(static_cast<uint32_t>(t.ranges.size()));
    }
  }
  return t;
}

}  // namespace

RouteCheck verify_routes(const FabricMap& map, const RouteSet& rs) {
  RouteCheck out;
  PortGraph g(map.topology);
  Tables t = build_tables(map, g, rs, out);
  const size_t states = t.node_of_state.size();
  std::vector<uint32_t> cursor(t.range_begin);  // destinations come in increasing order
  auto lookup = [&](uint32_t x, uint32_t d) -> PortSet {
    uint32_t& c = cursor[x];
    while (c < t.range_end[x] && t.ranges[c].end <= d) ++c;
    return c < t.range_end[x] && t.ranges[c].first <= d ? t.ranges[c].ports : PortSet{};
  };
  std::vector<std::pair<uint16_t, uint32_t>> nics;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (map.topology.is_nic(v)) nics.emplace_back(map.chip_id[v], v);
  std::sort(nics.begin(), nics.end());
  const uint64_t n_nics = nics.size();
  out.nic_pairs = n_nics * (n_nics > 0 ? n_nics - 1 : 0);

  enum : uint8_t { kWhite, kGray, kBlack };
  std::vector<uint32_t> epoch(states, UINT32_MAX);
  std::vector<uint8_t> color(states), good(states);
  std::vector<PortSet> set(states);
  std::vector<uint32_t> height(states);
  // Channels: (link slot, VC class) as slot * K + class. dep: the out ports at the link's far
  // end that packets arriving over it in that class take.
  const bool by_class = rs.has_vc_rules();
  const uint32_t K = by_class ? chip::kDataVcClasses : 1;
  std::vector<PortSet> dep(g.peer.size() * K);
  std::vector<uint8_t> used(g.peer.size() * K, 0);
  std::vector<uint32_t> finished;  // by_class: the states in the order the search left them
  std::vector<uint32_t> sources;
  std::vector<uint8_t> classes_in(by_class ? states : 0);  // by_class: bit c: arrives in class c
  bool any_loop = false;
  struct Frame {
    uint32_t state;
    PortSet todo;
  };
  std::vector<Frame> stack;
  auto problem = [&](std::string text) {
    if (out.problems.size() < kMaxProblems) out.problems.push_back(std::move(text));
  };

  // Every range boundary, by destination: the states whose entry changes from one destination
  // to the next. Consecutive NICs on one NRC usually differ only in that NRC's own entries
  // (the port of each NIC); their next-hop graphs are then the same up to the last hop, and the
  // result of the first is reused for the others.
  std::vector<std::pair<uint32_t, uint32_t>> boundaries;  // (destination, state)
  for (uint32_t x = 0; x < states; ++x)
    for (uint32_t r = t.range_begin[x]; r < t.range_end[x]; ++r) {
      boundaries.emplace_back(t.ranges[r].first, x);
      boundaries.emplace_back(t.ranges[r].end, x);
    }
  std::sort(boundaries.begin(), boundaries.end());
  std::vector<uint32_t> states_of_node_begin(map.num_nodes() + 1, 0);
  for (uint32_t x = 0; x < states; ++x) ++states_of_node_begin[t.node_of_state[x] + 1];
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    states_of_node_begin[v + 1] += states_of_node_begin[v];
  size_t next_boundary = 0;
  struct Last {
    bool valid = false;
    uint32_t dest_switch = fabric::kNoNode;
    uint64_t reachable = 0;
    bool loop = false, misrouted = false;
  } last;

  for (uint32_t di = 0; di < nics.size(); ++di) {
    const auto [dchip, dnode] = nics[di];
    bool loop = false, misrouted = false;
    const uint32_t dswitch = g.nic_nrc[dnode];
    bool only_own_changed = true;
    for (; next_boundary < boundaries.size() && boundaries[next_boundary].first <= dchip;
         ++next_boundary)
      if (t.node_of_state[boundaries[next_boundary].second] != dswitch) only_own_changed = false;
    bool delivers = dswitch != fabric::kNoNode;
    for (uint32_t x = delivers ? states_of_node_begin[dswitch] : 0;
         delivers && x < states_of_node_begin[dswitch + 1]; ++x)
      delivers = lookup(x, dchip) == PortSet::of(g.nic_port[dnode]) ||
                 t.range_begin[x] == t.range_end[x];  // a table-less port: same for all
    if (last.valid && delivers && only_own_changed && last.dest_switch == dswitch) {
      out.reachable_pairs += last.reachable;
      out.loops += last.loop;
      out.misrouted += last.misrouted;
      continue;
    }
    const uint64_t reachable_before = out.reachable_pairs;
    // A plain copy: clang 14 cannot capture a structured binding in a lambda.
    const auto dest_chip = dchip;
    auto discover = [&](uint32_t x) {
      epoch[x] = di;
      color[x] = kWhite;
      set[x] = lookup(x, dest_chip);
      good[x] = set[x].any();
      height[x] = 1;
      if (!set[x] && !misrouted) {
        misrouted = true;
        problem(fmt::format("destination {}: no route at NRC chip {}", dest_chip,
                            map.chip_id[t.node_of_state[x]]));
      }
    };
    for (const auto& [schip, snode] : nics) {
      if (snode == dnode || g.nic_nrc[snode] == fabric::kNoNode) continue;
      uint32_t s0 = t.state_of_slot[g.base[g.nic_nrc[snode]] + g.nic_port[snode]];
      if (by_class) sources.push_back(s0);
      if (epoch[s0] != di) {
        discover(s0);
        stack.push_back({s0, set[s0]});
        color[s0] = kGray;
        while (!stack.empty()) {
          Frame& f = stack.back();
          uint32_t x = f.state, v = t.node_of_state[x];
          if (f.todo.none()) {
            color[x] = kBlack;
            if (by_class) finished.push_back(x);
            stack.pop_back();
            if (!stack.empty()) {
              uint32_t parent = stack.back().state;
              good[parent] = good[parent] && good[x];
              height[parent] = std::max(height[parent], height[x] + 1);
            }
            continue;
          }
          uint32_t p = static_cast<uint32_t>(f.todo.lowest());
          f.todo = f.todo.without_lowest();
          uint32_t slot = g.base[v] + p;
          uint32_t w = p < g.ports(v) ? g.peer[slot] : fabric::kNoNode;
          if (w == fabric::kNoNode || map.topology.is_nic(w)) {
            if (w != dnode) {
              good[x] = 0;
              if (!misrouted)
                problem(fmt::format(
                    "destination {}: NRC chip {} may send it out of port {} {}", dchip,
                    map.chip_id[v], p,
                    w == fabric::kNoNode ? "(no link)" : fmt::format("to NIC {}", map.chip_id[w])));
              misrouted = true;
            }
            continue;
          }
          uint32_t child = t.state_of_slot[g.base[w] + g.peer_port[slot]];
          if (epoch[child] != di) discover(child);
          if (!by_class) {
            used[slot] = 1;
            dep[slot] |= set[child];
          }
          if (color[child] == kGray) {
            good[x] = 0;
            if (!loop)
              problem(fmt::format("destination {}: loop through NRC chip {} port {}", dchip,
                                  map.chip_id[v], p));
            loop = true;
          } else if (color[child] == kBlack) {
            good[x] = good[x] && good[child];
            height[x] = std::max(height[x], height[child] + 1);
          } else {
            color[child] = kGray;
            stack.push_back({child, set[child]});
          }
        }
      }
      if (good[s0]) {
        ++out.reachable_pairs;
        out.max_path_nrcs = std::max(out.max_path_nrcs, height[s0]);
      }
    }
    if (by_class && !loop) {
      // The classes packets for this destination arrive in, states in topological order (the
      // reverse of the order the search left them): from the NICs in class 0, then as each
      // NRC's VC rules move them.
      for (uint32_t x : finished) classes_in[x] = 0;
      for (uint32_t s : sources) classes_in[s] = 1;
      for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
        const uint32_t x = *it, v = t.node_of_state[x];
        if (!classes_in[x]) continue;
        for (PortSet s = set[x]; s; s = s.without_lowest()) {
          const auto p = static_cast<uint32_t>(s.lowest());
          const uint32_t slot = g.base[v] + p;
          if (p >= g.ports(v) || !g.nrc_peer(slot)) continue;
          const uint32_t child = t.state_of_slot[g.base[g.peer[slot]] + g.peer_port[slot]];
          for (uint8_t c = 0; c < K; ++c) {
            if (!(classes_in[x] & (1u << c))) continue;
            const uint8_t on_link = chip::next_vc_class(c, t.rule_of_state[x], rs.vc_rule(v, p));
            used[slot * K + on_link] = 1;
            dep[slot * K + on_link] |= set[child];
            classes_in[child] = static_cast<uint8_t>(classes_in[child] | (1u << on_link));
          }
        }
      }
    }
    finished.clear();
    sources.clear();
    any_loop = any_loop || loop;
    out.loops += loop;
    out.misrouted += misrouted;
    last = {delivers, dswitch, out.reachable_pairs - reachable_before, loop, misrouted};
  }

  // Kahn's algorithm over the channels that carry traffic.
  const auto num_channels = static_cast<uint32_t>(dep.size());
  std::vector<uint32_t> indeg(num_channels, 0);
  auto for_each_dep = [&](uint32_t c, auto&& fn) {
    const uint32_t slot = c / K;
    const auto cls = static_cast<uint8_t>(c % K);
    const uint32_t w = g.peer[slot];
    const uint8_t in_rule = rs.vc_rule(w, g.peer_port[slot]);
    for (PortSet s = dep[c]; s; s = s.without_lowest()) {
      uint32_t p = static_cast<uint32_t>(s.lowest());
      uint32_t next = g.base[w] + p;
      if (p < g.ports(w) && g.nrc_peer(next))
        fn(next * K + (K == 1 ? 0 : chip::next_vc_class(cls, in_rule, rs.vc_rule(w, p))));
    }
  };
  for (uint32_t c = 0; c < num_channels; ++c) {
    if (!used[c]) continue;
    ++out.channels;
    for_each_dep(c, [&](uint32_t next) {
      ++indeg[next];
      ++out.dependencies;
    });
  }
  std::vector<uint32_t> ready;
  for (uint32_t c = 0; c < num_channels; ++c)
    if (used[c] && indeg[c] == 0) ready.push_back(c);
  uint64_t removed = 0;
  while (!ready.empty()) {
    uint32_t c = ready.back();
    ready.pop_back();
    ++removed;
    for_each_dep(c, [&](uint32_t next) {
      if (--indeg[next] == 0 && used[next]) ready.push_back(next);
    });
  }
  // (A loop leaves a destination's classes unknown: no claim then.)
  out.deadlock_free = removed == out.channels && !(by_class && any_loop);
  if (!out.deadlock_free)
    problem(fmt::format("channel-dependency graph has a cycle among {} of {} channels",
                        out.channels - removed, out.channels));
  return out;
}

}  // namespace galaxy::nm
