// galaxy fabric up | down | status — a live fabric's daemons (one `galaxy fabricd` per host of
// this machine) and its bring-up by the management server: discovery, routing and loading
// through the same nm/ code as on a simulated fabric.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/fabric_live.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/route_phases.h"
#include "engine/live/live_spec.h"
#include "engine/live/segment.h"

namespace galaxy::cli {

namespace {

struct LiveOptions {
  LiveUpRequest up;  // spec, engine, impairment, hosts, timeouts, json
  bool no_route = false;
};

// A host runs here if we can bind its address.
bool address_is_local(const std::string& ip) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  bool ok = inet_pton(AF_INET, ip.c_str(), &a.sin_addr) == 1 &&
            bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return ok;
}

Result<std::vector<int>> chosen_hosts(const live::LiveFabric& f, const LiveUpRequest& o) {
  std::vector<int> out;
  if (!o.hosts.empty()) {
    for (const std::string& h : o.hosts) {
      int i = f.host_index(h);
      if (i < 0)
        return make_error(Code::kNotFound, 9410,
                          fmt::format("--hosts: '{}' is not a host of the fabric", h));
      out.push_back(i);
    }
    return out;
  }
  for (size_t i = 0; i < f.hosts.size(); ++i)
    if (address_is_local(f.hosts[i].ip)) out.push_back(static_cast<int>(i));
  if (out.empty())
    return make_error(Code::kNotFound, 9411,
                      "no host of the fabric has an address on this machine");
  return out;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "galaxy";
}

Result<int> spawn_daemon(const live::LiveFabric& f, int host, const LiveUpRequest& o) {
  const std::string log =
      fmt::format("/tmp/galaxy.{}.{}.log", f.name, f.hosts[static_cast<size_t>(host)].name);
  std::vector<std::string> args{self_exe(),        "fabricd",
                                "--fabric",        f.spec,
                                "--host",          f.hosts[static_cast<size_t>(host)].name,
                                "--op-timeout-ms", std::to_string(o.op_timeout_ms)};
  if (!o.impair.empty()) {
    args.push_back("--impair");
    args.push_back(o.impair);
  }
  pid_t pid = fork();
  if (pid < 0)
    return make_error(Code::kIoError, 9412, fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    setsid();
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return static_cast<int>(pid);
}

}  // namespace

Result<nlohmann::json> live_fabric_up(const LiveUpRequest& o) {
  auto t0 = std::chrono::steady_clock::now();
  auto f = live::parse_live_fabric(o.spec);
  if (!f.ok()) return f.error();
  auto hosts = chosen_hosts(*f, o);
  if (!hosts.ok()) return hosts.error();
  nlohmann::json daemons = nlohmann::json::array();
  for (int h : *hosts) {
    const std::string& name = f->hosts[static_cast<size_t>(h)].name;
    if (auto seg = live::Segment::attach(f->name, name);
        seg.ok() && live::process_alive((*seg)->header().daemon_pid.load()))
      return make_error(Code::kResourceExhausted, 9413,
                        fmt::format("host {} already runs a daemon (pid {}); `galaxy fabric down` "
                                    "first",
                                    name, (*seg)->header().daemon_pid.load()));
    auto pid = spawn_daemon(*f, h, o);
    if (!pid.ok()) return pid.error();
    daemons.push_back({{"host", name},
                       {"pid", *pid},
                       {"log", fmt::format("/tmp/galaxy.{}.{}.log", f->name, name)}});
  }
  // Wait for every daemon's segment and for the links between hosts to train.
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  for (size_t i = 0; i < hosts->size(); ++i) {
    const std::string& name = f->hosts[static_cast<size_t>((*hosts)[i])].name;
    for (;;) {
      auto seg = live::Segment::attach(f->name, name);
      if (seg.ok() && (*seg)->header().ready.load() &&
          (hosts->size() < f->hosts.size() || (*seg)->cross_host_links_up()))
        break;
      int status;
      pid_t pid = daemons[i]["pid"].get<int>();
      if (waitpid(pid, &status, WNOHANG) == pid)
        return make_error(Code::kIoError, 9414,
                          fmt::format("the daemon of host {} exited; see {}", name,
                                      daemons[i]["log"].get<std::string>()));
      if (std::chrono::steady_clock::now() > deadline)
        return make_error(
            Code::kTimeout, 9415,
            fmt::format("host {}: daemon or links not up within {} s", name, o.timeout_s));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const double daemons_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j{{"fabric", f->name},
                   {"spec", f->spec},
                   {"hosts", f->hosts.size()},
                   {"daemons", daemons},
                   {"daemons_up_ms", daemons_ms}};
  if (o.route) {
    RouteOptions ro;
    ro.session.fabric = o.spec;
    ro.session.host = f->hosts[static_cast<size_t>(hosts->front())].name;
    ro.session.json = o.json;
    ro.engine = o.engine;
    auto s = open_session(ro.session);
    if (!s.ok()) return s.error();
    nlohmann::json r;
    if (!route_phases(ro, *s, r))
      return make_error(Code::kIoError, 9416, "bring-up of the live fabric failed (see above)");
    if (!r["routes_verified"].get<bool>() || r["load_failed"].get<uint64_t>() > 0)
      return make_error(Code::kIoError, 9417,
                        fmt::format("live fabric routes not verified or not loaded: {}", r.dump()));
    j["bringup"] = r;
  }
  j["wall_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return j;
}

namespace {

void run_up(const LiveOptions& lo) {
  LiveUpRequest o = lo.up;
  o.route = !lo.no_route;
  auto r = live_fabric_up(o);
  if (!r.ok()) return report_error(r.error(), o.json);
  const nlohmann::json& j = *r;
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("live fabric %s up: %zu daemon(s) in %.0f ms\n",
              j["fabric"].get<std::string>().c_str(), j["daemons"].size(),
              j["daemons_up_ms"].get<double>());
  for (const auto& d : j["daemons"])
    std::printf("  host %s: galaxy fabricd pid %d, log %s\n", d["host"].get<std::string>().c_str(),
                d["pid"].get<int>(), d["log"].get<std::string>().c_str());
  if (j.contains("bringup"))
    std::printf(
        "  discovered %u NRCs, %u NICs; %s routing: %llu/%llu NIC pairs, %llu packets "
        "loaded\n",
        j["bringup"]["nrc"].get<uint32_t>(), j["bringup"]["nic"].get<uint32_t>(), o.engine.c_str(),
        static_cast<unsigned long long>(j["bringup"]["reachable_pairs"].get<uint64_t>()),
        static_cast<unsigned long long>(j["bringup"]["nic_pairs"].get<uint64_t>()),
        static_cast<unsigned long long>(j["bringup"]["load_packets"].get<uint64_t>()));
}

}  // namespace

Result<nlohmann::json> live_fabric_down(const std::string& spec) {
  auto f = live::parse_live_fabric(spec);
  if (!f.ok()) return f.error();
  nlohmann::json stopped = nlohmann::json::array();
  for (const live::LiveHost& h : f->hosts) {
    auto seg = live::Segment::attach(f->name, h.name);
    if (!seg.ok()) continue;
    int32_t pid = (*seg)->header().daemon_pid.load();
    bool alive = live::process_alive(pid);
    if (alive) kill(pid, SIGTERM);
    for (int i = 0; alive && i < 250 && live::process_alive(pid); ++i) {
      waitpid(pid, nullptr, WNOHANG);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (live::process_alive(pid)) kill(pid, SIGKILL);
    waitpid(pid, nullptr, WNOHANG);
    shm_unlink(live::Segment::shm_name(f->name, h.name).c_str());
    stopped.push_back({{"host", h.name}, {"pid", pid}, {"was_running", alive}});
  }
  return nlohmann::json{{"fabric", f->name}, {"stopped", stopped}};
}

namespace {

void run_down(const LiveOptions& lo) {
  const LiveUpRequest& o = lo.up;
  auto r = live_fabric_down(o.spec);
  if (!r.ok()) return report_error(r.error(), o.json);
  if (o.json)
    std::printf("%s\n", r->dump(2).c_str());
  else
    std::printf("live fabric %s: %zu host segment(s) removed\n",
                (*r)["fabric"].get<std::string>().c_str(), (*r)["stopped"].size());
}

void run_status(const LiveOptions& lo) {
  const LiveUpRequest& o = lo.up;
  auto f = live::parse_live_fabric(o.spec);
  if (!f.ok()) return report_error(f.error(), o.json);
  nlohmann::json hosts = nlohmann::json::array();
  bool all = true;
  for (const live::LiveHost& h : f->hosts) {
    auto seg = live::Segment::attach(f->name, h.name);
    if (!seg.ok()) {
      hosts.push_back({{"host", h.name}, {"running", false}});
      all = false;
      continue;
    }
    int32_t pid = (*seg)->header().daemon_pid.load();
    bool up = live::process_alive(pid) && (*seg)->header().ready.load();
    all &= up;
    hosts.push_back({{"host", h.name},
                     {"running", up},
                     {"pid", pid},
                     {"links_up", (*seg)->cross_host_links_up()},
                     {"route_generation", (*seg)->header().route_generation.load()}});
  }
  if (!all) set_exit_code(1);
  if (o.json) {
    std::printf("%s\n", nlohmann::json{{"fabric", f->name}, {"hosts", hosts}}.dump(2).c_str());
    return;
  }
  for (const auto& h : hosts)
    std::printf("%s: %s\n", h["host"].get<std::string>().c_str(),
                h["running"].get<bool>() ? "running" : "not running");
}

void common(CLI::App* c, LiveOptions& o) {
  c->add_option("--fabric", o.up.spec, "live:<topology>,hosts=<name>:<ip>[:<port>],...")
      ->required();
  c->add_flag("--json", o.up.json, "machine-readable output");
}

}  // namespace

void add_fabric_live_subcommands(CLI::App* fabric) {
  auto o = std::make_shared<LiveOptions>();
  auto* up = fabric->add_subcommand(
      "up", "Start the daemons of a live fabric on this machine, then discover, route and load");
  common(up, *o);
  up->add_option("--engine", o->up.engine, "routing engine (galaxy route --list)")
      ->capture_default_str();
  up->add_option("--hosts", o->up.hosts,
                 "hosts to start here (default: those with a local address)")
      ->delimiter(',');
  up->add_option("--impair", o->up.impair, "link impairment of every daemon: drop=P,dup=P,...");
  up->add_option("--op-timeout-ms", o->up.op_timeout_ms, "remote RDMA timeout of the daemons")
      ->capture_default_str()
      ->check(integer_in(1, 3600000));
  up->add_option("--timeout-s", o->up.timeout_s, "give up if daemons or links are not up by then")
      ->capture_default_str()
      ->check(real_in(0, 86400, Bounds::kAboveLow));
  up->add_flag("--no-route", o->no_route, "start the daemons only");
  up->callback([o]() { run_up(*o); });
  auto* down = fabric->add_subcommand("down", "Stop the daemons of a live fabric on this machine");
  common(down, *o);
  down->callback([o]() { run_down(*o); });
  auto* status = fabric->add_subcommand("status", "Which daemons of a live fabric run here");
  common(status, *o);
  status->callback([o]() { run_status(*o); });
}

}  // namespace galaxy::cli
