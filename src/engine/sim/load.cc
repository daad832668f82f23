#include "engine/sim/load.h"

#include <fmt/format.h>

#include <algorithm>

#include "chip/network_port.h"

namespace galaxy::sim {

namespace {

Result<double> util_param(const Spec& s, double fallback) {
  auto u = s.get_double("util", fallback);
  if (!u.ok()) return u;
  if (*u < 0 || *u > 1)
    return make_error(Code::kOutOfRange, 4230,
                      fmt::format("{}: util = {} is outside [0, 1]", s.name, *u));
  return u;
}

Result<std::vector<float>> load_none(const SimFabric& f, const Spec& s) {
  GALAXY_TRY(s.check_known({}));
  return std::vector<float>(f.num_outputs(), 0.0f);
}

Result<std::vector<float>> load_uniform(const SimFabric& f, const Spec& s) {
  GALAXY_TRY(s.check_known({"util"}));
  auto u = util_param(s, 0.5);
  if (!u.ok()) return u.error();
  std::vector<float> out(f.num_outputs(), 0.0f);
  const auto& t = f.topology();
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint8_t p = 0; p < t.num_ports(v); ++p)
      if (t.peer({v, p})) out[f.output_index({v, p})] = static_cast<float>(*u);
  return out;
}

// AlltoAll inside G groups of consecutive NICs (the paper's busy network: 8 groups running
// AlltoAll continuously). Every NIC sends at the same rate to every other member of its group;
// each flow is split equally over all shortest paths (ECMP, as adaptive routing spreads it).
// Loads are scaled so the busiest link runs at `util`. Flows are aggregated per pair of
// switches with NICs, so the cost is one BFS per such switch.
Result<std::vector<float>> load_alltoall(const SimFabric& f, const Spec& s) {
  GALAXY_TRY(s.check_known({"groups", "util"}));
  const auto& t = f.topology();
  auto groups = s.get_int("groups", 8, 1, std::max<uint32_t>(1, t.num_nics()));
  if (!groups.ok()) return groups.error();
  auto u = util_param(s, 0.9);
  if (!u.ok()) return u.error();
  const uint32_t G = static_cast<uint32_t>(*groups);
  const uint32_t N = t.num_nics();
  std::vector<double> load(f.num_outputs(), 0.0);
  if (N < 2) return std::vector<float>(f.num_outputs(), 0.0f);
  auto group_of = [&](uint32_t nic_index) { return uint64_t{nic_index} * G / N; };
  std::vector<uint32_t> group_size(G, 0);
  for (uint32_t i = 0; i < N; ++i) ++group_size[group_of(i)];

  // NICs per (switch, group); the switch a NIC hangs off.
  const uint32_t V = t.num_nodes();
  std::vector<std::vector<uint32_t>> at(V);
  std::vector<uint32_t> edge_switches;
  for (uint32_t i = 0; i < N; ++i) {
    uint32_t nic = t.nic_node(i);
    const auto out = chip::planned_network_port(t, nic);
    if (!out) continue;
    const auto peer = t.peer({nic, *out});
    auto& v = at[peer->node];
    if (v.empty()) {
      v.assign(G, 0);
      edge_switches.push_back(peer->node);
    }
    ++v[group_of(i)];
    // Injection and ejection links of the NIC: every NIC sends and receives at rate 1.
    load[f.output_index({nic, *out})] += 1.0;
    load[f.output_index(*peer)] += 1.0;
  }

  std::vector<uint32_t> dist(V), order;
  std::vector<double> flow(V);
  order.reserve(V);
  for (uint32_t dst : edge_switches) {
    // BFS over switches from the destination switch.
    std::fill(dist.begin(), dist.end(), UINT32_MAX);
    order.clear();
    dist[dst] = 0;
    order.push_back(dst);
    for (size_t qi = 0; qi < order.size(); ++qi) {
      uint32_t v = order[qi];
      for (uint8_t p = 0; p < t.num_ports(v); ++p) {
        auto peer = t.peer({v, p});
        if (!peer || t.is_nic(peer->node) || dist[peer->node] != UINT32_MAX) continue;
        dist[peer->node] = dist[v] + 1;
        order.push_back(peer->node);
      }
    }
    // Traffic each switch injects towards dst, summed over groups.
    for (uint32_t v : order) {
      double x = 0;
      if (!at[v].empty() && v != dst)
        for (uint32_t g = 0; g < G; ++g)
          if (group_size[g] > 1) x += double(at[v][g]) * at[dst][g] / (group_size[g] - 1);
      flow[v] = x;
    }
    // Push flow down the shortest-path DAG, farthest switches first.
    for (size_t qi = order.size(); qi-- > 1;) {
      uint32_t v = order[qi];
      if (flow[v] == 0) continue;
      uint32_t next = 0;
      for (uint8_t p = 0; p < t.num_ports(v); ++p) {
        auto peer = t.peer({v, p});
        if (peer && !t.is_nic(peer->node) && dist[peer->node] + 1 == dist[v]) ++next;
      }
      double share = flow[v] / next;
      for (uint8_t p = 0; p < t.num_ports(v); ++p) {
        auto peer = t.peer({v, p});
        if (peer && !t.is_nic(peer->node) && dist[peer->node] + 1 == dist[v]) {
          load[f.output_index({v, p})] += share;
          flow[peer->node] += share;
        }
      }
    }
  }
  double max_load = *std::max_element(load.begin(), load.end());
  std::vector<float> out(load.size(), 0.0f);
  if (max_load > 0)
    for (size_t i = 0; i < load.size(); ++i) out[i] = static_cast<float>(load[i] / max_load * *u);
  return out;
}

}  // namespace

const Registry<LoadFn>& loads() {
  static const Registry<LoadFn> r = [] {
    Registry<LoadFn> reg("load");
    reg.add({"none", "idle network", {}, {"mean_utilisation", "max_utilisation"}, load_none});
    reg.add({"uniform",
             "every link busy the same fraction of the time",
             {{"util", "double", "0.5", "utilisation of every link"}},
             {"mean_utilisation", "max_utilisation"},
             load_uniform});
    reg.add({"alltoall",
             "AlltoAll inside groups of consecutive NICs, ECMP over shortest paths",
             {{"groups", "int", "8", "number of groups (paper: 8)"},
              {"util", "double", "0.9", "utilisation of the busiest link"}},
             {"mean_utilisation", "max_utilisation"},
             load_alltoall});
    return reg;
  }();
  return r;
}

std::string load_names() {
  std::string s;
  for (const auto* e : loads().list()) s += (s.empty() ? "" : ", ") + e->name;
  return s;
}

Result<LoadSummary> apply_load(SimFabric& fabric, const std::string& text) {
  auto spec = Spec::parse(text);
  if (!spec.ok()) return spec.error();
  auto entry = loads().find(spec->name);
  if (!entry.ok()) return entry.error();
  auto util = (*entry)->factory(fabric, *spec);
  if (!util.ok()) return util.error();
  LoadSummary sum;
  sum.name = spec->name;
  double total = 0;
  for (float x : *util) {
    if (x <= 0) continue;
    ++sum.busy_outputs;
    total += x;
    sum.max_utilisation = std::max<double>(sum.max_utilisation, x);
  }
  sum.mean_utilisation = sum.busy_outputs ? total / sum.busy_outputs : 0;
  fabric.set_utilisation(std::move(*util));
  return sum;
}

}  // namespace galaxy::sim
