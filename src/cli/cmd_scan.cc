// galaxy scan — status scan of the fabric (docs/system.md 2.5.2) in the three client modes: single,
// loop (repeat at an interval) and compare (differences between consecutive scans). Discovery
// (pipelined) comes first and is not part of the scan's simulated time; the scan itself is
// serial with --serial (the paper's mode, compared with its model in docs/system.md 2.8) or
// pipelined. On an InfiniBand subnet (--fabric ib:) the scan reads every port's PortCounters
// from its performance management agent (nm/ib_scan.h), as perfquery does one port at a time.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/json_text.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/run_control.h"
#include "cli/session.h"
#include "ib/umad_port.h"
#include "nm/ib_discovery.h"
#include "nm/ib_scan.h"
#include "nm/scan.h"
#include "nmd/ib_json.h"
#include "nmd/scan_json.h"

namespace galaxy::cli {

namespace {

constexpr double kPaperScanUs = 9.38e6;  // docs/system.md 2.8
constexpr const char* kShareDefinition =
    "management bits (requests + responses, 4 flits x 198 bits each) / scan time, as a share of "
    "one link's 224 Gbit/s bidirectional bandwidth (the server NIC's link carries all of it)";

struct ScanCmdOptions {
  SessionOptions session;
  std::string mode = "single";
  std::string chips = "nrc";
  double interval_ms = 1000;
  unsigned count = 3;
  unsigned noisy_links = 0;
  double error_rate = 1e-3;
  unsigned top = 20;
};

using Clock = std::chrono::steady_clock;
// A simulation aid for compare mode: flits on the uplinks of the K NRCs nearest the server are
// corrupted at `rate`, so RETRANSMISSIONS / CRC_ERRORS move with the scans' own traffic. These
// links carry the most management packets.
void make_links_noisy(Session& s, unsigned k, double rate) {
  const nm::FabricMap& m = s.discovery.map;
  std::vector<uint32_t> nrcs;
  for (uint32_t v = 0; v < m.num_nodes(); ++v)
    if (!m.topology.is_nic(v) && m.target[v].backward.hop_num > 0) nrcs.push_back(v);
  std::stable_sort(nrcs.begin(), nrcs.end(),
                   [&](uint32_t a, uint32_t b) { return m.hops[a] < m.hops[b]; });
  const auto& plan = s.plan();
  for (uint32_t i = 0; i < k && i < nrcs.size(); ++i) {
    // Chip id = node id of the built fabric; the backward route starts with the port upwards.
    fabric::PortRef up{m.chip_id[nrcs[i]], m.target[nrcs[i]].backward.hops[0]};
    s.fabric->set_flit_error_rate(up, rate);
    if (auto peer = plan.peer(up)) s.fabric->set_flit_error_rate(*peer, rate);
  }
}

void print_summary(const nlohmann::json& j) {
  std::printf(
      "scanned %u NRCs and %u NICs with %llu requests in %.1f us simulated (paper model %.1f "
      "us); %zu not responding; management traffic %.4f Gbit/s = %.4f%% of a link\n",
      j["nrc_scanned"].get<unsigned>(), j["nic_scanned"].get<unsigned>(),
      static_cast<unsigned long long>(j["requests"].get<uint64_t>()),
      j["sim_time_us"].get<double>(), j["paper_model_us"].get<double>(),
      j["non_responding"].get<size_t>(), j["management_gbps"].get<double>(),
      j["link_share_percent"].get<double>());
  const auto& dead = j["non_responding_chips"];
  if (dead.empty()) return;
  std::string names;
  for (const auto& d : dead)
    names += fmt::format("{}{}{}", names.empty() ? "" : ", ", d["name"].get<std::string>(),
                         d["reached_by_discovery"].get<bool>() ? "" : " (not reached)");
  if (dead.size() < j["non_responding"].get<size_t>()) names += ", ...";
  std::printf("  not responding: %s\n", names.c_str());
}

// Against daemons: each scans its fabric now (POST /api/scans), one summary per daemon.
void run_scan_remote(const ScanCmdOptions& o) {
  if (o.mode != "single" || o.chips != "nrc" || o.noisy_links)
    return report_error(make_error(Code::kUnsupported, 9155,
                                   "against a daemon a scan is --mode single of the NRCs; the "
                                   "daemon's schedule is its loop (PUT /api/config "
                                   "scan_interval_s), GET /api/chips/{chip}/status compares"),
                        o.session.json);
  print_all(call_all("POST", "/api/scans", nullptr), o.session.json,
            [](const std::string& server, const nlohmann::json& j) {
              if (j.value("fabric", "") == "ib") {
                std::printf(
                    "%s: %llu ports read, %llu not, %llu with errors; %llu requests in "
                    "%.3f s\n",
                    server.c_str(),
                    static_cast<unsigned long long>(j["ports_read"].get<uint64_t>()),
                    static_cast<unsigned long long>(j["ports_failed"].get<uint64_t>()),
                    static_cast<unsigned long long>(j["ports_with_errors"].get<uint64_t>()),
                    static_cast<unsigned long long>(j["requests"].get<uint64_t>()),
                    j["wall_s"].get<double>());
                return;
              }
              std::printf(
                  "%s: %llu chips scanned, %llu requests in %.3f s wall (%.1f us "
                  "simulated); %llu not responding; %.4f%% of a link\n",
                  server.c_str(), static_cast<unsigned long long>(j["chips"].get<uint64_t>()),
                  static_cast<unsigned long long>(j["requests"].get<uint64_t>()),
                  j["wall_s"].get<double>(), j["sim_time_us"].get<double>(),
                  static_cast<unsigned long long>(j["non_responding"].get<uint64_t>()),
                  j["link_share_percent"].get<double>());
            });
}

// The InfiniBand scan: the subnet discovered through the umad port, then every port's counters.
void run_scan_ib(const ScanCmdOptions& o) {
  const bool json = o.session.json;
  if (is_remote() || o.mode != "single")
    return report_error(make_error(Code::kUnsupported, 7153,
                                   "--fabric ib: scans once, here (no --server, --mode single)"),
                        json);
  ib::UmadOptions uo;
  if (Status s = ib::parse_ib_fabric(o.session.fabric, uo); !s)
    return report_error(s.error(), json);
  auto port = ib::open_umad_port(uo);
  if (!port) return report_error(port.error(), json);
  nm::IbRequester rq(**port, {});
  const auto t0 = std::chrono::steady_clock::now();
  auto net = nm::discover_ib(rq);
  if (!net) return report_error(net.error(), json);
  const auto t1 = std::chrono::steady_clock::now();
  auto scan = nm::scan_ib(rq, *net);
  if (!scan) return report_error(scan.error(), json);
  const double scan_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const double discover_s = std::chrono::duration<double>(t1 - t0).count();
  auto name = [&](const nm::IbPortScan& p) {
    return fmt::format("{} port {}", net->name(p.port.node), p.port.port);
  };
  uint64_t with_errors = 0;
  for (const auto& p : scan->ports) with_errors += p.read && p.errors() > 0;
  if (json) {
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& p : scan->ports) {
      nlohmann::json j = nmd::ib_port_scan_json(*net, p);
      ports.push_back(std::move(j));
    }
    std::printf("%s\n", json_text({{"fabric", "ib"},
                                   {"ports_read", scan->read},
                                   {"ports_failed", scan->failed},
                                   {"ports_with_errors", with_errors},
                                   {"requests", scan->requests},
                                   {"discover_s", discover_s},
                                   {"scan_s", scan_s},
                                   {"ports", ports}},
                                  2)
                            .c_str());
  } else {
    std::printf(
        "scanned %llu ports (%llu not read) in %.3f s, %llu PortCounters requests; "
        "discovery %.3f s\n",
        static_cast<unsigned long long>(scan->read), static_cast<unsigned long long>(scan->failed),
        scan_s, static_cast<unsigned long long>(scan->requests), discover_s);
    size_t shown = 0;
    for (const auto& p : scan->ports) {
      if (shown >= o.top) break;
      if (!p.read) {
        std::printf("  %s: not read: %s\n", name(p).c_str(), p.error.c_str());
        ++shown;
      } else if (p.errors() > 0) {
        const auto& c = p.counters;
        std::printf(
            "  %s: %llu errors (symbol %u, recoveries %u, downed %u, rcv %u, discards %u)\n",
            name(p).c_str(), static_cast<unsigned long long>(p.errors()), c.symbol_errors,
            c.link_error_recoveries, c.link_downed, c.rcv_errors, c.xmit_discards);
        ++shown;
      }
    }
    std::printf("%llu ports with error counts\n", static_cast<unsigned long long>(with_errors));
  }
  if (scan->failed > 0) set_exit_code(1);
}

void run_scan(ScanCmdOptions& o) {
  const bool json = o.session.json;
  if (ib::is_ib_fabric(o.session.fabric)) return run_scan_ib(o);
  if (is_remote()) return run_scan_remote(o);
  if (o.mode != "single" && o.mode != "loop" && o.mode != "compare")
    return report_error(
        make_error(Code::kInvalidArgument, 9150,
                   fmt::format("--mode = '{}' is not single, loop or compare", o.mode)),
        json);
  if (o.chips != "nrc" && o.chips != "all")
    return report_error(make_error(Code::kInvalidArgument, 9151,
                                   fmt::format("--chips = '{}' is not nrc or all", o.chips)),
                        json);
  if (o.mode == "compare" && o.count < 2)
    return report_error(
        make_error(Code::kInvalidArgument, 9152,
                   fmt::format("--count = {}: compare needs at least 2 scans", o.count)),
        json);
  if (o.mode == "loop" && o.count < 1)
    return report_error(
        make_error(Code::kInvalidArgument, 9153, "--count = 0: loop needs at least 1 scan"), json);

  auto s = open_discovered_session(o.session);
  if (!s.ok()) return report_error(s.error(), json);
  uint64_t fault_reports = 0;
  s->requester->set_fault_handler([&](const wire::MgmtPacket&) { ++fault_reports; });
  if (o.noisy_links > 0) {
    if (Status sim_only = require_simulated(*s, "--noisy-links"); !sim_only.ok())
      return report_error(sim_only.error(), o.session.json);
    make_links_noisy(*s, o.noisy_links, o.error_rate);
  }

  nm::ScanOptions so;
  so.include_nics = o.chips == "all";
  so.plan = &s->plan();  // chips discovery did not reach are not responding either
  nm::Scanner scanner(*s->requester, s->discovery.map);
  nlohmann::json j{{"fabric", o.session.fabric},
                   {"mode", o.mode},
                   {"requester", o.session.serial ? "serial" : "pipelined"},
                   {"chips", o.chips},
                   {"load", o.session.load},
                   {"discovery_sim_time_us", static_cast<double>(s->discovery.elapsed) / nm::kUs},
                   {"paper_sim_time_us", kPaperScanUs},
                   {"link_share_definition", kShareDefinition}};
  if (o.noisy_links > 0)
    j["noisy_links"] = {{"links", o.noisy_links},
                        {"flit_error_rate", o.error_rate},
                        {"note", "simulation aid: uplinks of the NRCs nearest the server"}};

  auto t0 = Clock::now();
  if (o.mode == "single") {
    auto r = scanner.scan_once(so);
    if (!r.ok()) return report_error(r.error(), json);
    j.update(nmd::scan_summary_json(*s, *r, o.top));
    j["wall_ms"] = ms_since(t0);
  } else {
    nlohmann::json scans = nlohmann::json::array(), intervals = nlohmann::json::array();
    const bool changes = o.mode == "compare";
    Status st = scanner.scan_loop(
        so, static_cast<nm::Picoseconds>(o.interval_ms * nm::kMs), o.count,
        [&](const nm::ScanResult* prev, const nm::ScanResult& cur) -> Status {
          nlohmann::json sj = nmd::scan_summary_json(*s, cur, o.top);
          sj["wall_ms"] = ms_since(t0);
          if (!json) print_summary(sj);
          scans.push_back(sj);
          if (prev) {
            nlohmann::json dj = nmd::scan_diff_json(*s, nm::diff(*prev, cur), o.top, changes);
            if (!json) {
              std::printf("  over %.3f s: %zu registers changed;", dj["interval_s"].get<double>(),
                          dj["changed_registers"].get<size_t>());
              for (const auto& [name, v] : dj["counter_deltas"].items())
                if (v.get<uint64_t>() != 0)
                  std::printf(" %s +%llu", name.c_str(),
                              static_cast<unsigned long long>(v.get<uint64_t>()));
              std::printf("\n");
              if (changes)
                for (const auto& c : dj["changes"])
                  std::printf("    %s port %u %s: %llu -> %llu\n",
                              c["name"].get<std::string>().c_str(), c["port"].get<unsigned>(),
                              c["register"].get<std::string>().c_str(),
                              static_cast<unsigned long long>(c["old"].get<uint64_t>()),
                              static_cast<unsigned long long>(c["new"].get<uint64_t>()));
            }
            intervals.push_back(dj);
          }
          return {};
        });
    if (!st.ok()) return report_error(st.error(), json);
    j["interval_ms"] = o.interval_ms;
    j["count"] = o.count;
    j["scans"] = scans;
    j["intervals"] = intervals;
    j["wall_ms"] = ms_since(t0);
  }
  j["fault_reports"] = fault_reports;
  if (json) {
    std::printf("%s\n", json_text(j, 2).c_str());
  } else if (o.mode == "single") {
    print_summary(j);
    std::printf("wall %.0f ms (paper, serial: %.0f us)\n", j["wall_ms"].get<double>(),
                kPaperScanUs);
  }
  bool any_dead = o.mode == "single" ? j["non_responding"].get<size_t>() > 0 : false;
  if (o.mode != "single")
    for (const auto& sj : j["scans"]) any_dead = any_dead || sj["non_responding"].get<size_t>() > 0;
  if (any_dead) set_exit_code(1);
}

void add_scan_command(CLI::App& app) {
  auto o = std::make_shared<ScanCmdOptions>();
  auto* c = app.add_subcommand(
      "scan",
      "Status scan of every chip: single, loop or compare (--fabric ib:[<adapter>[:<port>]]: "
      "every port's PortCounters on an InfiniBand subnet)");
  add_session_options(c, o->session);
  c->add_option("--mode", o->mode, "single, loop or compare")->capture_default_str();
  c->add_option("--chips", o->chips, "nrc (the paper's scan) or all (NICs too)")
      ->capture_default_str();
  c->add_option("--interval-ms", o->interval_ms, "loop/compare: simulated time between scans")
      ->capture_default_str()
      ->check(real_in(0, 3.6e6));
  c->add_option("--count", o->count, "loop/compare: number of scans")
      ->capture_default_str()
      ->check(integer_in(1, 100000));
  c->add_option("--noisy-links", o->noisy_links,
                "simulation aid: corrupt flits on the uplinks of the K NRCs nearest the server")
      ->capture_default_str()
      ->check(integer_in(0, 65534));
  c->add_option("--error-rate", o->error_rate, "flit error probability of --noisy-links")
      ->capture_default_str()
      ->check(real_in(0, 1, Bounds::kBelowHigh));
  c->add_option("--top", o->top, "changed registers and non-responding chips listed at most")
      ->capture_default_str()
      ->check(integer_in(0, 1000000));
  c->callback([o]() { run_scan(*o); });
}

const CommandRegistrar kScanRegistrar("scan", add_scan_command, true);

}  // namespace
}  // namespace galaxy::cli
