#include "nm/route_loaded.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "chip/data_vc.h"

namespace galaxy::nm {

namespace {

using chip::PortSet;
using chip::RouteTable;

constexpr size_t kMaxProblems = 8;

struct Stretch {
  uint32_t first;
  uint32_t end;
  PortSet ports;
};

std::vector<Stretch> stretches(const RouteTable& t) {
  std::vector<Stretch> out;
  t.for_each_run([&](uint32_t first, uint32_t end, PortSet ports) {
    out.push_back({first, end, ports});
  });
  return out;
}

}  // namespace

LoadedCheck check_loaded_tables(const FabricMap& map, const RouteSet& routes,
                                const LoadedTableFn& loaded, const LoadedVcRuleFn& rules) {
  LoadedCheck out;
  const fabric::Topology& t = map.topology;
  std::vector<uint32_t> nic_ids;  // sorted NIC chip ids: the destinations packets carry
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (t.is_nic(v)) nic_ids.push_back(map.chip_id[v]);
  std::sort(nic_ids.begin(), nic_ids.end());
  auto first_nic_in = [&](uint32_t first, uint32_t end) -> int64_t {
    auto it = std::lower_bound(nic_ids.begin(), nic_ids.end(), first);
    return it != nic_ids.end() && *it < end ? int64_t{*it} : -1;
  };
  auto nics_in = [&](uint32_t first, uint32_t end) -> uint64_t {
    return static_cast<uint64_t>(std::lower_bound(nic_ids.begin(), nic_ids.end(), end) -
                                 std::lower_bound(nic_ids.begin(), nic_ids.end(), first));
  };
  auto problem = [&](Error e) {
    if (out.problems.size() < kMaxProblems) out.problems.push_back(e.to_string());
  };

  for (uint32_t v = 0; rules && v < map.num_nodes() && v < routes.vc_rules.size(); ++v) {
    if (t.is_nic(v) || routes.vc_rules[v].empty()) continue;
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      if (!t.peer({v, p})) continue;
      const uint8_t want = routes.vc_rule(v, p), have = rules(v, p);
      if (want == have) continue;
      ++out.rules_differ;
      problem(make_error(
          Code::kMalformed, 5212,
          fmt::format("chip {} ({}) port {}: holds VC rule {:#x} (dateline {}, ring "
                      "{}) but the routes need {:#x} (dateline {}, ring {})",
                      map.chip_id[v], t.name(v), p, have, (have & chip::kVcRuleDateline) != 0,
                      chip::vc_rule_ring(have), want, (want & chip::kVcRuleDateline) != 0,
                      chip::vc_rule_ring(want))));
    }
  }
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (t.is_nic(v) || v >= routes.writes.size() || routes.writes[v].empty()) continue;
    const std::vector<RangeWrite>& w = routes.writes[v];
    ++out.nrcs;
    // Input ports that receive the same writes hold the same computed table: build it once.
    std::map<std::vector<uint32_t>, std::vector<uint8_t>> by_writes;
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      if (!t.peer({v, p})) continue;  // no packet enters an unlinked port
      std::vector<uint32_t> sig;
      for (uint32_t i = 0; i < w.size(); ++i)
        if (w[i].inputs.test(p)) sig.push_back(i);
      by_writes[std::move(sig)].push_back(p);
    }
    bool readable = true;
    for (const auto& [sig, ports] : by_writes) {
      RouteTable expected;
      for (uint32_t i : sig) (void)expected.set_range(w[i].first_dest, w[i].count, w[i].ports);
      const std::vector<Stretch> want = stretches(expected);
      // Input ports sharing a held table are compared once.
      std::map<const RouteTable*, std::vector<uint8_t>> by_held;
      for (uint8_t p : ports) {
        const RouteTable* held = loaded(v, p);
        if (held == nullptr) {
          readable = false;
          break;
        }
        by_held[held].push_back(p);
      }
      if (!readable) break;
      for (const auto& [held, held_ports] : by_held) {
        ++out.comparisons;
        const std::vector<Stretch> have = stretches(*held);
        // Merge the two lists of stretches; beyond a table's size its entries are empty.
        uint32_t pos = 0;
        size_t i = 0, j = 0;
        while (pos < chip::kMaxRouteDestinations) {
          const bool in_a = i < want.size(), in_b = j < have.size();
          const uint32_t ea = in_a ? want[i].end : chip::kMaxRouteDestinations;
          const uint32_t eb = in_b ? have[j].end : chip::kMaxRouteDestinations;
          const PortSet pa = in_a ? want[i].ports : PortSet{};
          const PortSet pb = in_b ? have[j].ports : PortSet{};
          const uint32_t end = std::min(ea, eb);
          if (pa != pb) {
            const uint64_t n = nics_in(pos, end);
            if (n > 0) {
              out.entries_differ += n * held_ports.size();
              problem(make_error(
                  Code::kMalformed, 5210,
                  fmt::format("chip {} ({}) input port {}: destination {} holds {} but the "
                              "computed table has {} ({} NIC destination(s) in {}..{} differ)",
                              map.chip_id[v], t.name(v), held_ports.front(), first_nic_in(pos, end),
                              chip::to_hex(pb), chip::to_hex(pa), n, pos, end - 1)));
            }
          }
          pos = end;
          if (ea == end) ++i;
          if (eb == end) ++j;
        }
      }
    }
    if (!readable) {
      ++out.unreadable;
      problem(make_error(Code::kNotFound, 5211,
                         fmt::format("chip {} ({}): its route tables could not be read",
                                     map.chip_id[v], t.name(v))));
    }
  }
  return out;
}

}  // namespace galaxy::nm
