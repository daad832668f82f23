// galaxy bench sm-campaign — several management servers on one simulated fabric (TH-2 by
// default) through a fault campaign (nmd/sm_campaign.h): the master killed in the middle of a
// sweep, links flapped and chips killed one after another. Printed: time to a new master, time
// to re-route after each kind of change, and the checks (one master at a time, every change
// re-routed around, every change in the fault history, the held tables, sampled paths).
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/json_text.h"
#include "cli/bench_sim.h"
#include "cli/json_out.h"
#include "cli/log_options.h"
#include "cli/option_checks.h"
#include "nmd/sm_campaign.h"

namespace galaxy::cli {

namespace {

struct SmCampaignCliOptions {
  nmd::SmCampaignOptions campaign;
  std::string db;  // "": a temporary file, removed afterwards
  bool json = false;
  LogCliOptions log{.file = "", .level = "error"};  // the servers' logs: errors only by default
};

std::string ms_text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return "-";
  return fmt::format("{:.1f}", it->get<double>());
}

void print_report(const nlohmann::json& r) {
  std::printf(
      "SM fault campaign on %s: %u NICs, %u NRCs, %u links; %u servers, polls every %g s, "
      "%u misses\n",
      r["fabric"].get<std::string>().c_str(), r["nics"].get<unsigned>(), r["nrcs"].get<unsigned>(),
      r["links"].get<unsigned>(), r["servers"].get<unsigned>(), r["sm_poll_s"].get<double>(),
      r["sm_poll_retries"].get<unsigned>());
  for (const auto& b : r["bringup"])
    std::printf("  server %u at %-14s %-8s up in %8.1f ms simulated, %6.1f s wall\n",
                b["server"].get<unsigned>(), b["nic"].get<std::string>().c_str(),
                b["role"].get<std::string>().c_str(), b["sim_ms"].get<double>(),
                b["wall_s"].get<double>());
  const nlohmann::json& f = r["failover"];
  std::printf(
      "failover: master killed %s ms into a %s ms sweep; server %s master %s ms later; "
      "routes loaded %s ms after the kill (simulated; the new master's route "
      "computation: %s ms)\n",
      ms_text(f, "killed_into_sweep_ms").c_str(), ms_text(f, "sweep_sim_ms").c_str(),
      f.contains("new_master") ? std::to_string(f["new_master"].get<int>()).c_str() : "-",
      ms_text(f, "time_to_new_master_ms").c_str(), ms_text(f, "time_to_reroute_ms").c_str(),
      ms_text(f, "takeover_compute_ms").c_str());
  std::printf(
      "time to re-route, ms      n  simulated median/p95/max   compute median/p95/max"
      "     total median/p95/max\n");
  for (const auto& [kind, t] : r["time_to_reroute_ms"].items()) {
    auto three = [&](const char* part) {
      const nlohmann::json& s = t[part];
      return fmt::format("{:>8} {:>8} {:>8}", ms_text(s, "median"), ms_text(s, "p95"),
                         ms_text(s, "max"));
    };
    std::printf("  %-18s %5u %s %s %s\n", kind.c_str(), t["simulated"]["n"].get<unsigned>(),
                three("simulated").c_str(), three("compute").c_str(), three("total").c_str());
  }
  const nlohmann::json& m = r["masters"];
  std::printf("masters: at most %u at once over %llu observations\n",
              m["max_at_once"].get<unsigned>(),
              static_cast<unsigned long long>(m["observations"].get<uint64_t>()));
  std::printf("changes: %u, not re-routed %u\n", r["changes"]["count"].get<unsigned>(),
              r["changes"]["not_rerouted"].get<unsigned>());
  const nlohmann::json& h = r["history"];
  std::printf("fault history: %u changes expected, %u lost (%u fault events)\n",
              h["changes_expected"].get<unsigned>(), h["lost"].get<unsigned>(),
              h["fault_events"].get<unsigned>());
  for (const auto& p : r["paths"])
    std::printf(
        "held tables after %-10s packets of every NIC to %u destinations followed, %u "
        "failed\n",
        p["phase"].get<std::string>().c_str(), p["destinations"].get<unsigned>(),
        p["failed"].get<unsigned>());
  for (const auto& p : r["problems"]) std::printf("  problem: %s\n", p.get<std::string>().c_str());
  std::printf("%s in %.1f s wall, %.1f s simulated\n",
              r["passed"].get<bool>() ? "PASSED" : "FAILED", r["wall_s"].get<double>(),
              r["sim_s"].get<double>());
}

void run_bench_sm_campaign(SmCampaignCliOptions& o) {
  if (Status st = apply_log_options(o.log, "galaxy-bench"); !st.ok())
    return report_error(st.error(), o.json);
  std::string dir;
  if (o.db.empty()) {
    dir = (std::filesystem::temp_directory_path() / fmt::format("galaxy-smc-{}", ::getpid()))
              .string();
    std::filesystem::create_directories(dir);
    o.campaign.db_path = dir + "/events.db";
  } else {
    o.campaign.db_path = o.db;
  }
  if (!o.json)
    o.campaign.progress = [](const std::string& line) {
      std::fprintf(stderr, "%s\n", line.c_str());
    };
  auto r = nmd::run_sm_campaign(o.campaign);
  if (!dir.empty()) std::filesystem::remove_all(dir);
  if (!r.ok()) return report_error(r.error(), o.json);
  if (o.json)
    std::printf("%s\n", json_text(*r, 2).c_str());
  else
    print_report(*r);
  if (!(*r)["passed"].get<bool>()) set_exit_code(1);
}

}  // namespace

