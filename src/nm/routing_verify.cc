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
#include <atomic>
#include <bit>
#include <future>
#include <memory>

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

// next_of_slot's marks for a port whose peer is not an NRC (its low bits: the NIC's node).
constexpr uint32_t kNextNic = 0x80000000u;
constexpr uint32_t kNextNone = detail::kInf;

struct Tables {
  std::vector<uint32_t> state_of_slot;  // NRC port slot -> state (kInf for NIC ports)
  // NRC port slot -> the state a packet sent out of it enters at the far end: the far NRC's
  // input state, kNextNic | the NIC's node, or kNextNone (no link). One read where the search
  // would chase the peer, its base and its port.
  std::vector<uint32_t> next_of_slot;
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
  t.next_of_slot.assign(g.peer.size(), kNextNone);
  for (uint32_t v : g.nrcs)
    for (uint32_t p = 0; p < g.ports(v); ++p) {
      const uint32_t slot = g.base[v] + p, w = g.peer[slot];
      if (w == fabric::kNoNode) continue;
      t.next_of_slot[slot] =
          map.topology.is_nic(w) ? kNextNic | w : t.state_of_slot[g.base[w] + g.peer_port[slot]];
    }
  return t;
}

// What every worker reads: the tables as states and ranges, the NICs in chip id order, the
// range boundaries by destination and the distinct states packets enter the fabric in.
struct Shared {
  Shared(const FabricMap& m, const PortGraph& pg, const RouteSet& r, const Tables& tables)
      : map(m), g(pg), rs(r), t(tables) {}
  const FabricMap& map;
  const PortGraph& g;
  const RouteSet& rs;
  const Tables& t;
  bool by_class = false;
  uint32_t K = 1;
  std::vector<std::pair<wire::ChipId, uint32_t>> nics;  // (chip id, node), by chip id
  // Every range boundary, by destination: the states whose entry changes from one destination
  // to the next. Consecutive NICs on one NRC usually differ only in that NRC's own entries
  // (the port of each NIC); their next-hop graphs are then the same up to the last hop, and the
  // result of the first is reused for the others.
  std::vector<std::pair<uint32_t, uint32_t>> boundaries;  // (destination, state)
  std::vector<uint32_t> states_of_node_begin;
  // The states source NICs inject into (the input state of their NRC port), in the order the
  // NICs first name them, with how many NICs do; entry_of_nic[i]: nics[i]'s (kInf if none).
  std::vector<std::pair<uint32_t, uint32_t>> entries;  // (state, NICs)
  std::vector<uint32_t> entry_of_nic;
};

// One worker's search state and the channel dependencies it found (OR-ed over workers).
struct Worker {
  explicit Worker(const Shared& sh)
      : cursor(sh.t.range_begin),
        visit(sh.t.node_of_state.size()),
        dep(sh.g.peer.size() * sh.K),
        used(sh.g.peer.size() * sh.K, 0),
        classes_in(sh.by_class ? sh.t.node_of_state.size() : 0) {}
  std::vector<uint32_t> cursor;  // per state, into its ranges; destinations only increase
  // A state's search record for the current destination (valid while epoch is its stamp), in
  // one place: the search reaches states in no order, so each is one cache miss, not five.
  struct Visit {
    PortSet set;  // its entry for the destination
    uint32_t epoch = UINT32_MAX;
    uint32_t height = 0;  // NRCs on the longest path from it
    uint8_t color = 0;
    uint8_t good = 0;  // every path from it ends at the destination
  };
  std::vector<Visit> visit;
  // Channels: (link slot, VC class) as slot * K + class. dep: the out ports at the link's far
  // end that packets arriving over it in that class take.
  std::vector<PortSet> dep;
  std::vector<uint8_t> used;
  std::vector<uint32_t> finished;  // by_class: the states in the order the search left them
  std::vector<uint32_t> sources;
  std::vector<uint8_t> classes_in;  // by_class: bit c: arrives in class c
  struct Frame {
    uint32_t state;
    PortSet todo;
  };
  std::vector<Frame> stack;
};

// The findings for a run of destinations.
struct Part {
  uint64_t reachable = 0, loops = 0, misrouted = 0;
  uint32_t max_path_nrcs = 0;
  bool any_loop = false;
  std::vector<std::string> problems;
};

