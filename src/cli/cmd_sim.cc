// galaxy sim — experiments on the simulated engine through the chip models.
//   galaxy sim regread: serial in-band management requests from the server NIC to one NRC at
//   each hop count, against the paper's model latency = processing + (h + 1) x per-hop RTT.
#include <cstdio>
#include <map>

#include "base/json_text.h"
#include "chip/registers.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "engine/sim/fabric_spec.h"
#include "engine/sim/load.h"
#include "engine/sim/mgmt_probe.h"

namespace galaxy::cli {

namespace {
struct RegreadOptions {
  std::string fabric = "sim:th2";
  std::string op = "read";
  std::string load = "none";
  uint32_t server_nic = 0;
  unsigned count = 1000;
  int max_hops = 8;
  uint64_t seed = 1;
  bool json = false;
};

const std::map<std::string, std::pair<wire::NmpType, unsigned>>& operations() {
  static const std::map<std::string, std::pair<wire::NmpType, unsigned>> ops{
      {"read", {wire::NmpType::kRegReadRequest, 1}},
      {"read2", {wire::NmpType::kRegReadRequest, 2}},
      {"write", {wire::NmpType::kRegWriteRequest, 1}},
      {"eeprom-read", {wire::NmpType::kEepromReadRequest, 1}},
      {"eeprom-write", {wire::NmpType::kEepromWriteRequest, 1}},
  };
  return ops;
}

void run_regread(const RegreadOptions& o) {
  auto op = operations().find(o.op);
  if (op == operations().end())
    return report_error(make_error(Code::kInvalidArgument, 9001,
                                   fmt::format("--op = '{}' is not one of read, read2, write, "
                                               "eeprom-read, eeprom-write",
                                               o.op)),
                        o.json);
  auto topo = sim::resolve_topology(o.fabric);
  if (!topo.ok()) return report_error(topo.error(), o.json);
  if (o.server_nic >= topo->num_nics())
    return report_error(make_error(Code::kOutOfRange, 9002,
                                   fmt::format("--server-nic = {} exceeds the {} NICs",
                                               o.server_nic, topo->num_nics())),
                        o.json);
  auto timing = sim::default_timing();
  if (!timing.ok()) return report_error(timing.error(), o.json);
  sim::SimOptions so;
  so.seed = o.seed;
  auto f = sim::SimFabric::create(*topo, *timing, so);
  if (!f.ok()) return report_error(f.error(), o.json);
  sim::SimFabric& fab = **f;
  auto load = sim::apply_load(fab, o.load);
  if (!load.ok()) return report_error(load.error(), o.json);

  uint32_t server = topo->nic_node(o.server_nic);
  // The first NRC found at each distance from the server; distances count NRCs, so the NRC
  // attached to the server (distance 1) is h = 0.
  std::vector<uint32_t> dist = topo->bfs_distances(server);
  std::map<uint32_t, uint32_t> target_at;
  for (uint32_t v = 0; v < topo->num_nodes(); ++v)
    if (!topo->is_nic(v) && dist[v] != UINT32_MAX && dist[v] >= 1 &&
        static_cast<int>(dist[v]) - 1 <= o.max_hops)
      target_at.emplace(dist[v] - 1, v);

  bool eeprom = wire::is_eeprom(op->second.first);
  unsigned items = op->second.second;
  double processing_us =
      sim::to_us(eeprom ? timing->eeprom_read_processing(1) : timing->register_read_processing());
  double per_hop_us = 2 * sim::to_us(timing->mgmt_hop());
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json)
    std::printf("%-4s %-8s %12s %12s %8s   (%s, N=%u, load %s)\n", "h", "node", "ours_us",
                "model_us", "ratio", o.op.c_str(), o.count, o.load.c_str());
  for (auto [h, node] : target_at) {
    sim::ProbeSpec ps;
    ps.server_nic = server;
    ps.target = node;
    ps.type = op->second.first;
    ps.count = o.count;
    ps.addresses.clear();
    for (unsigned i = 0; i < items; ++i)
      ps.addresses.push_back(static_cast<uint16_t>(eeprom ? 0x100 + i : chip::reg::kScratch));
    if (!eeprom && items == 2) ps.addresses = {chip::reg::kScratch, chip::reg::kTemperature};
    ps.values.assign(items, 0x5A);
    auto r = sim::run_probe(fab, ps);
    if (!r.ok()) return report_error(r.error(), o.json);
    double model = processing_us + (h + 1) * per_hop_us;
    rows.push_back({{"h", h},
                    {"node", node},
                    {"name", topo->name(node)},
                    {"ours_us", r->mean_us},
                    {"model_us", model},
                    {"ratio", r->mean_us / model},
                    {"min_us", r->min_us},
                    {"max_us", r->max_us},
                    {"requests", r->completed}});
    if (!o.json)
      std::printf("%-4u %-8u %12.4f %12.4f %8.4f\n", h, node, r->mean_us, model,
                  r->mean_us / model);
  }
  nlohmann::json j{
      {"fabric", o.fabric},
      {"op", o.op},
      {"load", o.load},
      {"model",
       {{"processing_us", processing_us},
        {"per_hop_round_trip_us", per_hop_us},
        {"source", "docs/system.md 2.8: latency = processing + (hops + 1) x per-hop"}}},
      {"rows", rows},
      {"mgmt_waits_behind_data", fab.stats().mgmt_waits_behind_data},
      {"sim_events", fab.sim().events_processed()}};
  if (o.json) std::printf("%s\n", json_text(j, 2).c_str());
}
}  // namespace

namespace {
void add_sim_command(CLI::App& app) {
  auto* s = app.add_subcommand("sim", "Experiments on the simulated engine");
  s->require_subcommand(1);
  auto o = std::make_shared<RegreadOptions>();
  auto* c = s->add_subcommand(
      "regread", "Serial in-band management requests at every hop count vs the paper's model");
  c->add_option("--fabric", o->fabric, "sim:<topology> or file:<path>")->capture_default_str();
  c->add_option("--op", o->op, "read | read2 | write | eeprom-read | eeprom-write")
      ->capture_default_str();
  c->add_option("--load", o->load, "background load: " + sim::load_names())->capture_default_str();
  c->add_option("--server-nic", o->server_nic, "NIC index of the server")
      ->capture_default_str()
      ->check(integer_in(0, 65534));
  c->add_option("--count", o->count, "requests per hop count (paper: N = 1000)")
      ->capture_default_str()
      ->check(integer_in(1, 1000000));
  c->add_option("--max-hops", o->max_hops, "largest h to measure")
      ->capture_default_str()
      ->check(integer_in(0, 20));
  c->add_option("--seed", o->seed, "random seed")->capture_default_str()->check(any_uint64());
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_regread(*o); });
}

const CommandRegistrar kSimRegistrar("sim", add_sim_command);
}  // namespace

}  // namespace galaxy::cli
