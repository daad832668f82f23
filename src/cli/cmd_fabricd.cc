// galaxy fabricd — the per-host fabric daemon of a live fabric (docs/live.md;
// engine/live/daemon.h). Usually started by `galaxy fabric up`; runs until SIGTERM/SIGINT.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "base/json_text.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/log_options.h"
#include "cli/option_checks.h"
#include "cli/run_control.h"
#include "engine/live/daemon.h"
#include "engine/live/live_spec.h"

namespace galaxy::cli {

namespace {

struct FabricdOptions {
  std::string fabric;
  std::string host;
  std::string impair;
  uint64_t op_timeout_ms = 5000;
  uint64_t spin_us = 50;
  uint32_t frame_bytes = 0;  // by the path's MTU
  bool json = false;
  LogCliOptions log;
};

nlohmann::json link_json(const live::FabricDaemon& d) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : d.links())
    links.push_back({{"chip", l.chip},
                     {"port", l.port},
                     {"peer_chip", l.peer_chip},
                     {"peer_port", l.peer_port},
                     {"state", std::string(live::link_state_name(l.state))},
                     {"frames_sent", l.stats.frames_sent},
                     {"retransmissions", l.stats.retransmissions},
                     {"crc_errors", l.stats.crc_errors},
                     {"duplicates", l.stats.duplicates},
                     {"handshakes", l.stats.handshakes}});
  return links;
}

void run_fabricd(const FabricdOptions& o) {
  if (Status st = apply_log_options(o.log, "galaxy-fabricd"); !st.ok())
    return report_error(st.error(), o.json);
  auto f = live::parse_live_fabric(o.fabric);
  if (!f.ok()) return report_error(f.error(), o.json);
  int host = f->host_index(o.host);
  if (host < 0)
    return report_error(make_error(Code::kNotFound, 9401,
                                   fmt::format("--host {} is not a host of the fabric", o.host)),
                        o.json);
  live::DaemonOptions d;
  d.op_timeout_ns = o.op_timeout_ms * 1000000;
  d.spin_ns = o.spin_us * 1000;
  d.frame_bytes = o.frame_bytes;
  if (!o.impair.empty()) {
    auto ic = live::parse_impairment(o.impair);
    if (!ic.ok()) return report_error(ic.error(), o.json);
    d.impaired = true;
    d.impairment = *ic;
  }
  // Before the segment exists: a daemon stopped while it starts (a `fabric up` that failed or was
  // interrupted) still removes its segment.
  const std::atomic<bool>& stop = stop_on_signals();
  auto daemon = live::FabricDaemon::start(*f, host, d);
  if (!daemon.ok()) return report_error(daemon.error(), o.json);
  nlohmann::json ready{{"event", "ready"},
                       {"fabric", f->name},
                       {"host", o.host},
                       {"pid", getpid()},
                       {"segment", live::Segment::shm_name(f->name, o.host)},
                       {"udp", fmt::format("{}:{}", f->hosts[static_cast<size_t>(host)].ip,
                                           f->hosts[static_cast<size_t>(host)].port)},
                       {"links", (*daemon)->links().size()}};
  std::printf("%s\n", json_text(ready).c_str());
  std::fflush(stdout);
  log::info("serving host {} of fabric {} on udp {}: {} links", o.host, f->name,
            ready["udp"].get<std::string>(), (*daemon)->links().size());
  (*daemon)->run(stop);
  const live::DaemonStats st = (*daemon)->stats();
  log::info("stopped: {} items sent, {} received, {} MPs delivered, {} dropped", st.items_sent,
            st.items_received, st.mps_delivered, st.dropped);
  nlohmann::json bye{{"event", "stopped"},
                     {"host", o.host},
                     {"egress_cells", st.egress_cells},
                     {"mgmt_packets", st.mgmt_packets},
                     {"nma_requests", st.nma_requests},
                     {"items_sent", st.items_sent},
                     {"items_received", st.items_received},
                     {"mps_delivered", st.mps_delivered},
                     {"mps_refused", st.mps_refused},
                     {"direct_items_arrived", st.direct_items_arrived},
                     {"direct_items_rescued", st.direct_items_rescued},
                     {"rdma_bytes_written", st.rdma_bytes_written},
                     {"ops_timed_out", st.ops_timed_out},
                     {"dead_processes", st.dead_processes},
                     {"dropped", st.dropped},
                     {"links", link_json(**daemon)}};
  std::printf("%s\n", json_text(bye).c_str());
}

void add_fabricd_command(CLI::App& app) {
  auto o = std::make_shared<FabricdOptions>();
  auto* c = app.add_subcommand("fabricd", "Per-host daemon of a live fabric (see `fabric up`)");
  c->add_option("--fabric", o->fabric, "live:<topology>,hosts=<name>:<ip>[:<port>],...")
      ->required();
  c->add_option("--host", o->host, "which host of the fabric this daemon serves")->required();
  c->add_option("--impair", o->impair,
                "impair outgoing link frames: drop=P,dup=P,reorder=P,corrupt=P,seed=N");
  c->add_option(
       "--op-timeout-ms", o->op_timeout_ms,
       "a remote RDMA that moves no further (no packet out, no answer in) for this long fails")
      ->capture_default_str()
      ->check(integer_in(1, 3600000));
  c->add_option("--spin-us", o->spin_us, "poll this long before sleeping")
      ->capture_default_str()
      ->check(integer_in(0, 1000000));
  c->add_option("--frame-bytes", o->frame_bytes,
                "largest link frame to another host's daemon, in bytes of items (default: one "
                "IP packet of the path's MTU, at most 32768)")
      ->check(integer_in(live::kMinFrameBytes, live::kMaxLinkPayload));
  c->add_flag("--json", o->json, "machine-readable errors");
  add_log_options(c, o->log);
  c->callback([o]() { run_fabricd(*o); });
}

const CommandRegistrar kFabricdRegistrar("fabricd", add_fabricd_command);

}  // namespace

}  // namespace galaxy::cli