// Destinations nics[begin, end), begin the first NIC of its NRC in chip id order (so that
// the reuse of the destination before never crosses into a part: the parts add up to what one
// pass over all destinations finds, problems in the same order).
void verify_part(const Shared& sh, Worker& wk, size_t begin, size_t end, Part& out) {
  // Plain references: clang 14 cannot capture structured bindings in a lambda.
  const FabricMap& map = sh.map;
  const PortGraph& g = sh.g;
  const RouteSet& rs = sh.rs;
  const Tables& t = sh.t;
  const bool by_class = sh.by_class;
  const uint32_t K = sh.K;
  const auto& nics = sh.nics;
  const auto& boundaries = sh.boundaries;
  std::vector<uint32_t>& cursor = wk.cursor;
  std::vector<Worker::Visit>& vis = wk.visit;
  auto& stack = wk.stack;
  enum : uint8_t { kWhite, kGray, kBlack };
  auto lookup = [&t, &cursor](uint32_t x, uint32_t d) -> PortSet {
    uint32_t& c = cursor[x];
    while (c < t.range_end[x] && t.ranges[c].end <= d) ++c;
    return c < t.range_end[x] && t.ranges[c].first <= d ? t.ranges[c].ports : PortSet{};
  };
  auto problem = [&out](std::string text) {
    if (out.problems.size() < kMaxProblems) out.problems.push_back(std::move(text));
  };
  size_t next_boundary = 0;
  if (begin > 0) {
    const uint32_t before = nics[begin - 1].first;
    next_boundary = static_cast<size_t>(
        std::upper_bound(boundaries.begin(), boundaries.end(), std::pair{before, UINT32_MAX}) -
        boundaries.begin());
  }
  struct Last {
    bool valid = false;
    uint32_t dest_switch = fabric::kNoNode;
    uint64_t reachable = 0;
    bool loop = false, misrouted = false;
  } last;

  for (size_t di = begin; di < end; ++di) {
    const uint32_t dchip = nics[di].first, dnode = nics[di].second;
    const auto stamp = static_cast<uint32_t>(di);
    bool loop = false, misrouted = false;
    const uint32_t dswitch = g.nic_nrc[dnode];
    bool only_own_changed = true;
    for (; next_boundary < boundaries.size() && boundaries[next_boundary].first <= dchip;
         ++next_boundary)
      if (t.node_of_state[boundaries[next_boundary].second] != dswitch) only_own_changed = false;
    bool delivers = dswitch != fabric::kNoNode;
    for (uint32_t x = delivers ? sh.states_of_node_begin[dswitch] : 0;
         delivers && x < sh.states_of_node_begin[dswitch + 1]; ++x)
      delivers = lookup(x, dchip) == PortSet::of(g.nic_port[dnode]) ||
                 t.range_begin[x] == t.range_end[x];  // a table-less port: same for all
    if (last.valid && delivers && only_own_changed && last.dest_switch == dswitch) {
      out.reachable += last.reachable;
      out.loops += last.loop;
      out.misrouted += last.misrouted;
      continue;
    }
    const uint64_t reachable_before = out.reachable;
    auto discover = [&](uint32_t x) {
      Worker::Visit& r = vis[x];
      r.epoch = stamp;
      r.color = kWhite;
      r.set = lookup(x, dchip);
      r.good = r.set.any();
      r.height = 1;
      if (!r.set && !misrouted) {
        misrouted = true;
        problem(fmt::format("destination {}: no route at NRC chip {}", dchip,
                            map.chip_id[t.node_of_state[x]]));
      }
    };
    for (const auto& [s0, injecting] : sh.entries) {
      // The NICs that inject into s0, the destination itself not counted.
      const uint32_t senders = injecting - (sh.entry_of_nic[di] == s0 ? 1 : 0);
      if (senders == 0) continue;
      if (by_class) wk.sources.push_back(s0);
      if (vis[s0].epoch != stamp) {
        discover(s0);
        stack.push_back({s0, vis[s0].set});
        vis[s0].color = kGray;
        while (!stack.empty()) {
          Worker::Frame& f = stack.back();
          uint32_t x = f.state, v = t.node_of_state[x];
          if (f.todo.none()) {
            vis[x].color = kBlack;
            if (by_class) wk.finished.push_back(x);
            stack.pop_back();
            if (!stack.empty()) {
              Worker::Visit& parent = vis[stack.back().state];
              parent.good = parent.good && vis[x].good;
              parent.height = std::max(parent.height, vis[x].height + 1);
            }
            continue;
          }
          uint32_t p = static_cast<uint32_t>(f.todo.lowest());
          f.todo = f.todo.without_lowest();
          uint32_t slot = g.base[v] + p;
          const uint32_t next = p < g.ports(v) ? t.next_of_slot[slot] : kNextNone;
          if (next == kNextNone || (next & kNextNic)) {
            const uint32_t w = next == kNextNone ? fabric::kNoNode : next & ~kNextNic;
            if (w != dnode) {
              vis[x].good = 0;
              if (!misrouted)
                problem(fmt::format(
                    "destination {}: NRC chip {} may send it out of port {} {}", dchip,
                    map.chip_id[v], p,
                    w == fabric::kNoNode ? "(no link)" : fmt::format("to NIC {}", map.chip_id[w])));
              misrouted = true;
            }
            continue;
          }
          const uint32_t child = next;
          if (vis[child].epoch != stamp) discover(child);
          const Worker::Visit& c = vis[child];
          if (!by_class) {
            wk.used[slot] = 1;
            wk.dep[slot] |= c.set;
          }
          if (c.color == kGray) {
            vis[x].good = 0;
            if (!loop)
              problem(fmt::format("destination {}: loop through NRC chip {} port {}", dchip,
                                  map.chip_id[v], p));
            loop = true;
          } else if (c.color == kBlack) {
            vis[x].good = vis[x].good && c.good;
            vis[x].height = std::max(vis[x].height, c.height + 1);
          } else {
            vis[child].color = kGray;
            stack.push_back({child, c.set});
          }
        }
      }
      if (vis[s0].good) {
        out.reachable += senders;
        out.max_path_nrcs = std::max(out.max_path_nrcs, vis[s0].height);
      }
    }
    if (by_class && !loop) {
      // The classes packets for this destination arrive in, states in topological order (the
      // reverse of the order the search left them): from the NICs in class 0, then as each
      // NRC's VC rules move them.
      auto& classes_in = wk.classes_in;
      for (uint32_t x : wk.finished) classes_in[x] = 0;
      for (uint32_t s : wk.sources) classes_in[s] = 1;
      for (auto it = wk.finished.rbegin(); it != wk.finished.rend(); ++it) {
        const uint32_t x = *it, v = t.node_of_state[x];
        if (!classes_in[x]) continue;
        for (PortSet s = vis[x].set; s; s = s.without_lowest()) {
          const auto p = static_cast<uint32_t>(s.lowest());
          const uint32_t slot = g.base[v] + p;
          if (p >= g.ports(v) || !g.nrc_peer(slot)) continue;
          const uint32_t child = t.next_of_slot[slot];
          for (uint8_t c = 0; c < K; ++c) {
            if (!(classes_in[x] & (1u << c))) continue;
            const uint8_t on_link = chip::next_vc_class(c, t.rule_of_state[x], rs.vc_rule(v, p));
            wk.used[slot * K + on_link] = 1;
            wk.dep[slot * K + on_link] |= vis[child].set;
            classes_in[child] = static_cast<uint8_t>(classes_in[child] | (1u << on_link));
          }
        }
      }
    }
    wk.finished.clear();
    wk.sources.clear();
    out.any_loop = out.any_loop || loop;
    out.loops += loop;
    out.misrouted += misrouted;
    last = {delivers, dswitch, out.reachable - reachable_before, loop, misrouted};
  }
}

}  // namespace

