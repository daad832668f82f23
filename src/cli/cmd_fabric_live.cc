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

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "base/json_text.h"
#include "cli/fabric_live.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/route_phases.h"
#include "cli/run_control.h"
#include "engine/live/link.h"
#include "engine/live/live_spec.h"
#include "engine/live/segment.h"
#include "glex.h"
#include "nm/scan.h"

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
                                "--op-timeout-ms", std::to_string(o.op_timeout_ms),
                                "--spin-us",       std::to_string(o.spin_us)};
  if (o.frame_bytes != 0) {
    args.push_back("--frame-bytes");
    args.push_back(std::to_string(o.frame_bytes));
  }
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

using Clock = std::chrono::steady_clock;

// The last line of a daemon's log: why it stopped.
std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last = "no log";
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// The host runs a daemon on this machine (its segment is here and its process lives).
bool runs_here(const live::LiveFabric& f, size_t host) {
  auto seg = live::Segment::attach(f.name, f.hosts[host].name);
  return seg.ok() && live::process_alive((*seg)->header().daemon_pid.load());
}

// The daemons of a `fabric up` in progress, for its interrupt handler: an interrupted `fabric up`
// (Ctrl-C, a closed terminal) has failed too, and the daemons it started are detached (their own
// session), so the terminal's signal does not reach them. Kept by Launched, read by the handler.
constexpr int kMaxLaunched = 256;
pid_t g_launched[kMaxLaunched];
volatile sig_atomic_t g_launched_count = 0;

