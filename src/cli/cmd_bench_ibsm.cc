// galaxy bench ibsm — Galaxy's subnet manager beside OpenSM on the same ibsim fabrics, in the same
// run (spec/ANCHORS.md "InfiniBand"): for each fabric and each repetition, a fresh ibsim, one SM
// from a blank subnet to SUBNET UP (`opensm --once` / `galaxy sm --once`), the order alternating
// between repetitions. Measured the same way for both: wall time to exit, the SM process's peak
// resident memory, the SMPs its port sent (PortXmitPkts of the SM's port, read from ibsim with
// perfquery), and the tables it left, checked by `galaxy sm --audit` from another node (routes
// that do not arrive, the busiest link between switches in CA-to-CA routes and in CA LIDs).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "base/json_text.h"
#include "cli/bench_sim.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/peers.h"
#include "fabric/builders.h"
#include "fabric/io_ibsim.h"
#include "nm/routing.h"

namespace galaxy::cli {
namespace {

constexpr const char* kUmad2Sim = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

struct IbsmBenchOptions {
  std::vector<std::string> fabrics{"fattree:k=48,levels=2", "fattree:k=32,levels=3"};
  std::string galaxy_routing = nm::kDefaultRoutingEngine;
  std::string opensm_routing = "ftree";
  int repetitions = 1;
  int timeout_s = 600;
  bool json = false;
};

struct Tools {
  std::string self, ibsim, opensm, perfquery, ibstat;
};

struct Run {
  bool up = false;
  double seconds = 0;
  double rss_mib = 0;
  double smps = -1;  // -1: not read
  nlohmann::json audit;
  std::string problem;
};

std::vector<std::string> sim_env(const std::string& host) {
  return {fmt::format("LD_PRELOAD={}", kUmad2Sim), fmt::format("SIM_HOST={}", host)};
}

// "PortXmitPkts:.......123" from perfquery's text.
double xmit_pkts(const std::string& text) {
  std::smatch m;
  static const std::regex re("PortXmitPkts:\\.*([0-9]+)");
  return std::regex_search(text, m, re) ? std::stod(m[1]) : -1;
}

Run run_one(const Tools& t, const IbsmBenchOptions& o, bool galaxy, const std::string& net,
            const std::string& sizes_s, const std::string& sizes_n, const std::string& sizes_p,
            const std::string& sm_host, const std::string& other_host, const std::string& dir,
            int seq) {
  Run r;
  auto sim = BackgroundCommand::start(
      {t.ibsim, "-n", "-S", sizes_s, "-N", sizes_n, "-P", sizes_p, "-s", net}, {});
  if (!sim) {
    r.problem = sim.error().to_string();
    return r;
  }
  // ibsim reads the net file before it answers; large ones take seconds.
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {
    auto probe = run_command({t.ibstat}, sim_env(sm_host), 10);
    ready = probe && probe->status == 0;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!ready) {
    r.problem = "ibsim did not come up: " + (*sim)->stop().substr(0, 300);
    return r;
  }
  std::vector<std::string> argv, env = sim_env(sm_host);
  const std::string log = fmt::format("{}/opensm-{}.log", dir, seq);
  if (galaxy) {
    argv = {t.self, "sm", "--fabric", "ib:", "--once", "--json", "--routing", o.galaxy_routing};
  } else {
    const std::string cache = fmt::format("{}/opensm-cache-{}", dir, seq);
    std::filesystem::create_directories(cache);
    argv = {t.opensm, "--once", "-R", o.opensm_routing, "-f", log, "--dump_files_dir", cache};
    env.push_back("OSM_CACHE_DIR=" + cache);
    env.push_back("OSM_TMP_DIR=" + cache);
  }
  auto out = run_command(argv, env, o.timeout_s);
  if (!out) {
    r.problem = out.error().to_string();
    return r;
  }
  r.seconds = out->seconds;
  r.rss_mib = static_cast<double>(out->max_rss_kib) / 1024.0;
  if (galaxy) {
    r.up = out->status == 0;
  } else {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    r.up = out->status == 0 && text.find("SUBNET UP") != std::string::npos;
  }
  if (!r.up) r.problem = fmt::format("exit {}: {}", out->status, out->output.substr(0, 300));
  // The SM's own port, read locally (no link crossed, no count added).
  if (auto pq = run_command({t.perfquery}, sim_env(sm_host), 60); pq && pq->status == 0)
    r.smps = xmit_pkts(pq->output);
  if (auto a = run_command({t.self, "sm", "--fabric", "ib:", "--audit", "--once", "--json"},
                           sim_env(other_host), o.timeout_s);
      a) {
    r.audit = nlohmann::json::parse(a->output, nullptr, false);
  }
  (*sim)->stop();
  return r;
}

nlohmann::json run_json(const Run& r) {
  nlohmann::json j{{"subnet_up", r.up},
                   {"seconds", r.seconds},
                   {"peak_rss_mib", r.rss_mib},
                   {"smps_sent", r.smps}};
  if (r.audit.is_object()) {
    for (const char* k :
         {"unreachable_routes", "max_paths_per_port", "max_lids_per_port", "ports_not_active"})
      if (r.audit.contains(k)) j[k] = r.audit[k];
  }
  if (!r.problem.empty()) j["problem"] = r.problem;
  return j;
}

void run_bench_ibsm(const IbsmBenchOptions& o) {
  Tools t{self_executable(), find_in_path("ibsim"), find_in_path("opensm"),
          find_in_path("perfquery"), find_in_path("ibstat")};
  std::string missing;
  for (auto [name, path] : {std::pair{"ibsim", t.ibsim}, std::pair{"opensm", t.opensm},
                            std::pair{"perfquery", t.perfquery}, std::pair{"ibstat", t.ibstat}})
    if (path.empty()) missing += std::string(missing.empty() ? "" : ", ") + name;
  if (::access(kUmad2Sim, R_OK) != 0)
    missing += std::string(missing.empty() ? "" : ", ") + kUmad2Sim;
  if (!missing.empty()) {
    return report_error(make_error(Code::kNotFound, 7160,
                                   fmt::format("bench ibsm needs {} (Debian: ibsim-utils, opensm, "
                                               "infiniband-diags; scripts/setup installs them)",
                                               missing)),
                        o.json);
  }
  char tmpl[] = "/tmp/galaxy-ibsm-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    return report_error(
        make_error(Code::kIoError, 7161, "bench ibsm: cannot make a directory in /tmp"), o.json);
  }
  const std::string dir = tmpl;
  nlohmann::json rows = nlohmann::json::array();
  int seq = 0;
  for (const std::string& spec : o.fabrics) {
    auto topo = fabric::build_topology(spec);
    if (!topo) {
      std::filesystem::remove_all(dir);
      return report_error(topo.error(), o.json);
    }
    const std::string net = fmt::format("{}/fabric-{}.net", dir, rows.size());
    {
      std::ofstream f(net);
      f << fabric::write_ibsim_net(*topo);
    }
    uint32_t switches = topo->num_nrcs(), ports = 0;
    for (uint32_t n = 0; n < topo->num_nodes(); ++n) ports += topo->num_ports(n) + 1;
    if (topo->num_nics() < 2) {
      std::filesystem::remove_all(dir);
      return report_error(
          make_error(Code::kInvalidArgument, 7162,
                     fmt::format("bench ibsm: fabric {} has fewer than two hosts", spec)),
          o.json);
    }
    const std::string sm_host = topo->name(topo->nic_node(0));
    const std::string other = topo->name(topo->nic_node(topo->num_nics() - 1));
    if (!o.json)
      std::printf("%s: %u hosts, %u switches\n", spec.c_str(), topo->num_nics(), switches);
    std::vector<Run> ours, theirs;
    for (int rep = 0; rep < o.repetitions; ++rep) {
      for (int k = 0; k < 2; ++k) {
        const bool galaxy = (rep + k) % 2 == 0;  // alternate which goes first
        Run r = run_one(t, o, galaxy, net, std::to_string(switches + 16),
                        std::to_string(topo->num_nodes() + 16), std::to_string(ports + 64), sm_host,
                        other, dir, seq++);
        if (!o.json)
          std::printf("  %-7s rep %d: %s in %.2f s, %.0f MiB, %.0f SMPs%s%s\n",
                      galaxy ? "galaxy" : "opensm", rep + 1, r.up ? "SUBNET UP" : "NOT UP",
                      r.seconds, r.rss_mib, r.smps, r.problem.empty() ? "" : "  ",
                      r.problem.c_str());
        std::fflush(stdout);
        (galaxy ? ours : theirs).push_back(std::move(r));
      }
    }
    auto med = [](const std::vector<Run>& v, double Run::*f) {
      std::vector<double> x;
      for (const Run& r : v)
        if (r.up) x.push_back(r.*f);
      return median_of(x);
    };
    nlohmann::json row{{"fabric", spec},
                       {"hosts", topo->num_nics()},
                       {"switches", switches},
                       {"galaxy_routing", o.galaxy_routing},
                       {"opensm_routing", o.opensm_routing},
                       {"galaxy", nlohmann::json::array()},
                       {"opensm", nlohmann::json::array()}};
    for (const Run& r : ours) row["galaxy"].push_back(run_json(r));
    for (const Run& r : theirs) row["opensm"].push_back(run_json(r));
    const double g = med(ours, &Run::seconds), p = med(theirs, &Run::seconds);
    row["galaxy_seconds"] = g;
    row["opensm_seconds"] = p;
    row["speedup"] = g > 0 && p > 0 ? p / g : 0.0;
    row["galaxy_smps"] = med(ours, &Run::smps);
    row["opensm_smps"] = med(theirs, &Run::smps);
    row["galaxy_peak_rss_mib"] = med(ours, &Run::rss_mib);
    row["opensm_peak_rss_mib"] = med(theirs, &Run::rss_mib);
    if (!o.json) {
      std::printf("  time to SUBNET UP: galaxy %.2f s, opensm %.2f s: %.1fx%s\n", g, p,
                  row["speedup"].get<double>(),
                  row["speedup"].get<double>() >= 5 ? "" : " (goal 5x)");
      std::printf(
          "  SMPs: galaxy %.0f, opensm %.0f; peak memory: galaxy %.0f MiB, opensm %.0f MiB\n",
          row["galaxy_smps"].get<double>(), row["opensm_smps"].get<double>(),
          row["galaxy_peak_rss_mib"].get<double>(), row["opensm_peak_rss_mib"].get<double>());
      auto bal = [](const std::vector<Run>& v, const char* k) -> std::string {
        for (auto it = v.rbegin(); it != v.rend(); ++it)
          if (it->audit.is_object() && it->audit.contains(k)) return it->audit[k].dump();
        return "?";
      };
      std::printf(
          "  tables (audited): unreachable galaxy %s, opensm %s; busiest switch link: "
          "galaxy %s routes / %s LIDs, opensm %s routes / %s LIDs\n",
          bal(ours, "unreachable_routes").c_str(), bal(theirs, "unreachable_routes").c_str(),
          bal(ours, "max_paths_per_port").c_str(), bal(ours, "max_lids_per_port").c_str(),
          bal(theirs, "max_paths_per_port").c_str(), bal(theirs, "max_lids_per_port").c_str());
    }
    rows.push_back(std::move(row));
  }
  std::filesystem::remove_all(dir);
  if (o.json) std::printf("%s\n", json_text(nlohmann::json{{"rows", rows}}, 2).c_str());
}

