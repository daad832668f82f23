// galaxy bench pingpong | bw | rdma — communication benchmarks (issue: live fabric and
// libglex). Ours: two processes, each with its own NIC of a live fabric, through libglex only.
// Theirs: the peers of cli/peers.h on the same machine, in the same run. Every row has ours, the
// peer's (UCX, shared memory), their ratio ours/peer and the medians of all peers. With
// --cross-host the two NICs are on two hosts of the fabric and the peers run over TCP on
// loopback (UCX_TLS=tcp, libfabric's tcp provider), the path they would take between hosts.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/json_text.h"
#include "base/spec.h"
#include "cli/bench_comm.h"
#include "cli/comm_bench.h"
#include "cli/fabric_live.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/peers.h"
#include "engine/live/live_spec.h"

namespace galaxy::cli {

namespace {

struct CommOptions {
  std::string fabric;  // empty: a private one-host live fabric for the run
  std::string peers = "ucx,libfabric,openmpi";
  int repetitions = 5;
  int iterations = 0;
  bool cross_host = false;
  bool quick = false;
  bool json = false;
};

struct CommRow {
  std::string kind;
  size_t bytes;
};

const char* unit_of(const std::string& kind) {
  if (kind.find("lat") != std::string::npos) return "us";
  if (kind == "msg_rate") return "Mmsg/s";
  return "MB/s";
}

void run_comm(const std::string& what, const std::vector<CommRow>& rows, const CommOptions& o) {
  auto peers = parse_peer_list(o.peers);
  if (!peers.ok()) return report_error(peers.error(), o.json);
  // A private fabric unless one was named: one host, two NICs on one NRC; with --cross-host two
  // hosts on loopback.
  std::string spec = o.fabric;
  const bool private_fabric = spec.empty();
  nlohmann::json up;
  if (private_fabric && o.cross_host) {
    auto s = private_loopback_fabric("bench", 2, o.json);
    if (!s.ok()) return report_error(s.error(), o.json);
    spec = *s;
  } else if (private_fabric) {
    spec = fmt::format("live:fattree:k=4,levels=2,name=bench{},hosts=local:127.0.0.1:{}", getpid(),
                       20000 + getpid() % 20000);
    LiveUpRequest rq;
    rq.spec = spec;
    rq.json = o.json;
    auto r = live_fabric_up(rq);
    if (!r.ok()) return report_error(r.error(), o.json);
    up = *r;
  }
  auto f = live::parse_live_fabric(spec);
  if (!f.ok()) {
    if (private_fabric) (void)live_fabric_down(spec);
    return report_error(f.error(), o.json);
  }
  OursOptions ours;
  ours.fabric = f->name;
  ours.host = f->hosts.front().name;
  ours.nic_a = f->topology.nic_node(0);
  ours.nic_b = f->topology.nic_node(1);
  // The second NIC: on the same host, or with --cross-host on another.
  bool found = false;
  for (uint32_t i = 1; i < f->topology.num_nics() && !found; ++i) {
    const uint32_t n = f->topology.nic_node(i);
    if ((f->host_of[n] == f->host_of[ours.nic_a]) != o.cross_host) {
      ours.nic_b = n;
      ours.host_b = f->hosts[f->host_of[n]].name;
      found = true;
    }
  }
  if (!found) {
    if (private_fabric) (void)live_fabric_down(spec);
    return report_error(
        make_error(Code::kInvalidArgument, 9440,
                   fmt::format("--fabric {}: no second NIC {} host {}'s first", spec,
                               o.cross_host ? "on another host than" : "on the same", ours.host)),
        o.json);
  }
  ours.repetitions = o.quick ? 1 : o.repetitions;
  ours.iterations = o.quick && o.iterations == 0 ? 2000 : o.iterations;
  PeerOptions po;
  po.repetitions = ours.repetitions;
  po.iterations = ours.iterations;
  po.quick = o.quick;
  po.tcp = o.cross_host;
  const bool want_ucx = peers->ucx;
  const bool want_fi = peers->libfabric;
  const bool want_mpi = peers->openmpi;

  nlohmann::json out = nlohmann::json::array();
  bool failed = false;
  for (const CommRow& r : rows) {
    const std::string test = fmt::format("{}_{}", r.kind, r.bytes);
    if (!o.json) std::fprintf(stderr, "galaxy bench %s: %s ...\n", what.c_str(), test.c_str());
    // Repetitions interleave ours and the peers', so that all sample the same moments of a
    // shared, noisy machine (its core-to-core latency moves by 3x over minutes).
    OursOptions one = ours;
    one.repetitions = 1;
    PeerOptions po1 = po;
    po1.repetitions = 1;
    std::vector<double> mine;
    std::vector<PeerSample> samples;
    std::string error;
    for (int rep = 0; rep < ours.repetitions && error.empty(); ++rep) {
      // Between hosts a message costs about 50 times what it does on one: a fiftieth of the
      // iterations keeps a repetition near a second.
      if (o.cross_host && one.iterations == 0)
        one.iterations = std::max(100, default_iterations(r.kind, r.bytes) / 50);
      auto m = run_ours(r.kind, r.bytes, one);
      if (!m.ok()) {
        error = m.error().to_string();
        break;
      }
      mine.push_back(m->front());
      std::vector<PeerSample> now;
      if (want_ucx) now.push_back(run_ucx(test, 0, po1));
      if (want_fi) now.push_back(run_libfabric(test, 0, po1));
      if (want_mpi) now.push_back(run_openmpi(test, 0, po1));
      add_repetition(samples, now);
    }
    for (PeerSample& p : samples)
      if (p.available) p.median = median_of(p.runs);
    nlohmann::json row{{"test", test}, {"unit", unit_of(r.kind)}};
    if (!error.empty()) {
      row["error"] = error;
      failed = true;
      out.push_back(row);
      continue;
    }
    row["ours"] = median_of(mine);
    row["ours_runs"] = mine;
    nlohmann::json peers = nlohmann::json::array();
    row["peer"] = nullptr;
    row["ratio"] = nullptr;
    for (const PeerSample& p : samples) {
      if (p.available && p.peer.rfind("ucx", 0) == 0 && p.median > 0) {  // ucx, ucx-tcp
        row["peer"] = p.median;
        row["peer_name"] = p.peer;
        row["ratio"] = row["ours"].get<double>() / p.median;
      }
      peers.push_back(peer_json(p));
    }
    row["peers"] = peers;
    // Lower is better for latency, higher for bandwidth and rate.
    row["better"] = std::string(unit_of(r.kind)) == "us" ? "lower" : "higher";
    out.push_back(row);
  }
  nlohmann::json limits;
  if (what == "bw") {
    limits["memcpy_1MiB_MBps"] = memcpy_mbps(1 << 20);
    limits["memcpy_64MiB_MBps"] = memcpy_mbps(64 << 20);
  } else {
    limits["cacheline_pingpong_ns"] = cacheline_pingpong_ns(200000);
  }
  if (private_fabric) (void)live_fabric_down(spec);
  if (failed) set_exit_code(1);
  nlohmann::json j{{"benchmark", what},
                   {"fabric", spec},
                   {"cross_host", o.cross_host},
                   {"hosts", {ours.host, ours.host_b.empty() ? ours.host : ours.host_b}},
                   {"nics", {ours.nic_a, ours.nic_b}},
                   {"repetitions", ours.repetitions},
                   {"rows", out},
                   {"physical_limits", limits}};
  if (!up.is_null()) j["fabric_up_ms"] = up["wall_ms"];
  if (o.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  std::printf("%-18s %-7s %12s %12s %8s   %s\n", "test", "unit", "galaxy",
              o.cross_host ? "ucx-tcp" : "ucx", "ratio", "others (median)");
  for (const auto& row : out) {
    if (row.contains("error")) {
      std::printf("%-18s ERROR %s\n", row["test"].get<std::string>().c_str(),
                  row["error"].get<std::string>().c_str());
      continue;
    }
    std::string others;
    for (const auto& p : row["peers"])
      if (p["peer"] != row.value("peer_name", std::string("ucx")))
        others += p["available"].get<bool>()
                      ? fmt::format("{} {:.4g}  ", p["peer"].get<std::string>(),
                                    p["median"].get<double>())
                      : fmt::format("{} n/a  ", p["peer"].get<std::string>());
    std::printf(
        "%-18s %-7s %12.4g %12s %8s   %s\n", row["test"].get<std::string>().c_str(),
        row["unit"].get<std::string>().c_str(), row["ours"].get<double>(),
        row["peer"].is_null() ? "n/a" : fmt::format("{:.4g}", row["peer"].get<double>()).c_str(),
        row["ratio"].is_null() ? "-" : fmt::format("{:.3f}", row["ratio"].get<double>()).c_str(),
        others.c_str());
  }
}

void add_one(CLI::App* bench, const char* name, const char* help, std::vector<CommRow> rows) {
  auto o = std::make_shared<CommOptions>();
  auto* c = bench->add_subcommand(name, help);
  c->add_option("--fabric", o->fabric,
                "a running live fabric (default: a private one-host fabric for the run)");
  c->add_option("--peers", o->peers, "peers to run beside ours: ucx,libfabric,openmpi or none")
      ->capture_default_str()
      ->check(peer_list());
  c->add_option("--reps", o->repetitions, "repetitions (medians are reported)")
      ->capture_default_str()
      ->check(integer_in(1, 1000));
  c->add_option("--iters", o->iterations, "iterations per repetition (0: about a second each)")
      ->capture_default_str()
      ->check(integer_in(0, 100000000));
  c->add_flag("--cross-host", o->cross_host,
              "the two NICs on two hosts of the fabric (default: a private two-host fabric on "
              "loopback), the peers over TCP on loopback");
  c->add_flag("--quick", o->quick, "one short repetition (a smoke test, not a measurement)");
  c->add_flag("--json", o->json, "machine-readable output");
  std::string what = name;
  c->callback([o, what, rows]() { run_comm(what, rows, *o); });
}

}  // namespace

void add_bench_comm_subcommands(CLI::App* bench) {
  add_one(bench, "pingpong", "MP one-way latency (8, 120 B) and small-MP message rate",
          {{"mp_lat", 8}, {"mp_lat", 120}, {"msg_rate", 8}});
  add_one(bench, "bw", "RDMA put and get bandwidth (4 KiB, 64 KiB, 1 MiB, 16 MiB)",
          {{"put_bw", 4096},
           {"put_bw", 65536},
           {"put_bw", 1 << 20},
           {"put_bw", 16 << 20},
           {"get_bw", 4096},
           {"get_bw", 65536},
           {"get_bw", 1 << 20},
           {"get_bw", 16 << 20}});
  add_one(bench, "rdma", "RDMA put and get latency (8 B)", {{"put_lat", 8}, {"get_lat", 8}});
}

}  // namespace galaxy::cli