void on_interrupt(int sig) {
  for (sig_atomic_t i = 0; i < g_launched_count; ++i) kill(g_launched[i], SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}

// The daemons this `fabric up` started. Unless kept, they are stopped again, and their segments
// removed: a failed or interrupted `fabric up` leaves nothing of its own running.
class Launched {
 public:
  explicit Launched(const live::LiveFabric& f) : f_(f) {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &previous_[i]);
  }
  Launched(const Launched&) = delete;
  Launched& operator=(const Launched&) = delete;
  ~Launched() {
    stop();
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }

  void add(int host, pid_t pid) {
    daemons_.push_back({host, pid});
    if (g_launched_count < kMaxLaunched) {
      g_launched[g_launched_count] = pid;
      g_launched_count = g_launched_count + 1;
    }
  }
  void keep() {
    g_launched_count = 0;
    daemons_.clear();
  }
  // A daemon that exited by itself and was reaped: its pid is no longer ours to signal.
  void exited(pid_t pid) {
    std::erase_if(daemons_, [&](const Daemon& d) { return d.pid == pid; });
    g_launched_count = 0;
    for (const Daemon& d : daemons_)
      if (g_launched_count < kMaxLaunched) {
        g_launched[g_launched_count] = d.pid;
        g_launched_count = g_launched_count + 1;
      }
  }
  // Stops every daemon still held; says which (for the error that caused it).
  std::string stop() {
    g_launched_count = 0;
    if (daemons_.empty()) return "";
    for (const Daemon& d : daemons_) kill(d.pid, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    std::vector<bool> gone(daemons_.size(), false);
    for (size_t left = daemons_.size(); left > 0 && Clock::now() < deadline;) {
      for (size_t i = 0; i < daemons_.size(); ++i)
        if (!gone[i]) {
          const pid_t r = waitpid(daemons_[i].pid, nullptr, WNOHANG);
          if (r == daemons_[i].pid || (r < 0 && errno == ECHILD)) {
            gone[i] = true;
            --left;
          }
        }
      if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string which;
    for (size_t i = 0; i < daemons_.size(); ++i) {
      const Daemon& d = daemons_[i];
      if (!gone[i]) {
        kill(d.pid, SIGKILL);
        waitpid(d.pid, nullptr, 0);
      }
      // Its segment, unless another daemon of the host has taken the name since.
      const std::string& host = f_.hosts[static_cast<size_t>(d.host)].name;
      auto seg = live::Segment::attach(f_.name, host);
      if (seg.ok() && !live::process_alive((*seg)->header().daemon_pid.load()))
        shm_unlink(live::Segment::shm_name(f_.name, host).c_str());
      which += fmt::format("{}{} (pid {})", which.empty() ? "" : ", ", host, d.pid);
    }
    daemons_.clear();
    return which;
  }

 private:
  struct Daemon {
    int host;
    pid_t pid;
  };
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  const live::LiveFabric& f_;
  std::vector<Daemon> daemons_;
  std::array<struct sigaction, kSignals.size()> previous_{};
};

// Waits until every started daemon is ready and every link between a started host and a host
// that runs (started now, or already running here) has trained at both ends: before that,
// discovery from the management host would not reach the started hosts' chips. Progress goes to
// stderr once a second unless `quiet`.
Status wait_for_links(const live::LiveFabric& f, const std::vector<int>& started,
                      const std::vector<bool>& running, const nlohmann::json& daemons,
                      Launched& launched, Clock::time_point deadline, double timeout_s,
                      bool quiet) {
  std::vector<bool> is_started(f.hosts.size(), false);
  for (int h : started) is_started[static_cast<size_t>(h)] = true;
  auto last_note = Clock::now();
  const auto t0 = last_note;
  for (;;) {
    std::string waiting;  // hosts not there yet, with their links
    for (size_t i = 0; i < started.size(); ++i) {
      const std::string& name = f.hosts[static_cast<size_t>(started[i])].name;
      int status;
      const pid_t pid = daemons[i]["pid"].get<int>();
      if (waitpid(pid, &status, WNOHANG) == pid) {
        launched.exited(pid);
        const std::string log = daemons[i]["log"].get<std::string>();
        return make_error(
            Code::kIoError, 9414,
            fmt::format("the daemon of host {} exited ({}); see {}", name, last_line(log), log));
      }
      auto seg = live::Segment::attach(f.name, name);
      if (!seg.ok() || !(*seg)->header().ready.load()) {
        waiting += fmt::format("{}{}: daemon starting", waiting.empty() ? "" : "; ", name);
        continue;
      }
    }
    // Both ends of each link: the started host's, and the running peer's.
    for (size_t h = 0; h < f.hosts.size() && waiting.empty(); ++h) {
      if (!running[h]) continue;
      std::vector<bool> peers(f.hosts.size(), false);
      for (size_t o = 0; o < f.hosts.size(); ++o)
        peers[o] = o != h && running[o] && (is_started[h] || is_started[o]);
      auto seg = live::Segment::attach(f.name, f.hosts[h].name);
      if (!seg.ok()) continue;  // not on this machine: its end is not ours to see
      const live::Segment::LinkTally t = (*seg)->links_to(peers);
      if (t.up < t.total)
        waiting += fmt::format("{}{}: {} of {} links to other hosts up",
                               waiting.empty() ? "" : "; ", f.hosts[h].name, t.up, t.total);
    }
    if (waiting.empty()) return {};
    if (Clock::now() > deadline)
      return make_error(Code::kTimeout, 9415,
                        fmt::format("daemons or links not up within {} s: {}", timeout_s, waiting));
    if (!quiet && Clock::now() - last_note >= std::chrono::seconds(1)) {
      std::fprintf(stderr, "galaxy fabric up: %.1f s, waiting: %s\n", ms_since(t0) / 1e3,
                   waiting.c_str());
      last_note = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// An MP each way between the management host's first NIC and every NIC of the hosts started:
// data move through the tables just loaded, not only management packets.
Status probe_data(const live::LiveFabric& f, int from_host, const std::vector<int>& hosts,
                  int32_t timeout_ms) {
  const fabric::Topology& t = f.topology;
  auto nics_of = [&](int host) {
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < t.num_nics(); ++i)
      if (f.host_of[t.nic_node(i)] == host) out.push_back(t.nic_node(i));
    return out;
  };
  struct End {
    glex_device_handle_t dev = nullptr;
    glex_ep_handle_t ep = nullptr;
    ~End() {
      if (ep) glex_destroy_ep(ep);
      if (dev) glex_close_device(dev);
    }
  };
  auto open_end = [&](int host, uint32_t nic, End& e) -> Status {
    glex_device_attr a{f.name.c_str(), f.hosts[static_cast<size_t>(host)].name.c_str(),
                       static_cast<int32_t>(nic)};
    glex_ep_attr ea{-1};
    if (glex_open_device(&a, &e.dev) != GLEX_SUCCESS ||
        glex_create_ep(e.dev, &ea, &e.ep) != GLEX_SUCCESS)
      return make_error(Code::kIoError, 9418,
                        fmt::format("data check: cannot open NIC {} of host {}: {}", nic,
                                    f.hosts[static_cast<size_t>(host)].name, glex_last_error()));
    return {};
  };
  auto send = [&](glex_ep_handle_t from, glex_ep_addr_t to) {
    const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      glex_ret_t r = glex_send_mp(from, to, "galaxy", 6, 0);
      if (r != GLEX_BUSY || Clock::now() > until) return r;
      std::this_thread::yield();
    }
  };
  const std::vector<uint32_t> from_nics = nics_of(from_host);
  if (from_nics.empty()) return {};
  End me;
  GALAXY_TRY(open_end(from_host, from_nics.front(), me));
  for (int h : hosts)
    for (uint32_t nic : nics_of(h)) {
      if (h == from_host && nic == from_nics.front()) continue;
      End them;
      GALAXY_TRY(open_end(h, nic, them));
      glex_mp mp;
      const std::string where = fmt::format(
          "NIC {} of host {} and NIC {} of host {}", from_nics.front(),
          f.hosts[static_cast<size_t>(from_host)].name, nic, f.hosts[static_cast<size_t>(h)].name);
      if (send(me.ep, glex_ep_addr(them.ep)) != GLEX_SUCCESS ||
          glex_recv_mp(them.ep, timeout_ms, &mp) != GLEX_SUCCESS ||
          send(them.ep, glex_ep_addr(me.ep)) != GLEX_SUCCESS ||
          glex_recv_mp(me.ep, timeout_ms, &mp) != GLEX_SUCCESS)
        return make_error(Code::kTimeout, 9419,
                          fmt::format("data check: no MP each way between {} within {} ms: {}",
                                      where, timeout_ms, glex_last_error()));
    }
  return {};
}

// Discovery, routing, verification and loading from the management host; then, where every
// host runs, the whole fabric must have been found, and MPs must cross to the started hosts.
// A result short of that is retried until the deadline (a link may still settle).
Result<nlohmann::json> bring_up(const LiveUpRequest& o, const live::LiveFabric& f, int server_host,
                                const std::vector<int>& started, bool all_running,
                                Clock::time_point deadline) {
  for (int attempt = 1;; ++attempt) {
    RouteOptions ro;
    ro.session.fabric = o.spec;
    ro.session.host = f.hosts[static_cast<size_t>(server_host)].name;
    ro.session.json = o.json;
    ro.engine = o.engine;
    auto s = open_session(ro.session);
    if (!s.ok()) return s.error();
    nlohmann::json r;
    if (!route_phases(ro, *s, r))
      return make_error(Code::kIoError, 9416, "bring-up of the live fabric failed (see above)");
    r["server_host"] = f.hosts[static_cast<size_t>(server_host)].name;
    r["attempts"] = attempt;
    const nm::Shortfall gone = nm::shortfall(s->discovery.map, s->plan());
    nlohmann::json unreached = nlohmann::json::array();
    for (uint16_t c : gone.unreached) unreached.push_back(s->plan().name(c));
    r["unreached"] = unreached;
    Status problem;
    if (!r["routes_verified"].get<bool>() || r["load_failed"].get<uint64_t>() > 0)
      problem = make_error(
          Code::kIoError, 9417,
          fmt::format("live fabric routes not verified or not loaded: {}", json_text(r)));
    else if (all_running && !gone.unreached.empty())
      problem = make_error(
          Code::kIoError, 9423,
          fmt::format("every host runs, but discovery from host {} did not reach {} chips: {}",
                      f.hosts[static_cast<size_t>(server_host)].name, gone.unreached.size(),
                      json_text(unreached)));
    else
      problem = probe_data(f, server_host, started, 1000);
    if (problem.ok()) return r;
    if (Clock::now() > deadline) return problem.error();
    if (!o.json)
      std::fprintf(stderr, "galaxy fabric up: bring-up attempt %d: %s; again\n", attempt,
                   problem.error().to_string().c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

Result<nlohmann::json> live_fabric_up(const LiveUpRequest& o) {
  const auto t0 = Clock::now();
  auto f = live::parse_live_fabric(o.spec);
  if (!f.ok()) return f.error();
  auto hosts = chosen_hosts(*f, o);
  if (!hosts.ok()) return hosts.error();
  for (int h : *hosts)
    if (auto seg = live::Segment::attach(f->name, f->hosts[static_cast<size_t>(h)].name);
        seg.ok() && live::process_alive((*seg)->header().daemon_pid.load()))
      return make_error(
          Code::kResourceExhausted, 9413,
          fmt::format("host {} already runs a daemon (pid {}); `galaxy fabric down` "
                      "first",
                      f->hosts[static_cast<size_t>(h)].name, (*seg)->header().daemon_pid.load()));
  // Hosts already running here (a rejoin: `--hosts` names the ones that went away).
  std::vector<bool> running(f->hosts.size(), false);
  for (size_t h = 0; h < f->hosts.size(); ++h) running[h] = runs_here(*f, h);
  Launched launched(*f);
  // Every failure from here on stops what was started, and says so.
  auto fail = [&](const Error& e) -> Result<nlohmann::json> {
    const std::string stopped = launched.stop();
    if (stopped.empty()) return e;
    return make_error(e.code, e.id,
                      fmt::format("{} (stopped the daemons started: {})", e.message, stopped));
  };
  nlohmann::json daemons = nlohmann::json::array();
  for (int h : *hosts) {
    const std::string& name = f->hosts[static_cast<size_t>(h)].name;
    auto pid = spawn_daemon(*f, h, o);
    if (!pid.ok()) return fail(pid.error());
    launched.add(h, *pid);
    running[static_cast<size_t>(h)] = true;
    daemons.push_back({{"host", name},
                       {"pid", *pid},
                       {"log", fmt::format("/tmp/galaxy.{}.{}.log", f->name, name)}});
  }
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  if (Status w =
          wait_for_links(*f, *hosts, running, daemons, launched, deadline, o.timeout_s, o.json);
      !w.ok())
    return fail(w.error());
  const double daemons_ms = ms_since(t0);
  nlohmann::json j{{"fabric", f->name},
                   {"spec", f->spec},
                   {"hosts", f->hosts.size()},
                   {"daemons", daemons},
                   {"daemons_up_ms", daemons_ms}};
  if (o.route) {
    // The management server runs on the first host that runs here, as at the first bring-up;
    // its tables reach the started hosts through the links just trained.
    int server = hosts->front();
    for (size_t h = 0; h < f->hosts.size(); ++h)
      if (running[h]) {
        server = static_cast<int>(h);
        break;
      }
    const bool all_running = std::all_of(running.begin(), running.end(), [](bool r) { return r; });
    auto r = bring_up(o, *f, server, *hosts, all_running, deadline);
    if (!r.ok()) return fail(r.error());
    j["bringup"] = *r;
  }
  launched.keep();
  j["wall_ms"] = ms_since(t0);
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
    std::printf("%s\n", json_text(j, 2).c_str());
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
  if (j.contains("bringup"))
    std::printf("  routed from host %s; MPs cross to every NIC started; up in %.0f ms\n",
                j["bringup"]["server_host"].get<std::string>().c_str(), j["wall_ms"].get<double>());
}

}  // namespace

Result<std::string> private_loopback_fabric(const std::string& tag, int hosts, bool json) {
  const int port = 20000 + getpid() % 20000;
  std::string spec =
      fmt::format("live:fattree:k=4,levels=2,name={}{},hosts=h1:127.0.0.1:{}", tag, getpid(), port);
  if (hosts > 1) spec += fmt::format(",h2:127.0.0.1:{}", port + 1);
  LiveUpRequest rq;
  rq.spec = spec;
  rq.json = json;
  auto up = live_fabric_up(rq);
  if (!up.ok()) return up.error();
  return spec;
}

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
    std::printf("%s\n",
                json_text(nlohmann::json{{"fabric", f->name}, {"hosts", hosts}}, 2).c_str());
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
  up->add_option("--spin-us", o->up.spin_us, "each daemon polls this long before sleeping")
      ->capture_default_str()
      ->check(integer_in(0, 1000000));
  up->add_option("--frame-bytes", o->up.frame_bytes,
                 "each daemon's largest link frame to another host, in bytes of items (default: "
                 "one IP packet of the path's MTU, at most 32768)")
      ->check(integer_in(live::kMinFrameBytes, live::kMaxLinkPayload));
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
