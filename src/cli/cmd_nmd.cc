// galaxy nmd — the management daemon (docs/api.md): the management server run continuously over
// one fabric, with the REST API, server-sent events, Prometheus /metrics and the web console.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "base/env.h"
#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/log_options.h"
#include "cli/option_checks.h"
#include "cli/run_control.h"
#include "cli/session.h"
#include "nmd/daemon.h"
#include "nmd/http_server.h"

namespace galaxy::cli {

namespace {

struct NmdOptions {
  nmd::DaemonOptions daemon;
  SessionOptions& session = daemon.session;
  std::string listen = "127.0.0.1:8080";
  std::string token_file;
  std::string read_token_file;
  std::string web_dir;
  std::string ready_file;
  std::string retention = "none";
  uint32_t history_mb = 64;
  nmd::HttpOptions http;  // limits only; address and tokens from the options above
  LogCliOptions log;
};

Result<std::string> read_secret(const std::string& path, const char* what) {
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token))
    return make_error(Code::kIoError, 9500, fmt::format("{} '{}' cannot be read", what, path));
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 8)
    return make_error(
        Code::kInvalidArgument, 9501,
        fmt::format("{} '{}' holds {} characters; at least 8", what, path, token.size()));
  return token;
}

void run_nmd(NmdOptions& o) {
  const bool json = o.session.json;
  if (Status st = apply_log_options(o.log, "galaxy-nmd"); !st.ok())
    return report_error(st.error(), json);
  auto retention = nmd::parse_retention(o.retention);
  if (!retention.ok()) return report_error(retention.error(), json);
  o.daemon.retention_s = *retention;
  o.daemon.history_bytes = uint64_t{o.history_mb} << 20;
  nmd::HttpOptions http = o.http;
  if (Status l = nmd::parse_listen(o.listen, http.host, http.port); !l.ok())
    return report_error(l.error(), json);
  bool generated = false;
  if (!o.token_file.empty()) {
    auto t = read_secret(o.token_file, "--token-file");
    if (!t.ok()) return report_error(t.error(), json);
    http.token = *t;
  } else if (auto env = env_string("GALAXY_NMD_TOKEN")) {
    http.token = *env;
  } else {
    http.token = nmd::random_token();
    generated = true;
  }
  if (!o.read_token_file.empty()) {
    auto t = read_secret(o.read_token_file, "--read-token-file");
    if (!t.ok()) return report_error(t.error(), json);
    http.read_token = *t;
  }
  http.web_dir = o.web_dir;
  std::fprintf(stderr, "galaxy nmd: %s: discovering and routing...\n", o.session.fabric.c_str());
  auto d = nmd::Daemon::create(o.daemon);
  if (!d.ok()) return report_error(d.error(), json);
  nmd::HttpServer server(**d, http);
  if (Status b = server.bind(); !b.ok()) return report_error(b.error(), json);
  (*d)->start();
  server.start();
  const std::string host =
      http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host;
  const std::string url = fmt::format("http://{}:{}/", host, server.port());
  auto view = (*d)->view();
  nlohmann::json ready{{"url", url},
                       {"fabric", o.session.fabric},
                       {"chips", view->chips.size()},
                       {"links", view->links()},
                       {"events_db", o.daemon.db_path},
                       {"token_generated", generated}};
  // The token is printed once, only when the daemon made it up.
  if (generated) ready["token"] = http.token;
  if (json) {
    std::printf("%s\n", json_text(ready).c_str());
  } else {
    std::printf("galaxy nmd: serving %s (%zu chips, %u links) at %s\n", o.session.fabric.c_str(),
                view->chips.size(), view->links(), url.c_str());
    if (generated) std::printf("write token (shown once): %s\n", http.token.c_str());
  }
  std::fflush(stdout);
  if (!o.ready_file.empty()) {
    std::ofstream out(o.ready_file + ".tmp");
    out << json_text(ready) << "\n";
    out.close();
    std::rename((o.ready_file + ".tmp").c_str(), o.ready_file.c_str());
  }
  const std::atomic<bool>& stop = stop_on_signals(false, true);
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "galaxy nmd: stopping\n");
  server.stop();
  (*d)->stop();
}

