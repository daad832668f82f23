// galaxy bench scale — how bring-up grows with the fabric: for each topology family a series of
// sizes, each a whole `galaxy bringup` (discovery, routing, loading, the held-table check, MPs)
// in a process of its own, so that every size's peak memory is its own. Prints size, wall time,
// peak memory and whether it verified, then the growth exponents fitted by least squares of
// log(wall time) and log(peak memory) over log(NICs): 1.0 is linear growth.
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/json_text.h"
#include "cli/bench_sim.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/peers.h"

namespace galaxy::cli {

namespace {

// A topology family: its sizes, smallest first, and the deadlock-free engine that routes it.
struct Family {
  const char* name;
  const char* engine;
  std::vector<const char*> sizes;
  const char* help;
};

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"fattree",
       "fattree",
       {"fattree:k=8,levels=3", "fattree:k=12,levels=3", "fattree:k=16,levels=3",
        "fattree:k=20,levels=3", "fattree:k=24,levels=3", "fattree:k=28,levels=3",
        "fattree:k=32,levels=3", "fattree:k=40,levels=3", "fattree:k=48,levels=3",
        "fattree:k=56,levels=3", "fattree:k=64,levels=3"},
       "3-level k-ary fat trees, 128 to 65,536 NICs (switches of 8 to 64 ports; from k=64, 70,656 "
       "chips, 17-bit chip ids)"},
      {"dragonfly",
       "dragonfly",
       {"dragonfly:a=4,p=2,h=2", "dragonfly:a=8,p=4,h=4", "dragonfly:a=12,p=6,h=6",
        "dragonfly:a=16,p=8,h=8"},
       "dragonflies of a*h+1 groups, 72 to 16,512 NICs"},
      {"mesh",
       "dor",
       {"mesh:4x4x4", "mesh:5x5x5", "mesh:6x6x6", "mesh:7x7x7"},
       "3-D meshes managed from a corner, 64 to 343 NICs"},
      {"torus",
       "dor",
       {"torus:6x6x6", "torus:8x8x8", "torus:10x10x10", "torus:12x12x12", "torus:16x16x16"},
       "3-D tori with datelines, 216 to 4,096 NICs (up to 25 NRCs from the server: long routes)"},
  };
  return f;
}

struct Point {
  std::string fabric;
  uint64_t nics = 0, nrcs = 0;
  double wall_s = 0, rss_mb = 0;
  bool verified = false;
};

// Least-squares slope of log(y) over log(x).
double growth(const std::vector<Point>& pts, double Point::*y) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Point& p : pts) {
    if (p.nics == 0 || p.*y <= 0) continue;
    const double lx = std::log(static_cast<double>(p.nics)), ly = std::log(p.*y);
    n += 1;
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  const double d = n * sxx - sx * sx;
  return n >= 2 && d > 0 ? (n * sxy - sx * sy) / d : 0.0;
}

struct ScaleOptions {
  std::string family = "all";
  uint64_t max_nics = 20000;
  int timeout_s = 600;
  bool json = false;
};

void run_bench_scale(const ScaleOptions& o) {
  std::vector<const Family*> chosen;
  std::string names;
  for (const Family& f : families()) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", f.name);
    if (o.family == "all" || o.family == f.name) chosen.push_back(&f);
  }
  if (chosen.empty())
    return report_error(
        make_error(Code::kInvalidArgument, 9638,
                   fmt::format("--family = '{}' is not one of {} or all", o.family, names)),
        o.json);
  char self[PATH_MAX] = {};
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    return report_error(
        make_error(Code::kIoError, 9639, "cannot find this program (/proc/self/exe)"), o.json);
  nlohmann::json out = nlohmann::json::array();
  for (const Family* f : chosen) {
    std::vector<Point> pts;
    nlohmann::json rows = nlohmann::json::array();
    for (const char* size : f->sizes) {
      if (!o.json) std::fprintf(stderr, "bench scale: %s with %s ...\n", size, f->engine);
      auto r = run_command({self, "bringup", "--fabric", fmt::format("sim:{}", size), "--engine",
                            f->engine, "--json"},
                           {}, o.timeout_s);
      if (!r) return report_error(r.error(), o.json);
      const size_t a = r->output.find('{'), b = r->output.rfind('}');
      nlohmann::json j =
          a == std::string::npos || b == std::string::npos
              ? nlohmann::json()
              : nlohmann::json::parse(r->output.substr(a, b - a + 1), nullptr, false);
      if (!j.is_object() || !j.contains("wall_ms"))
        return report_error(make_error(Code::kIoError, 9640,
                                       fmt::format("bring-up of {} printed no result (exit {}): "
                                                   "{}",
                                                   size, r->status, r->output.substr(0, 400))),
                            o.json);
      Point p;
      p.fabric = size;
      p.nics = j["nic"].get<uint64_t>();
      p.nrcs = j["nrc"].get<uint64_t>();
      p.wall_s = j["wall_ms"].get<double>() / 1e3;
      p.rss_mb = j["peak_rss_mb"].get<double>();
      p.verified = j["verified"].get<bool>();
      if (p.nics > o.max_nics) break;
      pts.push_back(p);
      rows.push_back({{"fabric", p.fabric},
                      {"nics", p.nics},
                      {"nrcs", p.nrcs},
                      {"wall_s", p.wall_s},
                      {"peak_rss_mb", p.rss_mb},
                      {"verified", p.verified}});
    }
    out.push_back({{"family", f->name},
                   {"engine", f->engine},
                   {"sizes", rows},
                   {"wall_exponent", growth(pts, &Point::wall_s)},
                   {"memory_exponent", growth(pts, &Point::rss_mb)}});
  }
  if (o.json) {
    std::printf("%s\n", json_text(nlohmann::json{{"families", out}}, 2).c_str());
    return;
  }
  for (const auto& f : out) {
    std::printf("%s (engine %s)\n", f["family"].get<std::string>().c_str(),
                f["engine"].get<std::string>().c_str());
    std::printf("  %-28s %8s %8s %10s %12s  %s\n", "fabric", "NICs", "NRCs", "wall s", "peak MB",
                "verified");
    for (const auto& r : f["sizes"])
      std::printf("  %-28s %8llu %8llu %10.3f %12.1f  %s\n", r["fabric"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(r["nics"].get<uint64_t>()),
                  static_cast<unsigned long long>(r["nrcs"].get<uint64_t>()),
                  r["wall_s"].get<double>(), r["peak_rss_mb"].get<double>(),
                  r["verified"].get<bool>() ? "yes" : "NO");
    std::printf("  growth: wall time ~ NICs^%.2f, peak memory ~ NICs^%.2f\n",
                f["wall_exponent"].get<double>(), f["memory_exponent"].get<double>());
  }
}

}  // namespace

void add_bench_scale_subcommand(CLI::App* bench) {
  auto o = std::make_shared<ScaleOptions>();
  std::string help = "families:";
  for (const Family& f : families())
    help += fmt::format(" {} ({}, engine {});", f.name, f.help, f.engine);
  auto* c = bench->add_subcommand(
      "scale", "How bring-up grows with the fabric: wall time, peak memory, growth exponents");
  c->add_option("--family", o->family, help + " or all")->capture_default_str();
  c->add_option("--max-nics", o->max_nics, "stop a family at the first size above this")
      ->capture_default_str()
      ->check(integer_in(1, 1000000));
  c->add_option("--timeout-s", o->timeout_s, "per bring-up")
      ->capture_default_str()
      ->check(integer_in(1, 86400));
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_bench_scale(*o); });
}

}  // namespace galaxy::cli
