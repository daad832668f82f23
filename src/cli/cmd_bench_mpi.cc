// galaxy bench mpi — MPI programs unchanged over Galaxy's libfabric provider (docs/libfabric.md)
// beside the same programs over Open MPI's own transports, in the same run, repetitions
// interleaved: bench/peers/mpi_pingpong (ping-pong latency, windowed message rate as bandwidth)
// and bench/peers/mpi_coll (barrier, 8-byte allreduce), two ranks on one host of a private live
// fabric (Open MPI: pml ob1 over shared memory) and on two hosts (Open MPI: pml ob1 over TCP on
// loopback, the path between two hosts of this machine).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/fabric_live.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/peers.h"
#include "engine/live/live_spec.h"

namespace galaxy::cli {
namespace {

struct MpiOptions {
  std::vector<size_t> lat_sizes{8, 512, 4096, 65536, 1 << 20};
  std::vector<size_t> bw_sizes{4096, 65536, 1 << 20};
  int repetitions = 3;
  bool quick = false;
  bool json = false;
};

std::string bin_path(const std::string& name) {
  return (std::filesystem::path(self_executable()).parent_path() / name).string();
}
// libgalaxy-fi.so's directory in a build: <build>/lib/libfabric beside <build>/bin.
std::string provider_dir() {
  return (std::filesystem::path(self_executable()).parent_path().parent_path() / "lib" /
          "libfabric")
      .string();
}

struct MpiPlacement {
  std::string name;     // one_host, two_hosts
  std::string h0, h1;   // the ranks' hosts
  std::string own_btl;  // Open MPI's own transport for the same placement
};

// One mpirun of `prog args` with two ranks: over Galaxy (the provider, each rank on its host) or
// over Open MPI's own transport.
std::vector<std::string> mpirun_argv(bool galaxy, const std::string& fabric, const MpiPlacement& p,
                                     const std::vector<std::string>& prog) {
  std::vector<std::string> v{find_in_path("mpirun"), "--allow-run-as-root", "--oversubscribe"};
  if (!galaxy) {
    v.insert(v.end(), {"--mca", "pml", "ob1", "--mca", "btl", p.own_btl, "-np", "2"});
    v.insert(v.end(), prog.begin(), prog.end());
    return v;
  }
  for (int r = 0; r < 2; ++r) {
    if (r) v.push_back(":");
    v.insert(v.end(), {"--mca",  "pml",
                       "cm",     "--mca",
                       "mtl",    "ofi",
                       "--mca",  "mtl_ofi_provider_include",
                       "galaxy", "--mca",
                       "btl",    "self,vader",
                       "-x",     "FI_PROVIDER_PATH=" + provider_dir(),
                       "-x",     "FI_PROVIDER=galaxy",
                       "-x",     "GLEX_FABRIC=" + fabric,
                       "-x",     "GLEX_HOST=" + (r ? p.h1 : p.h0),
                       "-np",    "1"});
    v.insert(v.end(), prog.begin(), prog.end());
  }
  return v;
}

// A figure from one run: mpi_pingpong's lat_us / bw_mbps, or mpi_coll's "us" of a test.
Result<double> run_once(const std::vector<std::string>& argv, const std::string& what) {
  auto out = run_command(argv, {}, 300);
  if (!out.ok()) return out.error();
  std::smatch m;
  const std::regex figure(what == "lat"  ? "lat_us=([0-9.]+)"
                          : what == "bw" ? "bw_mbps=([0-9.]+)"
                                         : "\"" + what + "\":\\{[^}]*\"us\":([0-9.]+)");
  if (out->status != 0 || !std::regex_search(out->output, m, figure))
    return make_error(
        Code::kIoError, 9671,
        fmt::format("mpirun exited {}: {}", out->status,
                    out->output.substr(0, std::min<size_t>(out->output.size(), 600))));
  return std::stod(m[1].str());
}

void run_mpi(const MpiOptions& o) {
  if (find_in_path("mpirun").empty())
    return report_error(make_error(Code::kNotFound, 9672, "mpirun not installed (apt openmpi-bin)"),
                        o.json);
  for (const char* prog : {"mpi_pingpong", "mpi_coll"})
    if (::access(bin_path(prog).c_str(), X_OK) != 0)
      return report_error(
          make_error(Code::kNotFound, 9673,
                     fmt::format("{} not found next to galaxy (bench/peers, built with MPI)",
                                 bin_path(prog))),
          o.json);
  if (::access((provider_dir() + "/libgalaxy-fi.so").c_str(), R_OK) != 0)
    return report_error(make_error(Code::kNotFound, 9674,
                                   fmt::format("FI_PROVIDER_PATH={}: no libgalaxy-fi.so there "
                                               "(built with libfabric-dev)",
                                               provider_dir())),
                        o.json);
  auto started = private_loopback_fabric("benchmpi", 2, o.json);
  if (!started.ok()) return report_error(started.error(), o.json);
  const std::string spec = *started;
  auto f = live::parse_live_fabric(spec);
  if (!f.ok()) return report_error(f.error(), o.json);
  const std::string h1 = f->hosts[0].name, h2 = f->hosts[1].name;
  const std::vector<MpiPlacement> places = {{"one_host", h1, h1, "self,vader"},
                                            {"two_hosts", h1, h2, "self,tcp"}};
  const int reps = o.quick ? 1 : o.repetitions;
  struct Test {
    std::string name, what, unit;
    std::vector<std::string> prog;
  };
  nlohmann::json rows = nlohmann::json::array();
  bool failed = false;
  for (const MpiPlacement& p : places) {
    const bool remote = p.h0 != p.h1;
    std::vector<Test> tests;
    for (size_t s : o.lat_sizes) {
      // About a second per run; a message between hosts costs some 100 times what it does on one.
      long n = std::clamp(static_cast<long>(4e9 / (static_cast<double>(s) + 2000)), 100L, 20000L);
      if (remote) n = std::max(50L, n / 100);
      if (o.quick) n = std::min(n, 200L);
      tests.push_back({fmt::format("lat_{}", s),
                       "lat",
                       "us",
                       {bin_path("mpi_pingpong"), "lat", std::to_string(s), std::to_string(n)}});
    }
    for (size_t s : o.bw_sizes) {
      long n = s >= (1u << 20) ? 640 : 6400;
      if (remote) n = s >= (1u << 20) ? 64 : 640;
      if (o.quick) n = 64;
      tests.push_back({fmt::format("bw_{}", s),
                       "bw",
                       "MB/s",
                       {bin_path("mpi_pingpong"), "rate", std::to_string(s), std::to_string(n)}});
    }
    for (const char* t : {"barrier", "allreduce"})
      tests.push_back({t,
                       t,
                       "us",
                       {bin_path("mpi_coll"), "--tests", t, "--iters",
                        o.quick ? "100" : (remote ? "500" : "20000")}});
    for (const Test& t : tests) {
      if (!o.json)
        std::fprintf(stderr, "galaxy bench mpi: %s %s ...\n", p.name.c_str(), t.name.c_str());
      std::vector<double> ours, theirs;
      std::string error;
      for (int rep = 0; rep < reps && error.empty(); ++rep) {
        for (bool galaxy : {true, false}) {
          auto v = run_once(mpirun_argv(galaxy, f->name, p, t.prog), t.what);
          if (!v.ok()) {
            error = fmt::format("{}: {}", galaxy ? "galaxy" : "openmpi", v.error().to_string());
            break;
          }
          (galaxy ? ours : theirs).push_back(*v);
        }
      }
      nlohmann::json row{{"placement", p.name},
                         {"test", t.name},
                         {"unit", t.unit},
                         {"better", t.unit == "us" ? "lower" : "higher"},
                         {"peer", fmt::format("openmpi pml ob1, btl {}", p.own_btl)},
                         {"command", join(mpirun_argv(true, f->name, p, t.prog))}};
      if (!error.empty()) {
        row["error"] = error;
        failed = true;
        rows.push_back(row);
        continue;
      }
      row["ours"] = median_of(ours);
      row["ours_runs"] = ours;
      row["peer_median"] = median_of(theirs);
      row["peer_runs"] = theirs;
      row["ratio"] =
          row["peer_median"].get<double>() > 0
              ? nlohmann::json(row["ours"].get<double>() / row["peer_median"].get<double>())
              : nlohmann::json();
      rows.push_back(row);
    }
  }
  (void)live_fabric_down(spec);
  if (failed) set_exit_code(1);
  nlohmann::json j{{"benchmark", "mpi"}, {"fabric", spec}, {"repetitions", reps}, {"rows", rows}};
  if (o.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  std::printf("%-10s %-12s %-5s %12s %12s %7s  %s\n", "placement", "test", "unit", "galaxy",
              "open mpi", "ratio", "open mpi's transport");
  for (const auto& r : rows) {
    if (r.contains("error")) {
      std::printf("%-10s %-12s ERROR %s\n", r["placement"].get<std::string>().c_str(),
                  r["test"].get<std::string>().c_str(), r["error"].get<std::string>().c_str());
      continue;
    }
    std::printf(
        "%-10s %-12s %-5s %12.4g %12.4g %7s  %s\n", r["placement"].get<std::string>().c_str(),
        r["test"].get<std::string>().c_str(), r["unit"].get<std::string>().c_str(),
        r["ours"].get<double>(), r["peer_median"].get<double>(),
        r["ratio"].is_null() ? "-" : fmt::format("{:.3f}", r["ratio"].get<double>()).c_str(),
        r["peer"].get<std::string>().c_str());
  }
}

}  // namespace

void add_bench_mpi_subcommand(CLI::App* bench) {
  auto o = std::make_shared<MpiOptions>();
  auto* c = bench->add_subcommand(
      "mpi",
      "MPI programs over Galaxy's libfabric provider beside Open MPI's own transports: "
      "ping-pong latency, message-rate bandwidth, barrier and allreduce, one host and two");
  c->add_option("--lat-sizes", o->lat_sizes, "ping-pong message sizes")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 24));
  c->add_option("--bw-sizes", o->bw_sizes, "windowed-send message sizes")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 24));
  c->add_option("--reps", o->repetitions, "repetitions, each Galaxy then Open MPI (medians)")
      ->capture_default_str()
      ->check(integer_in(1, 1000));
  c->add_flag("--quick", o->quick, "one short repetition (a smoke test, not a measurement)");
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_mpi(*o); });
}

}  // namespace galaxy::cli
