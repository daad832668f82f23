// galaxy simd — runs a simulated fabric for programs that use libglex on it (GLEX_FABRIC=sim:...):
// brings the fabric up as the management server does (discovery, routing, loading, all in
// simulated time), then serves the processes' calls on their NICs (glex/sim_server.h) until
// SIGTERM/SIGINT.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/route_phases.h"
#include "cli/run_control.h"
#include "glex/sim_protocol.h"
#include "glex/sim_server.h"

namespace galaxy::cli {

namespace {

struct SimdOptions {
  RouteOptions route;
  std::string socket;
};

void run_simd(SimdOptions& o) {
  if (o.route.session.fabric.rfind("sim:", 0) != 0)
    return report_error(make_error(Code::kInvalidArgument, 9630,
                                   fmt::format("--fabric = '{}': simd runs simulated fabrics "
                                               "(sim:...)",
                                               o.route.session.fabric)),
                        o.route.session.json);
  nlohmann::json phases;
  auto fabric = routed_sim_fabric(o.route, phases);
  if (!fabric) return;
  if (!phases["routes_verified"].get<bool>()) {
    return report_error(make_error(Code::kInvalidArgument, 9631,
                                   fmt::format("the fabric is not fully routed ({} of {} NIC "
                                               "pairs)",
                                               phases["reachable_pairs"].get<uint64_t>(),
                                               phases["nic_pairs"].get<uint64_t>())),
                        o.route.session.json);
  }
  const std::string path =
      o.socket.empty() ? glex::simwire::socket_path(o.route.session.fabric) : o.socket;
  auto server = glex::SimServer::listen(*fabric, path);
  if (!server.ok()) return report_error(server.error(), o.route.session.json);
  const std::atomic<bool>& stop = stop_on_signals();
  nlohmann::json ready{{"event", "ready"},
                       {"fabric", o.route.session.fabric},
                       {"pid", getpid()},
                       {"socket", path},
                       {"nics", fabric->topology().num_nics()},
                       {"longest_path_nrcs", phases["max_path_nrcs"]},
                       {"bringup_sim_time_us", phases["discovery_sim_time_us"].get<double>() +
                                                   phases["load_sim_time_us"].get<double>()}};
  std::printf("%s\n", json_text(ready).c_str());
  std::fflush(stdout);
  (*server)->run(stop);
  const glex::SimServerStats& st = (*server)->stats();
  nlohmann::json bye{{"event", "stopped"},
                     {"clients", st.clients},
                     {"requests", st.requests},
                     {"events", st.events},
                     {"sim_time_us", sim::to_us(fabric->sim().now())},
                     {"data_packets_received", fabric->stats().data_packets_received}};
  std::printf("%s\n", json_text(bye).c_str());
}

void add_simd_command(CLI::App& app) {
  auto o = std::make_shared<SimdOptions>();
  auto* c = app.add_subcommand(
      "simd", "Run a simulated fabric for libglex programs (GLEX_FABRIC=sim:...) until stopped");
  c->add_option("--fabric", o->route.session.fabric, "sim:<builder spec>, e.g. sim:th2")
      ->capture_default_str();
  c->add_option("--engine", o->route.engine, "routing engine for the bring-up")
      ->capture_default_str();
  c->add_option("--seed", o->route.session.seed, "random seed of the simulation")
      ->capture_default_str()
      ->check(any_uint64());
  c->add_option(
      "--socket", o->socket,
      "listen here (default: $GLEX_SIM_SOCKET, else /tmp/galaxy-sim-<uid>-<fabric>.sock)");
  c->add_flag("--json", o->route.session.json, "machine-readable errors");
  c->callback([o]() { run_simd(*o); });
}

const CommandRegistrar kSimdRegistrar("simd", add_simd_command);

}  // namespace

}  // namespace galaxy::cli
