// galaxy route — compute route tables with a routing engine on the discovered map, verify them
// (reachability, loops, deadlock freedom) and load them into every NRC (docs/system.md 2.5.1).
// galaxy bringup — the whole bring-up: pipelined discovery, fat-tree routing, loading, then
// table-routed MPs between random NIC pairs as an end-to-end check.
#include <chrono>
#include <cstdio>
#include <future>
#include <random>

#include "base/json_text.h"
#include "base/sysinfo.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/route_phases.h"
#include "cli/run_control.h"
#include "cli/session.h"
#include "nm/route_load.h"
#include "nm/route_loaded.h"
#include "nm/routing.h"

namespace galaxy::cli {

namespace {

using Clock = std::chrono::steady_clock;
}  // namespace

bool route_phases(RouteOptions& o, Session& s, nlohmann::json& j) {
  auto t0 = Clock::now();
  Status d = discover(s, o.session);
  if (!d.ok()) {
    report_error(d.error(), o.session.json);
    return false;
  }
  double discovery_wall = ms_since(t0);
  const nm::FabricMap& map = s.discovery.map;
  auto t1 = Clock::now();
  auto routes = nm::compute_routes(map, o.engine);
  if (!routes.ok()) {
    report_error(routes.error(), o.session.json);
    return false;
  }
  double compute_ms = ms_since(t1);
  // The verifier reads only the map and the computed tables, the loader drives the fabric: the
  // two run side by side, each on a core of its own where there are two.
  double verify_ms = 0;
  auto verifying = std::async(std::launch::async, [&] {
    auto t2 = Clock::now();
    nm::RouteCheck c = nm::verify_routes(map, *routes);
    verify_ms = ms_since(t2);
    return c;
  });
  auto t3 = Clock::now();
  nm::LoadOptions lo;
  lo.also_eeprom = o.eeprom;
  lo.verify_per_nrc = o.verify_per_nrc;
  auto load = nm::load_routes(*s.requester, map, *routes, lo);
  double load_wall = ms_since(t3);
  nm::RouteCheck check = verifying.get();
  if (!load.ok()) {
    report_error(load.error(), o.session.json);
    return false;
  }
  // What the chips hold, through the chip models (simulated fabrics; a live fabric's tables are
  // in its daemons, where --readback reads entries back through management).
  std::optional<nm::LoadedCheck> held;
  double held_ms = 0;
  if (s.fabric) {
    auto t4 = Clock::now();
    held = nmd::check_held_tables(s, map, *routes);
    held_ms = ms_since(t4);
    for (const std::string& p : held->problems) check.problems.push_back(p);
  }
  // Chips discovery found but could not manage (beyond a source route's reach, never
  // answered): routes over the rest are no bring-up of the whole fabric.
  const std::vector<std::string>& unmanaged = s.discovery.problems;
  bool routed = check.reachable_pairs == check.nic_pairs && check.loops == 0 &&
                check.misrouted == 0 && (!held || held->ok()) && unmanaged.empty() &&
                s.discovery.failed_requests == 0;
  j = nlohmann::json{{"fabric", o.session.fabric},
                     {"engine", routes->engine},
                     {"mode", o.session.serial ? "serial" : "pipelined"},
                     {"nrc", map.topology.num_nrcs()},
                     {"nic", map.topology.num_nics()},
                     {"discovery_sim_time_us", static_cast<double>(s.discovery.elapsed) / nm::kUs},
                     {"discovery_wall_ms", discovery_wall},
                     {"discovery_requests", s.discovery.requests},
                     {"discovery_failed_requests", s.discovery.failed_requests},
                     {"discovery_problems", unmanaged},
                     {"compute_ms", compute_ms},
                     {"range_writes", routes->num_writes()},
                     {"verify_ms", verify_ms},
                     {"reachable_pairs", check.reachable_pairs},
                     {"nic_pairs", check.nic_pairs},
                     {"loops", check.loops},
                     {"misrouted_destinations", check.misrouted},
                     {"deadlock_free", check.deadlock_free},
                     {"channels", check.channels},
                     {"channel_dependencies", check.dependencies},
                     {"max_path_nrcs", check.max_path_nrcs},
                     {"routes_verified", routed},
                     {"load_packets", load->packets},
                     {"load_failed", load->failed},
                     {"load_sim_time_us", static_cast<double>(load->elapsed) / nm::kUs},
                     {"load_wall_ms", load_wall},
                     {"problems", check.problems}};
  if (held) {
    j["held_tables_checked"] = held->comparisons;
    j["held_entries_differ"] = held->entries_differ;
    j["held_vc_rules_differ"] = held->rules_differ;
    j["held_check_ms"] = held_ms;
  }
  if (o.eeprom) {
    j["eeprom_packets"] = load->eeprom_packets;
    j["eeprom_sim_time_us"] = static_cast<double>(load->eeprom_elapsed) / nm::kUs;
  }
  if (o.verify_per_nrc > 0) {
    j["readback_packets"] = load->verify_packets;
    j["readback_mismatches"] = load->verify_mismatches;
  }
  if (!routed || load->failed > 0 || load->verify_mismatches > 0) set_exit_code(1);
  return true;
}

std::shared_ptr<sim::SimFabric> routed_sim_fabric(RouteOptions& o, nlohmann::json& phases) {
  auto s = open_session(o.session);
  if (!s.ok()) {
    report_error(s.error(), o.session.json);
    return nullptr;
  }
  if (!s->fabric) {
    report_error(make_error(Code::kInvalidArgument, 9636,
                            fmt::format("--fabric = '{}' is not a simulated fabric (sim:...)",
                                        o.session.fabric)),
                 o.session.json);
    return nullptr;
  }
  if (!route_phases(o, *s, phases)) return nullptr;
  s->requester.reset();
  s->port.reset();
  s->device.reset();
  return std::move(s->fabric);
}

namespace {

void print_text(const nlohmann::json& j) {
  const auto& dp = j["discovery_problems"];
  if (!dp.empty()) {
    std::printf("discovery: %zu problem(s); the fabric is not wholly managed:\n", dp.size());
    size_t shown = 0;
    for (const auto& p : dp) {
      if (shown++ == 8) {
        std::printf("  ... and %zu more (--json lists them all)\n", dp.size() - 8);
        break;
      }
      std::printf("  %s\n", p.get<std::string>().c_str());
    }
    std::printf(
        "  (--server-nic places the management server; one nearer the middle of the "
        "fabric reaches farther)\n");
  }
  std::printf(
      "%s: %llu/%llu NIC pairs routed, loops %llu, deadlock free: %s, longest path %u NRCs\n",
      j["engine"].get<std::string>().c_str(),
      static_cast<unsigned long long>(j["reachable_pairs"].get<uint64_t>()),
      static_cast<unsigned long long>(j["nic_pairs"].get<uint64_t>()),
      static_cast<unsigned long long>(j["loops"].get<uint64_t>()),
      j["deadlock_free"].get<bool>() ? "yes" : "NO", j["max_path_nrcs"].get<uint32_t>());
  std::printf(
      "compute %.0f ms, verify %.0f ms; loaded %llu packets in %.1f us simulated (%.0f ms wall)\n",
      j["compute_ms"].get<double>(), j["verify_ms"].get<double>(),
      static_cast<unsigned long long>(j["load_packets"].get<uint64_t>()),
      j["load_sim_time_us"].get<double>(), j["load_wall_ms"].get<double>());
  if (j.contains("held_tables_checked"))
    std::printf(
        "held tables (read through the chip models): %llu compared, %llu entries differ, "
        "%llu VC rules differ (%.0f ms)\n",
        static_cast<unsigned long long>(j["held_tables_checked"].get<uint64_t>()),
        static_cast<unsigned long long>(j["held_entries_differ"].get<uint64_t>()),
        static_cast<unsigned long long>(j["held_vc_rules_differ"].get<uint64_t>()),
        j["held_check_ms"].get<double>());
  for (const auto& p : j["problems"]) std::printf("  %s\n", p.get<std::string>().c_str());
}

// Against daemons: compute, verify and load with --engine on every daemon (POST /api/routes).
void run_route_remote(const RouteOptions& o) {
  const nlohmann::json body{{"engine", o.engine}};
  print_all(call_all("POST", "/api/routes", &body), o.session.json,
            [](const std::string& server, const nlohmann::json& j) {
              std::printf(
                  "%s: %s loaded: %llu/%llu NIC pairs routed, deadlock free: %s, %llu "
                  "table writes (%llu failed)\n",
                  server.c_str(), j["engine"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(j["reachable_pairs"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["nic_pairs"].get<uint64_t>()),
                  j["deadlock_free"].get<bool>() ? "yes" : "NO",
                  static_cast<unsigned long long>(j["load_packets"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["load_failed"].get<uint64_t>()));
            });
}

void run_route(RouteOptions& o) {
  if (o.list) {
    std::printf("routing engines:\n%s", nm::routing_engines().describe().c_str());
    return;
  }
  if (is_remote()) return run_route_remote(o);
  auto t0 = Clock::now();
  auto s = open_session(o.session);
  if (!s.ok()) return report_error(s.error(), o.session.json);
  nlohmann::json j;
  if (!route_phases(o, *s, j)) return;
  j["wall_ms"] = ms_since(t0);
  j["peak_rss_mb"] = peak_rss_mb();
  if (o.session.json)
    std::printf("%s\n", json_text(j, 2).c_str());
  else
    print_text(j);
}

// Table-routed MPs from VP 0 to VP 1 (the management server's own VP is a DMA VP, untouched)
// between random pairs of the NICs discovery found (the routes cover those; a destination
// outside them has no computed route); counts those that reach VP 1 of the right NIC.
std::pair<uint64_t, uint64_t> send_mps(Session& s, uint32_t count, uint64_t seed) {
  if (!s.fabric) return {0, 0};  // live fabrics: `galaxy bench pingpong` moves real data
  auto& f = *s.fabric;
  const nm::FabricMap& map = s.discovery.map;
  std::vector<uint32_t> nics;  // simulator nodes: the simulated engine's chip id is its node
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (map.topology.is_nic(v) && map.chip_id[v] < f.topology().num_nodes() &&
        f.topology().is_nic(map.chip_id[v]))
      nics.push_back(map.chip_id[v]);
  uint64_t sent = 0, delivered = 0;
  if (nics.size() < 2) return {0, 0};
  f.set_mpq_listener([&](uint32_t node, uint8_t vp) {
    if (vp != 1) return;
    auto e = f.nic(node).poll_mpq(vp);
    if (e) ++delivered;
  });
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, nics.size() - 1);
  const uint8_t data[8] = {'g', 'a', 'l', 'a', 'x', 'y', 0, 1};
  for (uint32_t i = 0; i < count; ++i) {
    size_t a = pick(rng), b = pick(rng);
    if (a == b) b = (b + 1) % nics.size();
    if (f.post_mp(nics[a], 0, static_cast<wire::ChipId>(nics[b]), 1, data).ok()) ++sent;
  }
  f.sim().run();
  f.set_mpq_listener(nullptr);
  return {sent, delivered};
}

void run_bringup(RouteOptions& o) {
  auto t0 = Clock::now();
  auto s = open_session(o.session);
  if (!s.ok()) return report_error(s.error(), o.session.json);
  double setup_ms = ms_since(t0);
  nlohmann::json j;
  if (!route_phases(o, *s, j)) return;
  auto tm = Clock::now();
  auto [sent, delivered] = send_mps(*s, o.mps, o.session.seed);
  double mp_wall = ms_since(tm);
  bool ok = j["routes_verified"].get<bool>() && j["deadlock_free"].get<bool>() &&
            j["load_failed"].get<uint64_t>() == 0 && delivered == sent;
  nlohmann::json b{{"fabric", o.session.fabric},
                   {"engine", j["engine"]},
                   {"nrc", j["nrc"]},
                   {"nic", j["nic"]},
                   {"setup_ms", setup_ms},
                   {"discovery",
                    {{"sim_time_us", j["discovery_sim_time_us"]},
                     {"wall_ms", j["discovery_wall_ms"]},
                     {"requests", j["discovery_requests"]},
                     {"failed_requests", j["discovery_failed_requests"]},
                     {"problems", j["discovery_problems"]}}},
                   {"routing",
                    {{"compute_ms", j["compute_ms"]},
                     {"verify_ms", j["verify_ms"]},
                     {"range_writes", j["range_writes"]},
                     {"reachable_pairs", j["reachable_pairs"]},
                     {"nic_pairs", j["nic_pairs"]},
                     {"loops", j["loops"]},
                     {"deadlock_free", j["deadlock_free"]},
                     {"max_path_nrcs", j["max_path_nrcs"]},
                     {"verified", j["routes_verified"]}}},
                   {"load",
                    {{"packets", j["load_packets"]},
                     {"failed", j["load_failed"]},
                     {"sim_time_us", j["load_sim_time_us"]},
                     {"wall_ms", j["load_wall_ms"]}}},
                   {"mp_sent", sent},
                   {"mp_delivered", delivered},
                   {"mp_wall_ms", mp_wall},
                   {"sim_time_us",
                    j["discovery_sim_time_us"].get<double>() + j["load_sim_time_us"].get<double>()},
                   {"verified", ok},
                   {"wall_ms", ms_since(t0)},
                   {"peak_rss_mb", peak_rss_mb()}};
  if (!ok) set_exit_code(1);
  if (o.session.json) {
    std::printf("%s\n", json_text(b, 2).c_str());
  } else {
    print_text(j);
    std::printf(
        "end to end: %llu of %llu MPs delivered; bring-up %.0f ms wall, peak RSS %.0f MiB: %s\n",
        static_cast<unsigned long long>(delivered), static_cast<unsigned long long>(sent),
        b["wall_ms"].get<double>(), b["peak_rss_mb"].get<double>(), ok ? "verified" : "FAILED");
  }
}

void add_route_command(CLI::App& app) {
  auto o = std::make_shared<RouteOptions>();
  auto* c =
      app.add_subcommand("route", "Compute, verify and load route tables (docs/system.md 2.5.1)");
  add_session_options(c, o->session);
  c->add_option("--engine", o->engine, "routing engine spec, e.g. fattree, updown:root=12 (--list)")
      ->capture_default_str();
  c->add_flag("--list", o->list, "list the routing engines and their parameters");
  c->add_flag("--eeprom", o->eeprom, "also write the tables into every NRC's EEPROM (slow)");
  c->add_option("--readback", o->verify_per_nrc, "read back this many range writes per NRC")
      ->capture_default_str()
      ->check(integer_in(0, 65536));
  c->callback([o]() { run_route(*o); });
}

void add_bringup_command(CLI::App& app) {
  auto o = std::make_shared<RouteOptions>();
  auto* c = app.add_subcommand(
      "bringup", "Whole bring-up: discovery, fat-tree routing, loading, end-to-end MPs");
  add_session_options(c, o->session);
  c->add_option("--engine", o->engine, "routing engine spec")->capture_default_str();
  c->add_option("--mps", o->mps, "table-routed MPs sent between random NIC pairs at the end")
      ->capture_default_str()
      ->check(integer_in(0, 10000000));
  c->callback([o]() { run_bringup(*o); });
}

const CommandRegistrar kRouteRegistrar("route", add_route_command, true);
const CommandRegistrar kBringupRegistrar("bringup", add_bringup_command);

}  // namespace
}  // namespace galaxy::cli
