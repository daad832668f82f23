// A live fabric for tests: one `fabricd` per host as a forked process of the test (the test
// process stays single-threaded, so later forks of workers are safe), brought up by the
// management server's own code (discovery, routing, loading), torn down at the end.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/live/daemon.h"
#include "engine/live/live_spec.h"
#include "engine/live/segment.h"
#include "glex.h"
#include "glex/live_device.h"
#include "nm/discovery.h"
#include "nm/glex_port.h"
#include "nm/requester.h"
#include "nm/route_load.h"
#include "nm/routing.h"

namespace galaxy::live::testing {

// The bound on a wait for what takes milliseconds.
inline constexpr int32_t kWaitMs = 5000;

inline std::atomic<bool> g_daemon_stop{false};

class LiveFabricUnderTest {
 public:
  // hosts: 1 or 2 (all on 127.0.0.1, each on a port the kernel chose and held for its daemon).
  // netns: each host in its own network namespace, joined by a veth pair (two real "hosts"
  // with their own addresses and stacks); check namespaces_ok() after construction.
  explicit LiveFabricUnderTest(int hosts = 2, std::string topology = "fattree:k=4,levels=2",
                               DaemonOptions options = {}, bool netns = false) {
    static int instance = 0;
    ++instance;
    name_ = fmt::format("t{}x{}", getpid(), instance);
    std::vector<BoundUdp> sockets;  // loopback fabrics: one per host, each for its daemon
    if (netns) {
      if (!make_namespaces()) return;
      spec_ = fmt::format("live:{},name={},hosts=h1:{}:7400,h2:{}:7400", topology, name_, ns_ip(0),
                          ns_ip(1));
    } else {
      std::vector<std::string> hs;
      for (int h = 0; h < hosts; ++h) {
        sockets.push_back(bound_udp());
        hs.push_back(fmt::format("h{}:127.0.0.1:{}", h + 1, sockets.back().port));
      }
      spec_ = fmt::format("live:{},name={},hosts={}", topology, name_, fmt::join(hs, ","));
    }
    fabric_ = parse_live_fabric(spec_).value();
    for (size_t h = 0; h < fabric_.hosts.size(); ++h) {
      pid_t pid = fork();
      if (pid == 0) {
        if (netns && !enter_host(static_cast<int>(h))) _exit(4);
        struct sigaction sa {};
        sa.sa_handler = [](int) { g_daemon_stop.store(true); };
        sigaction(SIGTERM, &sa, nullptr);
        for (size_t o = 0; o < sockets.size(); ++o)
          if (o != h) {
            close(sockets[o].fd);
            close(sockets[o].board_fd);
          }
        if (h < sockets.size()) {
          options.socket_fd = sockets[h].fd;
          options.board_fd = sockets[h].board_fd;
        }
        auto d = FabricDaemon::start(fabric_, static_cast<int>(h), options);
        if (!d.ok()) {
          std::fprintf(stderr, "daemon: %s\n", d.error().to_string().c_str());
          _exit(3);
        }
        (*d)->run(g_daemon_stop);
        _exit(0);
      }
      daemons_.push_back(pid);
    }
    for (const BoundUdp& b : sockets) {
      close(b.fd);
      close(b.board_fd);
    }
  }
  ~LiveFabricUnderTest() {
    for (pid_t p : daemons_) kill(p, SIGTERM);
    for (pid_t p : daemons_) waitpid(p, nullptr, 0);
    for (const LiveHost& h : fabric_.hosts)
      shm_unlink(Segment::shm_name(fabric_.name, h.name).c_str());
    if (original_ns_ >= 0) {  // the test process went into a host's namespace: come back
      setns(original_ns_, CLONE_NEWNET);
      close(original_ns_);
    }
    if (!namespaces_.empty())
      for (const std::string& n : namespaces_)
        (void)!system(fmt::format("ip netns del {} 2>/dev/null", n).c_str());
  }