void add_bench_sm_campaign_subcommand(CLI::App* bench) {
  auto o = std::make_shared<SmCampaignCliOptions>();
  auto* c = bench->add_subcommand(
      "sm-campaign",
      "Several management servers on one simulated fabric through a fault campaign: the master "
      "killed mid-sweep, links flapped, chips killed; time to a new master and to re-route");
  nmd::SmCampaignOptions& k = o->campaign;
  c->add_option("--fabric", k.fabric, "sim:<topology>")->capture_default_str();
  c->add_option("--servers", k.servers, "management servers (the first starts as master)")
      ->capture_default_str()
      ->check(integer_in(2, 8));
  c->add_option("--flaps", k.flaps, "links taken down and brought back, one after another")
      ->capture_default_str()
      ->check(integer_in(0, 100000));
  c->add_option("--chip-kills", k.chip_kills, "NRCs killed (every link dark), one after another")
      ->capture_default_str()
      ->check(integer_in(0, 10000));
  c->add_option("--leaderless-downs", k.leaderless_downs,
                "of the flaps: links taken down while no server is master")
      ->capture_default_str()
      ->check(integer_in(0, 100000));
  c->add_option("--sm-poll-s", k.sm_poll_s, "seconds between a standby's polls (simulated)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  c->add_option("--sm-poll-retries", k.sm_poll_retries, "polls the master may miss")
      ->capture_default_str()
      ->check(integer_in(1, 100));
  c->add_option("--engine", k.routing_engine, "routing engine")->capture_default_str();
  c->add_option("--seed", k.seed, "random seed (links, chips, the moment of the kill)")
      ->capture_default_str()
      ->check(any_uint64());
  c->add_option("--change-limit-s", k.change_limit_s,
                "simulated seconds a change may take to be re-routed")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 86400.0));
  c->add_option("--path-samples", k.path_samples,
                "destinations whose packets from every NIC are followed through the held tables "
                "after each phase")
      ->capture_default_str()
      ->check(integer_in(0, 10000000));
  c->add_option("--db", o->db, "the shared event store (default: a temporary file)");
  c->add_flag("--json", o->json, "machine-readable output");
  add_log_options(c, o->log);
  c->callback([o]() { run_bench_sm_campaign(*o); });
}

}  // namespace galaxy::cli
