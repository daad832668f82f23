// galaxy discover — topology discovery from the server's NIC (docs/system.md 2.5.5), serial as the
// paper measured it or pipelined; the result is checked against the fabric that was built.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/json_text.h"
#include "base/sysinfo.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"
#include "nm/map_io.h"

namespace galaxy::cli {

namespace {

struct DiscoverOptions {
  SessionOptions session;
  std::string mode = "pipelined";
  bool show_issues = false;
  std::string save_map;
};

// Against daemons: what each one's discovery found (GET /api/status).
void run_discover_remote(const DiscoverOptions& o) {
  print_all(call_all("GET", "/api/status"), o.session.json,
            [](const std::string& server, const nlohmann::json& j) {
              std::printf(
                  "%s: %s: %llu chips (%llu NICs, %llu NRCs) of which %llu discovered, "
                  "%llu links (%llu down), %llu not responding\n",
                  server.c_str(), j["fabric"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(j["chips"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["nics"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["nrcs"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["discovered"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["links"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["links_down"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["not_responding"].get<uint64_t>()));
            });
}

void run_discover(DiscoverOptions& o) {
  if (is_remote()) return run_discover_remote(o);
  if (o.mode != "serial" && o.mode != "pipelined")
    return report_error(make_error(Code::kInvalidArgument, 9020,
                                   fmt::format("--mode = '{}' is not serial or pipelined", o.mode)),
                        o.session.json);
  o.session.serial = o.session.serial || o.mode == "serial";
  auto t0 = std::chrono::steady_clock::now();
  auto s = open_session(o.session);
  if (!s.ok()) return report_error(s.error(), o.session.json);
  auto t1 = std::chrono::steady_clock::now();
  Status d = discover(*s, o.session);
  if (!d.ok()) return report_error(d.error(), o.session.json);
  auto t2 = std::chrono::steady_clock::now();
  const nm::DiscoveryResult& r = s->discovery;
  auto issues = nm::check_cabling(r.map, s->plan());
  bool verified = issues.empty() && r.map.num_nodes() == s->plan().num_nodes();
  const auto& t = r.map.topology;
  double wall_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  nlohmann::json j{{"fabric", o.session.fabric},
                   {"mode", o.session.serial ? "serial" : "pipelined"},
                   {"load", o.session.load},
                   {"verified", verified},
                   {"nrc", t.num_nrcs()},
                   {"nic", t.num_nics()},
                   {"links", t.num_links()},
                   {"requests", r.requests},
                   {"failed_requests", r.failed_requests},
                   {"sim_time_us", static_cast<double>(r.elapsed) / nm::kUs},
                   {"paper_sim_time_us", 472822},
                   {"wall_ms", wall_ms},
                   {"setup_ms", std::chrono::duration<double, std::milli>(t1 - t0).count()},
                   {"cabling_issues", issues.size()},
                   {"problems", r.problems.size()},
                   {"problem_details", r.problems},
                   {"peak_rss_mb", peak_rss_mb()}};
  if (o.show_issues) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& i : issues)
      list.push_back({{"kind", i.kind == nm::CablingIssue::Kind::kMissing ? "missing"
                               : i.kind == nm::CablingIssue::Kind::kExtra ? "extra"
                                                                          : "miswired"},
                      {"a", i.a},
                      {"b", i.b},
                      {"detail", i.detail}});
    j["cabling"] = list;
  }
  if (!o.save_map.empty()) {
    std::ofstream out(o.save_map, std::ios::binary | std::ios::trunc);
    out << nm::write_map(r.map);
    out.close();
    if (!out)
      return report_error(make_error(Code::kIoError, 9021,
                                     fmt::format("--save-map '{}': cannot write: {}", o.save_map,
                                                 std::strerror(errno))),
                          o.session.json);
    j["map_file"] = o.save_map;
  }
  if (o.session.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
  } else {
    std::printf("discovered %u NRCs, %u NICs, %u links with %llu requests (%s)\n", t.num_nrcs(),
                t.num_nics(), t.num_links(), static_cast<unsigned long long>(r.requests),
                o.session.serial ? "serial" : "pipelined");
    std::printf("simulated time %.1f us (paper, serial: 472,822 us); wall %.0f ms; %s\n",
                static_cast<double>(r.elapsed) / nm::kUs, wall_ms,
                verified ? "matches the built fabric" : "DIFFERS from the built fabric");
    if (!o.save_map.empty())
      std::printf("map saved to %s (give it to other commands with --map)\n", o.save_map.c_str());
    for (const auto& p : r.problems) std::printf("  %s\n", p.c_str());
    for (const auto& i : issues)
      std::printf("  %s <-> %s: %s\n", i.a.c_str(), i.b.c_str(), i.detail.c_str());
  }
  if (!verified) set_exit_code(1);
}

void add_discover_command(CLI::App& app) {
  auto o = std::make_shared<DiscoverOptions>();
  auto* c = app.add_subcommand("discover", "Topology discovery by BFS from the server NIC");
  add_session_options(c, o->session);
  c->add_option("--mode", o->mode, "serial (the paper's) or pipelined")->capture_default_str();
  c->add_flag("--issues", o->show_issues, "list every cabling difference in the JSON");
  c->add_option("--save-map", o->save_map,
                "save the map found, for other commands' --map (they skip discovery)");
  c->callback([o]() { run_discover(*o); });
}

const CommandRegistrar kDiscoverRegistrar("discover", add_discover_command, true);

}  // namespace
}  // namespace galaxy::cli
