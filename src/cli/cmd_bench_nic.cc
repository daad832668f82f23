// galaxy bench nic — the TH-1A NIC paper's figures (docs/system.md 1.1) beside ours, measured on
// the simulated fabric with the TH-1A timing file (config/th1a-timing.json) between the two nearest
// NICs: PIO- and DMA-submitted RDMA latency, immediate RDMA latency, peak bandwidth. The rows
// whose figure a parameter of the timing file was fitted to say so.
#include <cstdio>

#include "base/json_text.h"
#include "cli/bench_sim.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/route_phases.h"
#include "glex/nic_bench.h"

namespace galaxy::cli {

namespace {

struct NicBenchCliOptions {
  RouteOptions route;
  uint32_t iterations = 200;
  bool json = false;
};

struct NicRow {
  const char* figure;  // the key calibration_inputs use
  const char* what;
  double paper;  // 0: the paper gives none
  double ours;
  const char* unit;
};

void run_bench_nic(NicBenchCliOptions& o) {
  SessionOptions& so = o.route.session;
  if (so.timing.empty()) so.timing = std::string(GALAXY_SOURCE_DIR) + "/config/th1a-timing.json";
  so.json = o.json;
  nlohmann::json phases;
  auto fabric = routed_sim_fabric(o.route, phases);
  if (!fabric) return;
  sim::SimFabric& f = *fabric;
  auto pair = glex::nearest_nic_pair(f.topology());
  if (!pair.ok()) return report_error(pair.error(), o.json);
  glex::NicBenchOptions bo;
  bo.iterations = o.iterations;
  auto n = glex::measure_nic(f, pair->first, pair->second, bo);
  if (!n.ok()) return report_error(n.error(), o.json);
  const std::vector<NicRow> rows = {
      {"pio_latency", "PIO-submitted RDMA, minimum latency (8-byte immediate)", 1.57,
       n->pio_immediate_us, "us"},
      {"imm_latency", "immediate RDMA latency (8 bytes, DMA-submitted)", 1.95, n->dma_immediate_us,
       "us"},
      {"dma_latency", "DMA-submitted RDMA latency (8-byte put)", 2.5, n->dma_put_us, "us"},
      {"peak_bandwidth", "peak unidirectional bandwidth (pipelined puts)", 6.34,
       n->peak_gbytes_per_s, "GB/s"},
      {"pio_put_latency", "PIO-submitted put latency (8 bytes)", 0, n->pio_put_us, "us"},
  };
  auto how = [&](const NicRow& r) -> std::string {
    for (const auto& [param, figure] : f.timing().calibration_inputs)
      if (figure == r.figure) return "calibration input (" + param + ")";
    return r.paper == 0 ? "model (no paper figure)" : "model";
  };
  nlohmann::json out{{"fabric", so.fabric},
                     {"timing", so.timing},
                     {"nics", {pair->first, pair->second}},
                     {"iterations", o.iterations},
                     {"rows", nlohmann::json::array()},
                     {"bandwidth", nlohmann::json::array()}};
  for (const NicRow& r : rows)
    out["rows"].push_back(
        {{"figure", r.figure},
         {"what", r.what},
         {"paper", r.paper == 0 ? nlohmann::json() : nlohmann::json(r.paper)},
         {"ours", r.ours},
         {"ratio", r.paper == 0 ? nlohmann::json() : nlohmann::json(r.ours / r.paper)},
         {"unit", r.unit},
         {"how", how(r)}});
  for (const auto& [size, gbps] : n->bandwidth)
    out["bandwidth"].push_back({{"bytes", size}, {"gbytes_per_s", gbps}});
  if (o.json) {
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  std::printf("TH-1A NIC (docs/system.md 1.1) on %s, NICs %u and %u (one NRC between), timing %s\n",
              so.fabric.c_str(), pair->first, pair->second, so.timing.c_str());
  std::printf("%-56s %8s %8s %7s  %s\n", "figure", "paper", "ours", "ratio", "how");
  for (const NicRow& r : rows) {
    const std::string paper = r.paper == 0 ? "-" : fmt::format("{:.3g}", r.paper);
    const std::string ratio = r.paper == 0 ? "-" : fmt::format("{:.3f}", r.ours / r.paper);
    std::printf("%-56s %8s %8.3f %7s  %s (%s)\n", r.what, paper.c_str(), r.ours, ratio.c_str(),
                how(r).c_str(), r.unit);
  }
  for (const auto& [size, gbps] : n->bandwidth)
    std::printf("  puts of %8llu bytes: %.3f GB/s\n", static_cast<unsigned long long>(size), gbps);
}

}  // namespace

void add_bench_nic_subcommand(CLI::App* bench) {
  auto o = std::make_shared<NicBenchCliOptions>();
  auto* c = bench->add_subcommand("nic", "The TH-1A NIC paper's latency and bandwidth figures");
  c->add_option("--fabric", o->route.session.fabric, "sim:<topology>")->capture_default_str();
  c->add_option("--timing", o->route.session.timing,
                "calibration file (default: config/th1a-timing.json)");
  c->add_option("--iterations", o->iterations, "ping-pong round trips per latency figure")
      ->capture_default_str()
      ->check(integer_in(1, 100000));
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_bench_nic(*o); });
}

}  // namespace galaxy::cli