void add_bench_ibsm(CLI::App& app) {
  auto o = std::make_shared<IbsmBenchOptions>();
  auto* c = app.add_subcommand(
      "ibsm",
      "Galaxy's InfiniBand SM beside OpenSM on the same ibsim fabrics: time to SUBNET "
      "UP, SMPs, peak memory, route balance");
  c->add_option("--fabric", o->fabrics,
                "topology spec (galaxy fabric --list), repeatable; default a 1,152-host 2-level "
                "and an 8,192-host 3-level fat tree")
      ->capture_default_str();
  c->add_option("--routing", o->galaxy_routing, "Galaxy's routing engine")->capture_default_str();
  c->add_option("--opensm-routing", o->opensm_routing, "OpenSM's routing engine (-R)")
      ->capture_default_str();
  c->add_option("--reps", o->repetitions, "repetitions, interleaved (medians are reported)")
      ->capture_default_str()
      ->check(integer_in(1, 20));
  c->add_option("--timeout", o->timeout_s, "seconds one SM may take")
      ->capture_default_str()
      ->check(integer_in(10, 7200));
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_bench_ibsm(*o); });
}

}  // namespace

void add_bench_ibsm_subcommand(CLI::App* bench) {
  add_bench_ibsm(*bench);
}

}  // namespace galaxy::cli
