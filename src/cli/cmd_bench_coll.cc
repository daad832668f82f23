// galaxy bench coll — barrier and broadcast latency on a simulated fabric, offloaded to the NICs
// (docs/system.md 1.1, "Offloaded collectives") beside the same trees driven by the hosts with MPs,
// at 2 to 4,096 members, with the TH-1A paper's 4x at 4,096 nodes beside our ratio. The figures
// come out of the chip models and the timing file (glex/coll_bench.h); an SVG plots them.
#include <cstdio>
#include <fstream>

#include "base/json_text.h"
#include "cli/bench_sim.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/route_phases.h"
#include "glex/coll_bench.h"

namespace galaxy::cli {

namespace {

// The paper's figure (docs/system.md 1.1): barrier and broadcast 4x faster offloaded at 4,096
// nodes.
constexpr double kPaperRatio = 4.0;
constexpr uint32_t kPaperMembers = 4096;

struct CollBenchCliOptions {
  RouteOptions route;
  std::vector<uint32_t> sizes = {2, 16, 64, 256, 1024, 4096};
  uint32_t iterations = 10;
  uint32_t bytes = 8;
  uint32_t degree = 0;
  std::string plot;
  bool json = false;
};

// Latency against members (log scale), one line per collective and form.
void write_plot(const std::string& path, const std::vector<glex::CollRow>& rows,
                const std::string& fabric) {
  const double W = 720, H = 440, L = 70, B = 50, T = 40, R = 200;
  double umax = 1, nmax = 2;
  for (const auto& r : rows) {
    umax = std::max({umax, r.offloaded_us, r.p2p_us});
    nmax = std::max<double>(nmax, r.members);
  }
  const double lx = std::log2(std::max(nmax, 4.0));
  auto x = [&](double n) { return L + std::log2(n) / lx * (W - L - R); };
  auto y = [&](double us) { return H - B - us / (umax * 1.05) * (H - B - T); };
  std::ofstream o(path);
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  o << "<text x='" << (W - R) / 2 + L / 2 << "' y='20' text-anchor='middle'>Barrier and 8-byte "
    << "broadcast latency vs members (" << fabric << ", simulated)</text>\n";
  o << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B
    << "' stroke='black'/>\n<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B
    << "' stroke='black'/>\n";
  for (double n = 2; n <= nmax; n *= 4)
    o << "<text x='" << x(n) << "' y='" << H - B + 16 << "' text-anchor='middle'>" << n
      << "</text>\n";
  const double step = umax > 40 ? 10 : umax > 15 ? 5 : 2;
  for (double us = 0; us <= umax * 1.05; us += step)
    o << "<text x='" << L - 8 << "' y='" << y(us) + 4 << "' text-anchor='end'>" << us
      << "</text>\n";
  o << "<text x='" << (W - R) / 2 + L / 2 << "' y='" << H - 12
    << "' text-anchor='middle'>members (NICs)</text>\n<text x='18' y='" << H / 2
    << "' transform='rotate(-90 18 " << H / 2 << ")' text-anchor='middle'>latency (us)</text>\n";
  struct Series {
    glex::coll::Kind kind;
    bool offload;
    const char* color;
    const char* dash;
    const char* name;
  };
  const Series series[] = {
      {glex::coll::Kind::kBarrier, true, "#236", "", "barrier, offloaded"},
      {glex::coll::Kind::kBarrier, false, "#236", "6,4", "barrier, point-to-point"},
      {glex::coll::Kind::kBcast, true, "#d33", "", "broadcast, offloaded"},
      {glex::coll::Kind::kBcast, false, "#d33", "6,4", "broadcast, point-to-point"},
  };
  int legend = 0;
  for (const Series& s : series) {
    std::string points;
    for (const auto& r : rows)
      if (r.kind == s.kind)
        points +=
            fmt::format("{:.1f},{:.1f} ", x(r.members), y(s.offload ? r.offloaded_us : r.p2p_us));
    o << "<polyline fill='none' stroke='" << s.color << "' stroke-width='2' stroke-dasharray='"
      << s.dash << "' points='" << points << "'/>\n";
    const double ly = T + 20 + 18 * legend++;
    o << "<line x1='" << W - R + 10 << "' y1='" << ly - 4 << "' x2='" << W - R + 40 << "' y2='"
      << ly - 4 << "' stroke='" << s.color << "' stroke-width='2' stroke-dasharray='" << s.dash
      << "'/>\n<text x='" << W - R + 46 << "' y='" << ly << "'>" << s.name << "</text>\n";
  }
  o << "<text x='" << W - R + 10 << "' y='" << T + 110
    << "'>paper: offloaded 4x lower</text>\n<text x='" << W - R + 10 << "' y='" << T + 126
    << "'>at 4,096 nodes (TH-1A)</text>\n</svg>\n";
}

void run_bench_coll(CollBenchCliOptions& o) {
  SessionOptions& so = o.route.session;
  so.json = o.json;
  nlohmann::json phases;
  auto fabric = routed_sim_fabric(o.route, phases);
  if (!fabric) return;
  glex::CollBenchOptions bo;
  bo.sizes = o.sizes;
  bo.iterations = o.iterations;
  bo.bcast_bytes = o.bytes;
  bo.degree = o.degree;
  if (!o.json)
    std::printf("%-10s %8s %14s %16s %7s %8s %7s\n", "collective", "members", "offloaded us",
                "point-to-point", "ratio", "degrees", "links");
  auto rows = glex::measure_coll(*fabric, bo, [&](const glex::CollRow& r) {
    if (o.json) return;
    std::printf("%-10s %8u %14.3f %16.3f %7.2f %5u/%-2u %7.2f\n", glex::coll::kind_name(r.kind),
                r.members, r.offloaded_us, r.p2p_us, r.p2p_us / r.offloaded_us, r.offloaded_degree,
                r.p2p_degree, r.links);
    std::fflush(stdout);
  });
  if (!rows.ok()) return report_error(rows.error(), o.json);
  nlohmann::json out{{"fabric", so.fabric},
                     {"timing", so.timing.empty() ? sim::default_timing_path() : so.timing},
                     {"iterations", o.iterations},
                     {"bcast_bytes", o.bytes},
                     {"paper", {{"members", kPaperMembers}, {"ratio", kPaperRatio}}},
                     {"rows", nlohmann::json::array()}};
  for (const auto& r : *rows)
    out["rows"].push_back({{"collective", glex::coll::kind_name(r.kind)},
                           {"members", r.members},
                           {"offloaded_us", r.offloaded_us},
                           {"p2p_us", r.p2p_us},
                           {"ratio", r.p2p_us / r.offloaded_us},
                           {"offloaded_degree", r.offloaded_degree},
                           {"p2p_degree", r.p2p_degree},
                           {"mean_links", r.links}});
  if (!o.plot.empty()) write_plot(o.plot, *rows, so.fabric);
  if (o.json) {
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  for (const auto& r : *rows)
    if (r.members == kPaperMembers)
      std::printf("%s at %u members: point-to-point / offloaded = %.2f (paper: %.0fx)\n",
                  glex::coll::kind_name(r.kind), r.members, r.p2p_us / r.offloaded_us, kPaperRatio);
  if (!o.plot.empty()) std::printf("plot: %s\n", o.plot.c_str());
}

}  // namespace

void add_bench_coll_subcommand(CLI::App* bench) {
  auto o = std::make_shared<CollBenchCliOptions>();
  o->route.session.fabric = "sim:th2";
  auto* c = bench->add_subcommand(
      "coll", "Barrier and broadcast latency, offloaded vs point-to-point, on a simulated fabric");
  c->add_option("--fabric", o->route.session.fabric, "sim:<topology>")->capture_default_str();
  c->add_option("--timing", o->route.session.timing, "calibration file (default: TH-2's)");
  c->add_option("--sizes", o->sizes, "members per figure, comma-separated (the first NICs)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(integer_in(1, 1 << 20));
  c->add_option("--iterations", o->iterations, "collectives back to back per figure")
      ->capture_default_str()
      ->check(integer_in(1, 100000));
  c->add_option("--bytes", o->bytes, "broadcast length")
      ->capture_default_str()
      ->check(integer_in(1, 116));
  c->add_option("--degree", o->degree, "tree degree for both forms (0: from the timing model)")
      ->capture_default_str()
      ->check(integer_in(0, 64));
  c->add_option("--plot", o->plot, "write an SVG of latency vs members here");
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_bench_coll(*o); });
}

}  // namespace galaxy::cli