  bool namespaces_ok() const { return namespaces_ok_; }
  const std::string& namespace_error() const { return namespace_error_; }
  // Moves the calling process into host h's network namespace (netns fabrics; else a no-op), as
  // a process of that host: its doorbell and sockets are the host's.
  bool enter_host(int h) {
    if (namespaces_.empty()) return true;
    if (original_ns_ < 0 && getpid() == creator_)
      original_ns_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = ::open(fmt::format("/var/run/netns/{}", namespaces_[static_cast<size_t>(h)]).c_str(),
                    O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = setns(fd, CLONE_NEWNET) == 0;
    close(fd);
    return ok;
  }

  // Waits until every daemon is ready and the links between hosts are up.
  bool wait_up(double seconds = 10) {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    for (const LiveHost& h : fabric_.hosts) {
      for (;;) {
        auto seg = Segment::attach(fabric_.name, h.name);
        if (seg.ok() && (*seg)->header().ready.load() && (*seg)->cross_host_links_up()) break;
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    return true;
  }

  // Discovery, routing and loading through the management server on host h1.
  Status bring_up(const std::string& engine = "minhop") {
    if (!wait_up()) return make_error(Code::kTimeout, 1, "daemons or links not up");
    auto dev = glex::open_live_device(fabric_.name, "h1", -1);
    if (!dev.ok()) return dev.error();
    auto port = nm::GlexMgmtPort::open(dev->get());
    if (!port.ok()) return port.error();
    nm::RequesterOptions ro;
    ro.timeout = 200 * nm::kMs;
    nm::Requester req(**port, ro);
    nm::DiscoveryOptions d;
    d.pipelined = true;
    auto found = nm::discover(req, d);
    if (!found.ok()) return found.error();
    discovery_ = std::move(*found);
    auto routes = nm::compute_routes(discovery_.map, engine);
    if (!routes.ok()) return routes.error();
    auto load = nm::load_routes(req, discovery_.map, *routes, {});
    if (!load.ok()) return load.error();
    if (load->failed) return make_error(Code::kIoError, 2, "route load failed");
    return {};
  }

  // A register of chip `node` read by the management server (on host h1's first NIC, where
  // bring_up() discovered from), UINT64_MAX on failure.
  uint64_t read_register(uint32_t node, uint16_t addr) const {
    auto dev = glex::open_live_device(fabric_.name, "h1", static_cast<int32_t>(nic(0, 0)));
    if (!dev.ok()) return UINT64_MAX;
    auto port = nm::GlexMgmtPort::open(dev->get());
    if (!port.ok()) return UINT64_MAX;
    nm::RequesterOptions ro;
    ro.timeout = 200 * nm::kMs;
    nm::Requester req(**port, ro);
    const nm::FabricMap& m = discovery_.map;
    auto it = m.node_of.find(static_cast<uint16_t>(node));
    if (it == m.node_of.end()) return UINT64_MAX;
    uint64_t v = UINT64_MAX;
    req.submit(nm::MgmtRequest::read(m.target[it->second], addr), [&](const nm::MgmtReply& r) {
      if (r.status.ok()) v = r.response.data.value[0];
    });
    req.run();
    return v;
  }
  // Ports whose links run between hosts.
  std::vector<fabric::PortRef> crossing_ports() const {
    std::vector<fabric::PortRef> out;
    const fabric::Topology& t = fabric_.topology;
    for (uint32_t n = 0; n < t.num_nodes(); ++n)
      for (uint32_t p = 0; p < t.num_ports(n); ++p)
        if (fabric_.crosses_hosts({n, static_cast<uint8_t>(p)}))
          out.push_back({n, static_cast<uint8_t>(p)});
    return out;
  }

  const std::string& spec() const { return spec_; }
  const std::string& name() const { return name_; }
  const LiveFabric& fabric() const { return fabric_; }
  const nm::DiscoveryResult& discovery() const { return discovery_; }
  std::vector<pid_t>& daemons() { return daemons_; }
  // The k-th NIC (chip id) of host `host` (0 or 1).
  uint32_t nic(int host, int k = 0) const {
    int seen = 0;
    for (uint32_t i = 0; i < fabric_.topology.num_nics(); ++i) {
      uint32_t n = fabric_.topology.nic_node(i);
      if (fabric_.host_of[n] == host && seen++ == k) return n;
    }
    return UINT32_MAX;
  }
  const char* host_name(int host) const {
    return fabric_.hosts[static_cast<size_t>(host)].name.c_str();
  }

  // Opens a device on a NIC of this fabric (NULL on failure).
  glex_device_handle_t open(int host, int k = 0) const {
    glex_device_attr a{name_.c_str(), host_name(host), static_cast<int32_t>(nic(host, k))};
    glex_device_handle_t d = nullptr;
    if (glex_open_device(&a, &d) != GLEX_SUCCESS) return nullptr;
    return d;
  }

 private:
  std::string ns_ip(int h) const {
    return fmt::format("10.{}.{}.{}", 200 + subnet_ / 250, subnet_ % 250, h + 1);
  }
  bool make_namespaces() {
    subnet_ = static_cast<int>(getpid() % 12500);
    for (int h = 0; h < 2; ++h) namespaces_.push_back(fmt::format("{}h{}", name_, h + 1));
    const std::string va = fmt::format("gx{}a", getpid() % 100000),
                      vb = fmt::format("gx{}b", getpid() % 100000);
    const std::string script = fmt::format(
        "ip netns add {0} && ip netns add {1} && ip link add {2} type veth peer name {3} && "
        "ip link set {2} netns {0} && ip link set {3} netns {1} && "
        "ip -n {0} addr add {4}/24 dev {2} && ip -n {1} addr add {5}/24 dev {3} && "
        "ip -n {0} link set {2} up && ip -n {1} link set {3} up && "
        "ip -n {0} link set lo up && ip -n {1} link set lo up",
        namespaces_[0], namespaces_[1], va, vb, ns_ip(0), ns_ip(1));
    if (system((script + " 2>/tmp/galaxy-netns.err").c_str()) != 0) {
      namespace_error_ =
          "the kernel refused network namespaces or veth (ip netns add / ip link "
          "add): see /tmp/galaxy-netns.err";
      return false;
    }
    namespaces_ok_ = true;
    return true;
  }

  // A UDP socket bound to a port of loopback the kernel chose, held from here until the daemon
  // takes it over (DaemonOptions::socket_fd): tests run in parallel under ctest, and a port
  // merely seen free could be taken by another fabric's daemon before this one binds it. The
  // monitor board listens on TCP at the same port number, so a TCP socket bound there is held
  // and handed over the same way (DaemonOptions::board_fd); a port whose TCP number is taken
  // (another test's connection) is given back and another chosen.
 public:
  struct BoundUdp {
    int fd = -1;
    int port = 0;
    int board_fd = -1;
  };
  static BoundUdp bound_udp() {
    for (int attempt = 0;; ++attempt) {
      BoundUdp b;
      b.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      if (bind(b.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
          getsockname(b.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        return b;
      b.port = ntohs(a.sin_port);
      b.board_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const int one = 1;
      setsockopt(b.board_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind(b.board_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return b;
      close(b.board_fd);
      b.board_fd = -1;
      if (attempt == 50) return b;  // the daemon binds its board port itself
      close(b.fd);
    }
  }

 private:
  std::string name_;
  std::string spec_;
  LiveFabric fabric_;
  std::vector<pid_t> daemons_;
  nm::DiscoveryResult discovery_;
  std::vector<std::string> namespaces_;
  bool namespaces_ok_ = false;
  int original_ns_ = -1;
  pid_t creator_ = getpid();
  std::string namespace_error_;
  int subnet_ = 0;
};

// A test's volume from the environment (the sanitizer build moves less), else `fallback`.
inline uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// A process of a two-rank libglex job on a host of the fabric (GLEX_RANK, GLEX_SIZE and a
// rendezvous directory, as a launcher would set them).
struct Job {
  glex_device_handle_t dev = nullptr;
  glex_ep_handle_t ep = nullptr;
  glex_ep_addr_t peer = 0;
  bool ok = false;
};

inline Job join(LiveFabricUnderTest& f, int host, uint32_t rank, const std::string& dir) {
  Job j;
  if (!f.enter_host(host)) return j;
  setenv("GLEX_RANK", std::to_string(rank).c_str(), 1);
  setenv("GLEX_SIZE", "2", 1);
  setenv("GLEX_RENDEZVOUS", dir.c_str(), 1);
  j.dev = f.open(host, 0);
  glex_ep_attr attr{-1};
  if (!j.dev || glex_create_ep(j.dev, &attr, &j.ep) != GLEX_SUCCESS) return j;
  uint32_t r, n;
  glex_ep_addr_t* addrs;
  if (glex_bootstrap(j.ep, &r, &n, &addrs) != GLEX_SUCCESS || r != rank || n != 2) return j;
  j.peer = addrs[1 - rank];
  std::free(addrs);
  j.ok = true;
  return j;
}

// Retries while the way is busy, for up to 60 s: on a loaded machine the daemon that drains the
// egress ring may not run for a good part of a second (a count of tries ran out in ~0.1 s).
inline bool send_mp(Job& j, const void* d, uint32_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (uint64_t tries = 0;; ++tries) {
    glex_ret_t r = glex_send_mp(j.ep, j.peer, d, n, 0);
    if (r == GLEX_SUCCESS) return true;
    if (r != GLEX_BUSY) {
      std::fprintf(stderr, "send: %s\n", glex_last_error());
      return false;
    }
    if (tries % 1024 == 1023) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "send: busy for 60 s: %s\n", glex_last_error());
        return false;
      }
      std::this_thread::yield();
    }
  }
}

// Runs `body` in a forked child; returns its exit status (0 = the body returned true).
inline pid_t spawn(const std::function<bool()>& body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body() ? 0 : 1);
  return pid;
}
inline int wait_exit(pid_t pid, int timeout_s = 60) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return 255;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// The last libglex error names `part`.
inline ::testing::AssertionResult last_error_has(const std::string& part) {
  if (std::strstr(glex_last_error(), part.c_str())) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "glex_last_error() = '" << glex_last_error() << "' lacks '" << part << "'";
}

// A device on the k-th NIC of a host with one endpoint, both closed at the end of the scope.
struct Port {
  glex_device_handle_t dev = nullptr;
  glex_ep_handle_t ep = nullptr;
  Port(const LiveFabricUnderTest& f, int host, int k, int32_t vp = -1) {
    dev = f.open(host, k);
    glex_ep_attr attr{vp};
    if (dev && glex_create_ep(dev, &attr, &ep) != GLEX_SUCCESS) ep = nullptr;
  }
  ~Port() {
    if (ep) glex_destroy_ep(ep);
    if (dev) glex_close_device(dev);
  }
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;
  bool ok() const { return ep != nullptr; }
  glex_ep_addr_t addr() const { return glex_ep_addr(ep); }
};

// Stops the fabric's daemons for a scope (or until resume()), and lets them go on whatever
// happens in it: what still crosses between hosts then goes from process to process.
class DaemonsStopped {
 public:
  explicit DaemonsStopped(LiveFabricUnderTest& f) : pids_(f.daemons()) {
    for (pid_t p : pids_) kill(p, SIGSTOP);
  }
  ~DaemonsStopped() { resume(); }
  void resume() {
    for (pid_t p : pids_) kill(p, SIGCONT);
    pids_.clear();
  }
  DaemonsStopped(const DaemonsStopped&) = delete;
  DaemonsStopped& operator=(const DaemonsStopped&) = delete;

 private:
  std::vector<pid_t> pids_;
};

// One brought-up fabric of two hosts for each test suite that derives from this one.
class LiveTwoHostSuite : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    fabric_ = new LiveFabricUnderTest(2);
    Status s = fabric_->bring_up();
    error_ = s.ok() ? "" : s.error().to_string();
  }
  static void TearDownTestSuite() {
    delete fabric_;
    fabric_ = nullptr;
  }

 protected:
  void SetUp() override { ASSERT_TRUE(error_.empty()) << "bring-up: " << error_; }
  static LiveFabricUnderTest& f() { return *fabric_; }

 private:
  static inline LiveFabricUnderTest* fabric_ = nullptr;
  static inline std::string error_;
};

}  // namespace galaxy::live::testing
