// galaxy bench mgmt — every row of docs/system.md 2.8 reproduced on the simulated TH-2 fabric: the
// paper's value, ours, their ratio; plus what we add (pipelined discovery).
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "base/json_text.h"
#include "base/sysinfo.h"
#include "chip/monitor_board.h"
#include "chip/nrc.h"
#include "chip/registers.h"
#include "cli/bench_comm.h"
#include "cli/bench_sim.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/session.h"
#include "engine/live/board_server.h"
#include "engine/sim/fabric_spec.h"
#include "engine/sim/mgmt_probe.h"
#include "nm/scan.h"
#include "nmd/oob.h"

namespace galaxy::cli {

namespace {

struct BenchOptions {
  std::string fabric = "sim:th2";
  unsigned count = 1000;
  bool json = false;
  bool skip_busy = false;
  unsigned oob_count = 200;
  std::string plot;
};

// A live monitor board (engine/live/board_server.h) for one chip, served on a loopback port by
// a thread that polls it as a fabric daemon does while busy; requests from this thread as
// `galaxy oob` sends them (a connection each). Medians of `count` requests.
struct LiveBoardFigures {
  double status_us = 0;
  double read_us = 0;
};

Result<LiveBoardFigures> measure_live_board(unsigned count) {
  chip::Nrc chip(24);
  chip::MonitorBoard board;
  GALAXY_TRY(board.add_chip(0, &chip));
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0)
    return make_error(Code::kIoError, 9034, fmt::format("epoll: {}", std::strerror(errno)));
  auto server = live::BoardServer::open("127.0.0.1", 0, epfd);
  if (!server.ok()) {
    close(epfd);
    return server.error();
  }
  std::atomic<bool> stop{false};
  std::thread serve([&] {
    auto now_ns = [] {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count());
    };
    while (!stop.load(std::memory_order_relaxed))
      (*server)->poll(now_ns(), [&](const wire::OobRequest& r) {
        return board.execute(r, now_ns() * 1000, [](uint32_t) {}).response;
      });
  });
  const live::LiveHost host{"bench", "127.0.0.1", (*server)->port()};
  auto median_us = [&](wire::OobOp op) -> Result<double> {
    std::vector<double> us;
    for (unsigned i = 0; i < count; ++i) {
      wire::OobRequest r{op, 0, i + 1, chip::reg::kScratch, 0};
      const auto t0 = std::chrono::steady_clock::now();
      auto resp = nmd::oob_tcp_call(host, r);
      if (!resp.ok()) return resp.error();
      if (resp->error_id != 0)
        return make_error(
            Code::kIoError, 9035,
            fmt::format("the live board refused {}: E{}", wire::oob_op_name(op), resp->error_id));
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  auto status = median_us(wire::OobOp::kStatus);
  auto read = status.ok() ? median_us(wire::OobOp::kReadRegister) : status;
  stop = true;
  serve.join();
  server->reset();
  close(epfd);
  if (!status.ok()) return status.error();
  if (!read.ok()) return read.error();
  return LiveBoardFigures{*status, *read};
}

struct PaperRow {
  std::string what;
  double paper = 0;  // 0: the paper gives no number
  double ours = 0;
  std::string unit;
  std::string note;
};

Result<double> probe(sim::SimFabric& f, uint32_t server, uint32_t target, wire::NmpType type,
                     std::vector<uint16_t> addrs, unsigned count) {
  sim::ProbeSpec ps;
  ps.server_nic = server;
  ps.target = target;
  ps.type = type;
  ps.addresses = std::move(addrs);
  ps.values.assign(ps.addresses.size(), 0x5A);
  ps.count = count;
  auto r = sim::run_probe(f, ps);
  if (!r.ok()) return r.error();
  return r->mean_us;
}

void write_plot(const std::string& path, const std::vector<std::pair<double, double>>& ours,
                double dp, double dt) {
  // A small SVG: register read latency against hops, ours (points) beside the paper's line.
  const double W = 640, H = 400, L = 60, B = 50, T = 30, R = 20;
  double ymax = dp + 10 * dt;
  auto x = [&](double h) { return L + h / 8.0 * (W - L - R); };
  auto y = [&](double us) { return H - B - (us - 5.0) / (ymax - 5.0) * (H - B - T); };
  std::ofstream o(path);
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  o << "<text x='" << W / 2
    << "' y='18' text-anchor='middle'>In-band register read latency vs hops (TH-2 model)</text>\n";
  o << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B
    << "' stroke='black'/>\n";
  o << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B
    << "' stroke='black'/>\n";
  for (int h = 0; h <= 8; ++h)
    o << "<text x='" << x(h) << "' y='" << H - B + 16 << "' text-anchor='middle'>" << h
      << "</text>\n";
  for (int us = 6; us <= static_cast<int>(ymax); us += 2)
    o << "<text x='" << L - 8 << "' y='" << y(us) + 4 << "' text-anchor='end'>" << us
      << "</text>\n";
  o << "<text x='" << W / 2 << "' y='" << H - 12 << "' text-anchor='middle'>hops h</text>\n";
  o << "<text x='16' y='" << H / 2 << "' transform='rotate(-90 16 " << H / 2
    << ")' text-anchor='middle'>latency (us)</text>\n";
  o << "<line x1='" << x(0) << "' y1='" << y(dp + dt) << "' x2='" << x(8) << "' y2='"
    << y(dp + 9 * dt) << "' stroke='#d33' stroke-width='2'/>\n";
  for (auto [h, us] : ours)
    o << "<circle cx='" << x(h) << "' cy='" << y(us)
      << "' r='5' fill='none' stroke='#236' stroke-width='2'/>\n";
  o << "<circle cx='" << x(0) << "' cy='" << y(6.73) << "' r='4' fill='#d33'/>\n";
  o << "<text x='" << L + 12 << "' y='" << T + 20
    << "' fill='#d33'>paper: 5.9597 + (h+1) x 0.8762 us</text>\n";
  o << "<text x='" << L + 12 << "' y='" << T + 36
    << "' fill='#d33'>paper measured at h=0: 6.73 us</text>\n";
  o << "<text x='" << L + 12 << "' y='" << T + 52
    << "' fill='#236'>o Galaxy, simulated chips</text>\n";
  o << "</svg>\n";
}

void run_bench(const BenchOptions& o) {
  auto topo = sim::resolve_topology(o.fabric);
  if (!topo.ok()) return report_error(topo.error(), o.json);
  auto timing = sim::default_timing();
  if (!timing.ok()) return report_error(timing.error(), o.json);
  auto f = sim::SimFabric::create(*topo, *timing);
  if (!f.ok()) return report_error(f.error(), o.json);
  sim::SimFabric& fab = **f;
  uint32_t server = topo->nic_node(0);
  auto dist = topo->bfs_distances(server);
  std::map<uint32_t, uint32_t> at;  // h -> an NRC at h
  for (uint32_t v = 0; v < topo->num_nodes(); ++v)
    if (!topo->is_nic(v) && dist[v] != UINT32_MAX && dist[v] >= 1 && dist[v] <= 9)
      at.emplace(dist[v] - 1, v);
  const double proc = 5.9597, dt = 0.8762, eproc = 157.8260;
  std::vector<PaperRow> rows;
  std::vector<std::pair<double, double>> points;
  using wire::NmpType;
  for (auto [h, node] : at) {
    auto r = probe(fab, server, node, NmpType::kRegReadRequest, {chip::reg::kScratch}, o.count);
    if (!r.ok()) return report_error(r.error(), o.json);
    rows.push_back({fmt::format("register read, h={}", h), proc + (h + 1) * dt, *r, "us",
                    "paper model: processing + (h+1) x per-hop"});
    points.push_back({h, *r});
  }
  uint32_t adj = at[0];
  double read1 = rows.front().ours;
  rows.insert(rows.begin(), {"register read, adjacent NRC, N=1000 (measured)", 6.73, read1, "us",
                             "paper measured; its model gives 6.8359"});
  auto w = probe(fab, server, adj, NmpType::kRegWriteRequest, {chip::reg::kScratch}, o.count);
  auto r2 = probe(fab, server, adj, NmpType::kRegReadRequest,
                  {chip::reg::kScratch, chip::reg::kTemperature}, o.count);
  if (!w.ok() || !r2.ok()) return report_error(w.ok() ? r2.error() : w.error(), o.json);
  rows.push_back(
      {"register write, adjacent NRC", 0, *w, "us",
       fmt::format("paper: slightly faster than read; ours {:.3f}x of read", *w / read1)});
  rows.push_back({"2 registers in one packet / 1 register", 0, *r2 / read1, "x",
                  "paper: more than 1, less than 2"});
  for (unsigned n : {1u, 2u, 6u}) {
    std::vector<uint16_t> addrs;
    for (unsigned i = 0; i < n; ++i) addrs.push_back(static_cast<uint16_t>(0x400 + i));
    auto er = probe(fab, server, adj, NmpType::kEepromReadRequest, addrs, 20);
    auto ew = probe(fab, server, adj, NmpType::kEepromWriteRequest, addrs, 5);
    if (!er.ok() || !ew.ok()) return report_error(er.ok() ? ew.error() : er.error(), o.json);
    rows.push_back({fmt::format("EEPROM read, {} byte(s), adjacent NRC", n),
                    eproc + dt + 150.0 * (n - 1), *er, "us",
                    "paper: 157.8260 + (h+1) x 0.8762, about +150 us per extra byte"});
    rows.push_back({fmt::format("EEPROM write, {} byte(s), adjacent NRC", n), 0, *ew, "us",
                    "paper: about +3,000 us per extra byte written"});
  }
  // Out of band: the simulated board (its overhead the timing file's stated figure, its bus the
  // I2C model) and a live board on loopback, measured.
  wire::OobRequest oob_read{wire::OobOp::kReadRegister, adj, 1, chip::reg::kScratch, 0};
  const sim::Time oob_t0 = fab.sim().now();
  auto frame = fab.oob(wire::encode_oob_request(oob_read));
  if (!frame.ok()) return report_error(frame.error(), o.json);
  auto oob = wire::decode_oob_response(*frame);
  if (!oob.ok()) return report_error(oob.error(), o.json);
  const double oob_us = sim::to_us(fab.sim().now() - oob_t0);
  const double overhead_us = sim::to_us(timing->oob_board_overhead);
  rows.push_back({"out-of-band (I2C) register read, simulated board", 4816.66, oob_us, "us",
                  fmt::format("model: board {:.1f} us (timing file, stated) + I2C bus {:.1f} us "
                              "(mux select, 16-bit address, 8 bytes, at 100 kbit/s, with clock "
                              "stretching)",
                              overhead_us, static_cast<double>(oob->bus_ns) / 1000.0)});
  rows.push_back({"out-of-band / in-band register read, simulated", 716, oob_us / read1, "x",
                  "paper: about 716x; a result of the model, not an input"});
  auto live_oob = measure_live_board(o.oob_count);
  if (!live_oob.ok()) return report_error(live_oob.error(), o.json);
  rows.push_back(
      {"monitor board round trip without bus, live board on loopback", 0, live_oob->status_us, "us",
       fmt::format("measured: median of {} TCP status requests, this run", o.oob_count)});
  rows.push_back({"out-of-band (I2C) register read, live board on loopback", 4816.66,
                  live_oob->read_us, "us",
                  fmt::format("measured: median of {} requests; the board answers when its bus "
                              "time has passed",
                              o.oob_count)});

  // Discovery: the paper's serial BFS, idle and busy, and our pipelined one.
  auto discover_with = [&](const std::string& load, bool serial) -> Result<double> {
    SessionOptions so;
    so.fabric = o.fabric;
    so.load = load;
    so.serial = serial;
    auto s = open_session(so);
    if (!s.ok()) return s.error();
    Status d = discover(*s, so);
    if (!d.ok()) return d.error();
    if (!nm::same_fabric(s->discovery.map, s->fabric->topology()))
      return make_error(Code::kInvalidArgument, 9030, "discovery did not find the built fabric");
    return static_cast<double>(s->discovery.elapsed) / nm::kUs;
  };
  auto idle = discover_with("none", true);
  if (!idle.ok()) return report_error(idle.error(), o.json);
  rows.push_back({"topology discovery, idle, serial", 472822, *idle, "us",
                  "mechanism: 6 requests per NRC x BFS"});
  if (!o.skip_busy) {
    auto busy = discover_with("alltoall:groups=8", true);
    if (!busy.ok()) return report_error(busy.error(), o.json);
    rows.push_back(
        {"topology discovery, AlltoAll in 8 groups, serial", 490885, *busy, "us",
         fmt::format("busy/idle: paper +3.8%, ours {:+.1f}%", (*busy / *idle - 1) * 100)});
  }
  auto pipe = discover_with("none", false);
  if (!pipe.ok()) return report_error(pipe.error(), o.json);
  rows.push_back({"topology discovery, idle, pipelined (ours)", 47282.2, *pipe, "us",
                  "target: at most 10x faster than the paper"});

  // Status scan: the paper's model (9.38 s serial), ours serial and pipelined, and the
  // management share of link bandwidth.
  for (bool serial : {true, false}) {
    SessionOptions so;
    so.fabric = o.fabric;
    so.serial = false;  // discovery pipelined; only the scan's own time is measured
    auto s = open_session(so);
    if (!s.ok()) return report_error(s.error(), o.json);
    Status d = discover(*s, so);
    if (!d.ok()) return report_error(d.error(), o.json);
    s->requester->set_options(requester_options(serial));
    nm::Scanner scanner(*s->requester, s->discovery.map);
    nm::ScanOptions paper_scan;
    paper_scan.environment = false;  // the paper's scan reads port registers only
    auto scan = scanner.scan_once(paper_scan);
    if (!scan.ok()) return report_error(scan.error(), o.json);
    double us = static_cast<double>(scan->elapsed) / nm::kUs;
    if (serial) {
      rows.push_back(
          {"status scan, all NRCs, serial", 9.38e6, us, "us",
           fmt::format("paper's model on our hop histogram: {:.0f} us", scan->paper_model_us)});
      rows.push_back({"status scan management share of link bandwidth", 0.0493,
                      scan->link_share_percent(), "%", "paper: 0.0493% of 224 Gbit/s"});
    } else {
      rows.push_back({"status scan, all NRCs, pipelined (ours)", 0.938e6, us, "us",
                      "target: at most 10x faster than the paper"});
    }
  }

  if (!o.plot.empty()) write_plot(o.plot, points, proc, dt);
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& r : rows)
    jr.push_back({{"what", r.what},
                  {"paper", r.paper == 0 ? nlohmann::json() : nlohmann::json(r.paper)},
                  {"ours", r.ours},
                  {"ratio", r.paper == 0 ? nlohmann::json() : nlohmann::json(r.ours / r.paper)},
                  {"unit", r.unit},
                  {"note", r.note}});
  if (o.json) {
    std::printf(
        "%s\n",
        json_text(
            nlohmann::json{{"fabric", o.fabric}, {"rows", jr}, {"peak_rss_mb", peak_rss_mb()}}, 2)
            .c_str());
    return;
  }
  std::printf("%-52s %12s %12s %8s  %s\n", "what", "paper", "ours", "ratio", "note");
  for (const auto& r : rows) {
    std::string paper = r.paper == 0 ? "-" : fmt::format("{:.4g}", r.paper);
    std::string ratio = r.paper == 0 ? "-" : fmt::format("{:.3f}", r.ours / r.paper);
    std::printf("%-52s %12s %12.4g %8s  %s (%s)\n", r.what.c_str(), paper.c_str(), r.ours,
                ratio.c_str(), r.note.c_str(), r.unit.c_str());
  }
}

void add_bench_command(CLI::App& app) {
  auto* b =
      app.add_subcommand("bench", "Benchmarks: ours beside the paper's figures or the peers'");
  b->require_subcommand(1);
  auto o = std::make_shared<BenchOptions>();
  auto* m = b->add_subcommand("mgmt", "docs/system.md 2.8 rows on the simulated fabric");
  m->add_option("--fabric", o->fabric, "sim:<topology>")->capture_default_str();
  m->add_option("--count", o->count, "requests per register row (paper: N = 1000)")
      ->capture_default_str()
      ->check(integer_in(1, 1000000));
  m->add_option("--oob-count", o->oob_count,
                "requests to the live monitor board on loopback, per row (medians)")
      ->capture_default_str()
      ->check(integer_in(1, 100000));
  m->add_flag("--json", o->json, "machine-readable output");
  m->add_flag("--skip-busy", o->skip_busy, "skip the discovery under AlltoAll load (slowest row)");
  m->add_option("--plot", o->plot, "write an SVG of latency vs hops beside the paper's line");
  m->callback([o]() { run_bench(*o); });
  add_bench_comm_subcommands(b);
  add_bench_sim_subcommand(b);
  add_bench_nic_subcommand(b);
  add_bench_coll_subcommand(b);
  add_bench_coll_live_subcommand(b);
  add_bench_ibsm_subcommand(b);
  add_bench_scale_subcommand(b);
  add_bench_daemon_subcommand(b);
  add_bench_sm_campaign_subcommand(b);
  add_bench_via_subcommand(b);
  add_bench_mpi_subcommand(b);
}

const CommandRegistrar kBenchRegistrar("bench", add_bench_command);

}  // namespace
}  // namespace galaxy::cli