RouteCheck verify_routes(const FabricMap& map, const RouteSet& rs) {
  RouteCheck out;
  PortGraph g(map.topology);
  Tables t = build_tables(map, g, rs, out);
  const size_t states = t.node_of_state.size();
  Shared sh{map, g, rs, t};
  sh.by_class = rs.has_vc_rules();
  sh.K = sh.by_class ? chip::kDataVcClasses : 1;
  const uint32_t K = sh.K;
  auto& nics = sh.nics;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (map.topology.is_nic(v)) nics.emplace_back(map.chip_id[v], v);
  std::sort(nics.begin(), nics.end());
  const uint64_t n_nics = nics.size();
  out.nic_pairs = n_nics * (n_nics > 0 ? n_nics - 1 : 0);
  for (uint32_t x = 0; x < states; ++x)
    for (uint32_t r = t.range_begin[x]; r < t.range_end[x]; ++r) {
      sh.boundaries.emplace_back(t.ranges[r].first, x);
      sh.boundaries.emplace_back(t.ranges[r].end, x);
    }
  std::sort(sh.boundaries.begin(), sh.boundaries.end());
  sh.states_of_node_begin.assign(map.num_nodes() + 1, 0);
  for (uint32_t x = 0; x < states; ++x) ++sh.states_of_node_begin[t.node_of_state[x] + 1];
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    sh.states_of_node_begin[v + 1] += sh.states_of_node_begin[v];
  sh.entry_of_nic.assign(nics.size(), detail::kInf);
  {
    std::vector<uint32_t> index_of(states, detail::kInf);
    for (size_t i = 0; i < nics.size(); ++i) {
      const uint32_t snode = nics[i].second;
      if (g.nic_nrc[snode] == fabric::kNoNode) continue;
      const uint32_t s0 = t.state_of_slot[g.base[g.nic_nrc[snode]] + g.nic_port[snode]];
      sh.entry_of_nic[i] = s0;
      if (index_of[s0] == detail::kInf) {
        index_of[s0] = static_cast<uint32_t>(sh.entries.size());
        sh.entries.emplace_back(s0, 0);
      }
      ++sh.entries[index_of[s0]].second;
    }
  }

  // Parts: runs of whole destination NRCs (a part never starts inside an NRC's run of NICs),
  // a few per worker, taken in turn by route_workers() threads.
  std::vector<size_t> starts;
  for (size_t i = 0; i < nics.size(); ++i)
    if (i == 0 || g.nic_nrc[nics[i].second] != g.nic_nrc[nics[i - 1].second]) starts.push_back(i);
  const unsigned workers = detail::route_workers(starts.size());
  const size_t want = std::min<size_t>(starts.size(), size_t{workers} * 4);
  std::vector<size_t> bounds;
  for (size_t k = 0; k < want; ++k) bounds.push_back(starts[k * starts.size() / want]);
  bounds.push_back(nics.size());
  std::vector<Part> parts(want);
  std::vector<std::unique_ptr<Worker>> pool(workers);
  std::atomic<size_t> next_part{0};
  auto work = [&](unsigned w) {
    for (size_t k; (k = next_part.fetch_add(1)) < want;) {
      if (!pool[w]) pool[w] = std::make_unique<Worker>(sh);
      verify_part(sh, *pool[w], bounds[k], bounds[k + 1], parts[k]);
    }
  };
  {
    std::vector<std::future<void>> others;
    for (unsigned w = 1; w < workers; ++w)
      others.push_back(std::async(std::launch::async, work, w));
    work(0);
    for (auto& f : others) f.get();
  }
  bool any_loop = false;
  for (Part& part : parts) {
    out.reachable_pairs += part.reachable;
    out.loops += part.loops;
    out.misrouted += part.misrouted;
    out.max_path_nrcs = std::max(out.max_path_nrcs, part.max_path_nrcs);
    any_loop = any_loop || part.any_loop;
    for (std::string& text : part.problems)
      if (out.problems.size() < kMaxProblems) out.problems.push_back(std::move(text));
  }
  // The channel dependencies, OR-ed over the workers.
  std::vector<PortSet> dep(g.peer.size() * K);
  std::vector<uint8_t> used(g.peer.size() * K, 0);
  for (const auto& wk : pool) {
    if (!wk) continue;
    for (size_t c = 0; c < dep.size(); ++c) {
      dep[c] |= wk->dep[c];
      used[c] = used[c] | wk->used[c];
    }
  }
  const bool by_class = sh.by_class;
  auto problem = [&](std::string text) {
    if (out.problems.size() < kMaxProblems) out.problems.push_back(std::move(text));
  };

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