void add_nmd_command(CLI::App& app) {
  auto o = std::make_shared<NmdOptions>();
  auto* c = app.add_subcommand(
      "nmd", "Management daemon: REST API, event stream, /metrics and the web console");
  add_session_options(c, o->session);
  c->get_option("--fabric")
      ->description(
          "sim:<topology>, file:<path>, live:<topology>,hosts=<name>:<ip>,..., or "
          "ib:[<adapter>[:<port>]]: an InfiniBand subnet, Galaxy its SM (nmd/ib_fabric.h)");
  c->add_option("--listen", o->listen, "HOST:PORT to serve on (loopback by default; port 0: any)")
      ->capture_default_str();
  c->add_option("--db", o->daemon.db_path, "the event store (SQLite); kept across restarts")
      ->capture_default_str();
  c->add_option("--token-file", o->token_file,
                "file whose first line is the write token (else $GALAXY_NMD_TOKEN, else a "
                "random one, printed once)");
  c->add_option("--read-token-file", o->read_token_file,
                "also protect reads with this token (for a non-loopback --listen)");
  c->add_option("--sm-priority", o->daemon.sm_priority,
                "the SM's priority against other SMs (SMInfo, 0-15): other SMs of an ib: "
                "subnet, or other galaxy nmd servers of a Galaxy fabric")
      ->capture_default_str()
      ->check(integer_in(0, 15));
  c->add_option("--sm-key", o->daemon.sm_key,
                "Galaxy fabrics: the SM_Key the fabric's servers share (a server of another key "
                "is not followed; its SMInfo Sets are refused; 0: none)")
      ->capture_default_str()
      ->check(any_uint64());
  c->add_option("--sm-guid", o->daemon.sm_guid,
                "Galaxy fabrics: this server's GUID in SMInfo (0: from its NIC and VP)")
      ->check(any_uint64());
  c->add_option("--sm-poll-s", o->daemon.sm_poll_s,
                "Galaxy fabrics: seconds between a standby's polls of the master (and the "
                "master's checks that the chips name it)")
      ->capture_default_str()
      ->check(real_in(0.001, nmd::kMaxIntervalS));
  c->add_option("--sm-poll-retries", o->daemon.sm_poll_retries,
                "Galaxy fabrics: polls the master may miss before its successor takes over")
      ->capture_default_str()
      ->check(integer_in(1, 100));
  c->add_option("--engine", o->daemon.routing_engine,
                "routing engine at start (none: leave the tables)")
      ->capture_default_str();
  c->add_option("--scan-interval-s", o->daemon.scan_interval_s,
                "seconds between status scans (0: none)")
      ->capture_default_str()
      ->check(real_in(0, nmd::kMaxIntervalS));
  c->add_option("--sweep-interval-s", o->daemon.sweep_interval_s,
                "seconds between discovery sweeps (0: none)")
      ->capture_default_str()
      ->check(real_in(0, nmd::kMaxIntervalS));
  c->add_option("--http-threads", o->http.threads,
                "workers for API requests that wait for the fabric (reads of snapshots, event "
                "streams and idle connections take none)")
      ->capture_default_str()
      ->check(integer_in(1, 256));
  c->add_option("--http-io-threads", o->http.io_threads,
                "I/O threads owning the HTTP connections, each connection on one (0: one per "
                "core, at most 4)")
      ->capture_default_str()
      ->check(integer_in(0, 64));
  c->add_option("--max-connections", o->http.max_connections,
                "open HTTP connections, event streams included; beyond: 503 (E8318)")
      ->capture_default_str()
      ->check(integer_in(1, 1000000));
  c->add_option("--max-streams", o->http.max_streams,
                "open /api/events streams; beyond: 503 (E8317)")
      ->capture_default_str()
      ->check(integer_in(1, 1000000));
  c->add_option("--max-body-bytes", o->http.max_body_bytes,
                "request body limit, Content-Length or chunked; beyond: 413 (E8312)")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 30));
  add_log_options(c, o->log);
  c->add_option("--fault-audit-s", o->daemon.fault_audit_s,
                "seconds between comparisons of every chip's count of fault reports sent with "
                "those received (lost reports are then found by reading the chip; 0: never)")
      ->capture_default_str()
      ->check(real_in(0, nmd::kMaxIntervalS));
  c->add_option("--fault-mask", o->daemon.fault_mask, "FAULT_MASK programmed on every chip")
      ->capture_default_str()
      ->check(any_uint64());
  c->add_option("--mkey", o->daemon.mkey.key,
                "Galaxy fabrics: the management key placed in every managed chip, which every "
                "request then carries (0: none; other servers are refused until the lease ends)")
      ->check(any_uint64());
  c->add_flag("--mkey-per-chip", o->daemon.mkey.per_chip,
              "each chip its own key, derived from --mkey and its chip id");
  c->add_option("--mkey-level", o->daemon.mkey.level,
                "protection: 1 writes need the key, 2 reads and writes")
      ->capture_default_str()
      ->check(integer_in(1, 2));
  c->add_option("--mkey-lease-s", o->daemon.mkey.lease_s,
                "seconds a chip stays protected after refusing a request while no request with "
                "the key comes (0: for ever)")
      ->capture_default_str()
      ->check(integer_in(0, 65535));
  c->add_option("--retention", o->retention,
                "delete events older than this: 30d, 12h, 90m, 3600s (none or 0: keep every "
                "event)")
      ->capture_default_str();
  c->add_option("--history-points", o->daemon.history_points,
                "the console's history: points kept per series (one per scan; also bounded by "
                "--history-mb and --retention)")
      ->capture_default_str()
      ->check(integer_in(2, 1000000));
  c->add_option("--history-mb", o->history_mb,
                "the console's history: memory for the scans' points (MiB; a large fabric keeps "
                "fewer points)")
      ->capture_default_str()
      ->check(integer_in(1, 65536));
  c->add_option("--region", o->daemon.region,
                "manage only these chips (fault reports, scans, chip requests), e.g. "
                "cabinet=0-71 or level=1; other daemons manage the rest");
  c->add_option("--web", o->web_dir, "serve the console from this directory (development)");
  c->add_option("--ready-file", o->ready_file,
                "write the ready line (JSON: url, token if generated) here once serving");
  c->callback([o]() { run_nmd(*o); });
}

const CommandRegistrar kNmdRegistrar("nmd", add_nmd_command);

}  // namespace
}  // namespace galaxy::cli
