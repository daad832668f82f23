// galaxy bench via — MyVIA's programs (examples/via_pingpong.c, examples/via_bw.c, over
// libvipl.so) on a private live fabric, two NICs of one host and NICs of two hosts, beside
// libfabric's and UCX's test programs in the same run, repetitions interleaved (docs/via.md).
// On one host the peers use their shared-memory transports; between two hosts, TCP on loopback,
// the path they would take between the two daemons' hosts.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <thread>

#include "base/json_text.h"
#include "cli/bench_sim.h"
#include "cli/commands.h"
#include "cli/fabric_live.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/peers.h"
#include "engine/live/live_spec.h"

namespace galaxy::cli {
namespace {

struct ViaOptions {
  std::vector<size_t> lat_sizes{8, 64, 512, 4096, 65536};
  std::vector<size_t> bw_sizes{4096, 65536, 1 << 20};
  int repetitions = 3;
  std::string peers = "ucx,libfabric";
  bool mix = true;  // MyVIA's message-size mix through via_bw
  bool quick = false;
  bool json = false;
};

struct ViaPlacement {
  std::string name;  // "one_host", "two_hosts"
  std::string server_host, client_host;
  uint32_t server_nic = 0, client_nic = 0;
  bool tcp = false;  // the peers' path
};

// One run of a program pair: the client's figure (one-way us, or MB/s). `bytes` 0 with via_bw:
// MyVIA's message-size mix (via_bw -M).
Result<double> run_program(const std::string& prog, size_t bytes, const std::string& fabric,
                           const ViaPlacement& p, bool quick) {
  const std::string exe = (std::filesystem::path(self_executable()).parent_path() / prog).string();
  if (::access(exe.c_str(), X_OK) != 0)
    return make_error(Code::kNotFound, 9627,
                      fmt::format("{} not found next to galaxy (built with the examples)", exe));
  const bool lat = prog == "via_pingpong";
  const double b = static_cast<double>(bytes);
  // About a second per run: between hosts a message costs about 50 times what it does on one.
  const double slower = p.tcp ? 50 : 1;
  const long n =
      lat ? (quick ? 500 : std::clamp(static_cast<long>(4e9 / (b + 2000) / slower), 200L, 100000L))
          : (quick ? 100 : (p.tcp && bytes >= 65536 ? 400 : 2000));
  std::vector<std::string> args = {"-n", std::to_string(n)};
  if (bytes)
    args.insert(args.end(), {"-s", std::to_string(bytes)});
  else
    args.insert(args.end(), {"-M", "1"});
  if (!lat) args.insert(args.end(), {"-w", "200", "-W", "50"});
  auto env = [&](const std::string& host, uint32_t nic) {
    return std::vector<std::string>{"GLEX_FABRIC=" + fabric, "GLEX_HOST=" + host,
                                    "GLEX_NIC=" + std::to_string(nic)};
  };
  std::vector<std::string> sargv{exe}, cargv{exe};
  sargv.insert(sargv.end(), args.begin(), args.end());
  cargv.insert(cargv.end(), args.begin(), args.end());
  sargv.push_back("server");
  cargv.insert(cargv.end(), {"client", std::to_string(p.server_nic)});
  auto server = BackgroundCommand::start(sargv, env(p.server_host, p.server_nic));
  if (!server.ok()) return server.error();
  auto client = run_command(cargv, env(p.client_host, p.client_nic), 120);
  for (int i = 0; i < 1000 && (*server)->running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string sout = (*server)->stop();
  if (!client.ok()) return client.error();
  std::smatch m;
  const std::regex figure(lat ? "one_way_us=([0-9.]+)" : "MBps=([0-9.]+)");
  if (client->status != 0 || !std::regex_search(client->output, m, figure))
    return make_error(Code::kIoError, 9628,
                      fmt::format("{} client exited {}: {} (server: {})", prog, client->status,
                                  client->output, sout));
  return std::stod(m[1].str());
}

void run_via(const ViaOptions& o) {
  auto choice = parse_peer_list(o.peers);
  if (!choice.ok()) return report_error(choice.error(), o.json);
  auto started = private_loopback_fabric("benchvia", 2, o.json);
  if (!started.ok()) return report_error(started.error(), o.json);
  const std::string spec = *started;
  auto f = live::parse_live_fabric(spec);
  if (!f.ok()) return report_error(f.error(), o.json);
  // The first NIC of h1 serves; the client is h1's second NIC (the same NRC: a path that stays
  // on the host), or h2's first.
  std::vector<uint32_t> on[2];
  for (uint32_t i = 0; i < f->topology.num_nics(); ++i) {
    const uint32_t n = f->topology.nic_node(i);
    on[f->host_of[n] == f->host_of[f->topology.nic_node(0)] ? 0 : 1].push_back(n);
  }
  const std::string h1 = f->hosts[0].name, h2 = f->hosts.size() > 1 ? f->hosts[1].name : h1;
  std::vector<ViaPlacement> places = {{"one_host", h1, h1, on[0].front(), on[0].at(1), false}};
  if (!on[1].empty()) places.push_back({"two_hosts", h1, h2, on[0].front(), on[1].front(), true});

  PeerOptions po;
  po.repetitions = 1;
  po.quick = o.quick;
  const int reps = o.quick ? 1 : o.repetitions;
  nlohmann::json rows = nlohmann::json::array();
  bool failed = false;
  for (const ViaPlacement& p : places) {
    po.tcp = p.tcp;
    std::vector<std::pair<std::string, size_t>> tests;
    for (size_t s : o.lat_sizes) tests.emplace_back("mp_lat", s);
    for (size_t s : o.bw_sizes) tests.emplace_back("msg_bw", s);
    if (o.mix) tests.emplace_back("msg_bw", 0);  // no peer program sends a mix
    for (const auto& [kind, bytes] : tests) {
      const bool lat = kind == "mp_lat";
      const std::string test =
          bytes ? fmt::format("{}_{}", lat ? "lat" : "bw", bytes) : std::string("bw_mix");
      if (!o.json)
        std::fprintf(stderr, "galaxy bench via: %s %s ...\n", p.name.c_str(), test.c_str());
      std::vector<double> mine;
      std::vector<PeerSample> peers;
      std::string error;
      for (int rep = 0; rep < reps && error.empty(); ++rep) {
        auto m = run_program(lat ? "via_pingpong" : "via_bw", bytes, f->name, p, o.quick);
        if (!m.ok()) {
          error = m.error().to_string();
          break;
        }
        mine.push_back(*m);
        std::vector<PeerSample> now;
        const std::string ptest = fmt::format("{}_{}", kind, bytes);
        if (choice->ucx && bytes) now.push_back(run_ucx(ptest, 0, po));
        if (choice->libfabric && bytes) now.push_back(run_libfabric(ptest, 0, po));
        add_repetition(peers, now);
      }
      nlohmann::json row{{"placement", p.name},
                         {"test", test},
                         {"unit", lat ? "us" : "MB/s"},
                         {"better", lat ? "lower" : "higher"}};
      if (!error.empty()) {
        row["error"] = error;
        failed = true;
        rows.push_back(row);
        continue;
      }
      row["ours"] = median_of(mine);
      row["ours_runs"] = mine;
      nlohmann::json pj = nlohmann::json::array();
      double best = 0;
      std::string best_name;
      for (PeerSample& s : peers) {
        if (s.available) {
          s.median = median_of(s.runs);
          if (s.median > 0 && (best == 0 || (lat ? s.median < best : s.median > best))) {
            best = s.median;
            best_name = s.peer;
          }
        }
        pj.push_back(peer_json(s));
      }
      row["peers"] = pj;
      row["best_peer"] = best_name.empty() ? nlohmann::json() : nlohmann::json(best_name);
      row["best_peer_median"] = best > 0 ? nlohmann::json(best) : nlohmann::json();
      row["ratio"] = best > 0 ? nlohmann::json(row["ours"].get<double>() / best) : nlohmann::json();
      rows.push_back(row);
    }
  }
  (void)live_fabric_down(spec);
  if (failed) set_exit_code(1);
  const nlohmann::json history{
      {"source", "MyVIA on Myrinet (docs/system.md 4): history, not a target"},
      {"one_way_us", 8.46},
      {"bw_4KiB_MBps", 250}};
  nlohmann::json j{{"benchmark", "via"},
                   {"fabric", spec},
                   {"repetitions", reps},
                   {"rows", rows},
                   {"history", history}};
  if (o.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  std::printf("%-10s %-10s %-5s %12s %12s %-14s %7s\n", "placement", "test", "unit", "galaxy",
              "best peer", "", "ratio");
  for (const auto& r : rows) {
    if (r.contains("error")) {
      std::printf("%-10s %-10s ERROR %s\n", r["placement"].get<std::string>().c_str(),
                  r["test"].get<std::string>().c_str(), r["error"].get<std::string>().c_str());
      continue;
    }
    std::printf(
        "%-10s %-10s %-5s %12.4g %12s %-14s %7s\n", r["placement"].get<std::string>().c_str(),
        r["test"].get<std::string>().c_str(), r["unit"].get<std::string>().c_str(),
        r["ours"].get<double>(),
        r["best_peer_median"].is_null()
            ? "n/a"
            : fmt::format("{:.4g}", r["best_peer_median"].get<double>()).c_str(),
        r["best_peer"].is_null() ? "" : r["best_peer"].get<std::string>().c_str(),
        r["ratio"].is_null() ? "-" : fmt::format("{:.3f}", r["ratio"].get<double>()).c_str());
  }
  std::printf("history: MyVIA on Myrinet, 8.46 us one-way, 250 MB/s at 4 KiB (not a target)\n");
}

}  // namespace

void add_bench_via_subcommand(CLI::App* bench) {
  auto o = std::make_shared<ViaOptions>();
  auto* c = bench->add_subcommand(
      "via",
      "VIA: via_pingpong latency and via_bw window bandwidth, one host and two, beside "
      "libfabric and UCX");
  c->add_option("--lat-sizes", o->lat_sizes, "via_pingpong message sizes")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 24));
  c->add_option("--bw-sizes", o->bw_sizes, "via_bw message sizes")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 24));
  c->add_option("--peers", o->peers, "peers to run beside ours: ucx,libfabric or none")
      ->capture_default_str()
      ->check(peer_list());
  c->add_option("--reps", o->repetitions, "repetitions, interleaved with the peers' (medians)")
      ->capture_default_str()
      ->check(integer_in(1, 1000));
  c->add_flag("!--no-mix", o->mix,
              "leave out the row of MyVIA's message-size mix (via_bw -M: per 50 messages, 41 of "
              "128 B - 4 KiB, 4 over 8 KiB, 3 under 128 B, 2 of 4 - 8 KiB)");
  c->add_flag("--quick", o->quick, "one short repetition (a smoke test, not a measurement)");
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_via(*o); });
}

}  // namespace galaxy::cli
