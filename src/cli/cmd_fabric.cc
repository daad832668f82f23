// galaxy fabric — build or load a fabric, instantiate its chip models, print its figures.
#include <chrono>
#include <cstdio>

#include "base/json_text.h"
#include "base/sysinfo.h"
#include "cli/commands.h"
#include "cli/fabric_live.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/run_control.h"
#include "engine/sim/fabric_spec.h"
#include "engine/sim/sim_fabric.h"
#include "fabric/io.h"

namespace galaxy::cli {

namespace {
struct FabricOptions {
  std::string fabric = "sim:th2";
  bool json = false;
  bool list = false;
  bool no_chips = false;
  bool chips = false;
  uint32_t server_nic = 0;
  std::string write;
};

void run_fabric(const FabricOptions& o) {
  if (o.list) {
    std::printf("%s", sim::fabric_spec_help().c_str());
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto topo = sim::resolve_topology(o.fabric);
  if (!topo.ok()) return report_error(topo.error(), o.json);
  double build_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  fabric::FabricStats st = fabric::analyze(*topo, o.server_nic);
  double analyze_ms = ms_since(t1);

  double chips_ms = 0;
  size_t chips = 0;
  if (!o.no_chips) {
    // Instantiate every chip model and power it on (EEPROM boot, link training), so that the
    // memory figure covers the simulated fabric and not only the graph.
    auto timing = sim::default_timing();
    if (!timing.ok()) return report_error(timing.error(), o.json);
    auto t2 = std::chrono::steady_clock::now();
    auto f = sim::SimFabric::create(*topo, *timing);
    if (!f.ok()) return report_error(f.error(), o.json);
    chips = (*f)->topology().num_nodes();
    chips_ms = ms_since(t2);
  }
  if (!o.write.empty()) {
    Status s = fabric::save_topology_file(*topo, o.write);
    if (!s.ok()) return report_error(s.error(), o.json);
  }
  uint32_t server_max = 0;
  for (size_t h = 0; h < st.hop_histogram.size(); ++h)
    if (st.hop_histogram[h]) server_max = static_cast<uint32_t>(h);

  nlohmann::json j{{"fabric", o.fabric},
                   {"nic", st.nics},
                   {"nrc", st.nrcs},
                   {"links", st.links},
                   {"max_hops", st.max_hops},
                   {"connected", st.connected},
                   {"server_nic", o.server_nic},
                   {"server_max_hops", server_max},
                   {"server_hop_histogram", st.hop_histogram},
                   {"unreachable_nrcs", st.unreachable_nrcs},
                   {"chips_instantiated", chips},
                   {"build_ms", build_ms},
                   {"analyze_ms", analyze_ms},
                   {"instantiate_ms", chips_ms},
                   {"peak_rss_mb", peak_rss_mb()}};
  if (o.chips) {
    // Every chip with the names commands accept for it (docs/topologies.md "Naming chips").
    nlohmann::json list = nlohmann::json::array();
    for (uint32_t v = 0; v < topo->num_nodes(); ++v) {
      nlohmann::json c{{"chip", v},
                       {"kind", fabric::node_kind_name(topo->kind(v))},
                       {"ports", topo->num_ports(v)},
                       {"name", topo->name(v)}};
      if (topo->is_nic(v)) c["nic"] = topo->nic_index(v);
      fabric::add_identity_json(c, topo->identity(v));
      list.push_back(std::move(c));
    }
    j["chips"] = std::move(list);
  }
  if (o.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  if (o.chips)
    for (uint32_t v = 0; v < topo->num_nodes(); ++v) {
      const std::string nic =
          topo->is_nic(v) ? fmt::format("nic:{}", topo->nic_index(v)) : std::string();
      std::printf("%6u %-3s %-8s %3u ports  %s  %s\n", v, fabric::node_kind_name(topo->kind(v)),
                  nic.c_str(), topo->num_ports(v), excerpt(topo->name(v)).c_str(),
                  fabric::identity_text(topo->identity(v)).c_str());
    }
  std::printf("fabric %s\n  NICs %u  NRCs %u  links %u  connected %s\n", o.fabric.c_str(), st.nics,
              st.nrcs, st.links, st.connected ? "yes" : "NO");
  std::printf("  max hops between NICs: %u NRCs; from server NIC %u: at most h = %u\n", st.max_hops,
              o.server_nic, server_max);
  std::printf("  NRCs by hop count from the server:");
  for (size_t h = 0; h < st.hop_histogram.size(); ++h)
    std::printf(" h%zu=%llu", h, static_cast<unsigned long long>(st.hop_histogram[h]));
  std::printf(
      "\n  build %.1f ms, analyse %.1f ms, chip models %.1f ms (%zu chips), peak RSS %.0f MiB\n",
      build_ms, analyze_ms, chips_ms, chips, peak_rss_mb());
}
}  // namespace

namespace {
void add_fabric_command(CLI::App& app) {
  auto o = std::make_shared<FabricOptions>();
  auto* c =
      app.add_subcommand("fabric", "Build or load a fabric, instantiate its chips, report it");
  c->add_option("--fabric", o->fabric,
                "sim:<topology> (see --list) or file:<path> (JSON, dot, ibnetdiscover)")
      ->capture_default_str();
  c->add_flag("--json", o->json, "machine-readable output");
  c->add_flag("--list", o->list, "list the registered topology builders and their parameters");
  c->add_flag("--no-chips", o->no_chips, "only the graph: do not instantiate the chip models");
  c->add_flag("--chips", o->chips,
              "list every chip: id, NIC index, name, GUID, description, LIDs (the names commands "
              "accept)");
  c->add_option("--server-nic", o->server_nic, "NIC index of the management server")
      ->capture_default_str()
      ->check(integer_in(0, 65534));
  c->add_option("--write", o->write,
                "save the topology (.json, .dot, or .net for ibsim, by extension)");
  add_fabric_live_subcommands(c);
  c->require_subcommand(0, 1);
  c->callback([o, c]() {
    if (c->get_subcommands().empty()) run_fabric(*o);
  });
}

const CommandRegistrar kFabricRegistrar("fabric", add_fabric_command);
}  // namespace

}  // namespace galaxy::cli
