// Every call of the libglex C API (include/glex.h) on the live engine, with its error cases:
// devices, endpoints, registered memory, MPs, RDMA of any length and byte alignment on one host
// and across hosts (memory of this process from malloc or glex_alloc_mem, memory of another
// process), completion events, the CQ, fences, bootstrap, error strings and one management round
// trip. Each suite brings one two-host fabric up once (daemons are processes, bring-up runs
// discovery, routing and loading). Children are forked while the test process has no threads;
// they report through their exit code, never through gtest.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "chip/refusal.h"
#include "chip/registers.h"
#include "engine/live/directory.h"
#include "live_fixture.h"

namespace galaxy::live::testing {
namespace {

using Clock = std::chrono::steady_clock;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

constexpr uint32_t kRw = GLEX_MEM_READ | GLEX_MEM_WRITE;
constexpr uint8_t kSentinel = 0xA5;

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// Memory registered on a device: from malloc, or shared (glex_alloc_mem).
struct Registered {
  glex_device_handle_t dev = nullptr;
  uint8_t* data = nullptr;
  uint64_t len = 0;
  glex_mem_handle_t mh = 0;
  bool shared = false;
  glex_ret_t status = GLEX_NO_RESOURCE;
  Registered(glex_device_handle_t d, uint64_t n, uint32_t access, bool sh = false)
      : dev(d), len(n), shared(sh) {
    void* p = nullptr;
    if (shared) {
      if (glex_alloc_mem(dev, n, &p) != GLEX_SUCCESS) p = nullptr;
    } else {
      p = std::malloc(n);
    }
    data = static_cast<uint8_t*>(p);
    if (data) {
      std::memset(data, 0, n);
      status = glex_register_mem(dev, data, n, access, &mh);
    }
  }
  ~Registered() {
    if (status == GLEX_SUCCESS) glex_deregister_mem(dev, mh);
    if (data && shared) glex_free_mem(dev, data);
    if (data && !shared) std::free(data);
  }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  bool ok() const { return status == GLEX_SUCCESS; }
  uint64_t addr(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(data) + off; }
};

// Runs `body` in a forked child that dies with the test process; its result is the exit code.
pid_t fork_child(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    _exit(body());
  }
  return pid;
}

glex_ret_t send_retry(glex_ep_handle_t ep, glex_ep_addr_t to, const void* data, uint32_t len,
                      uint32_t flags = 0) {
  for (int i = 0; i < 200000; ++i) {
    glex_ret_t r = glex_send_mp(ep, to, data, len, flags);
    if (r != GLEX_BUSY) return r;
    usleep(10);
  }
  return GLEX_BUSY;
}

uint8_t pattern_at(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  return static_cast<uint8_t>(x ^ (x >> 17));
}
void fill_pattern(uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; ++i) p[i] = pattern_at(seed, i);
}

AssertionResult same_bytes(const uint8_t* got, const uint8_t* want, uint64_t n, const char* what) {
  if (n == 0 || std::memcmp(got, want, n) == 0) return AssertionSuccess();
  for (uint64_t i = 0;; ++i)
    if (got[i] != want[i])
      return AssertionFailure() << what << ": byte " << i << " of " << n << " is " << int{got[i]}
                                << ", expected " << int{want[i]};
}
AssertionResult all_bytes(const uint8_t* got, uint64_t n, uint8_t v, const char* what) {
  std::vector<uint8_t> want(n, v);
  return same_bytes(got, want.data(), n, what);
}

// The next CQ entry: for an operation on this host it is there when the call returned; across
// hosts it comes within kWaitMs.
AssertionResult next_entry(glex_ep_handle_t ep, bool immediate, glex_cq_entry* e) {
  *e = {};
  glex_ret_t r = immediate ? glex_poll_cq(ep, e) : glex_wait_cq(ep, kWaitMs, e);
  if (r != GLEX_SUCCESS)
    return AssertionFailure() << (immediate ? "poll" : "wait") << " CQ: " << glex_error_string(r)
                              << " " << glex_last_error();
  return AssertionSuccess();
}

AssertionResult completed_ok(glex_ep_handle_t ep, bool immediate, uint32_t op, uint64_t cookie,
                             uint64_t bytes) {
  glex_cq_entry e;
  if (AssertionResult r = next_entry(ep, immediate, &e); !r) return r;
  if (e.status != GLEX_SUCCESS || e.op != op || e.cookie != cookie || e.bytes != bytes)
    return AssertionFailure() << "entry op " << e.op << " status " << glex_error_string(e.status)
                              << " cookie " << e.cookie << " bytes " << e.bytes << " reason '"
                              << e.reason << "'; expected op " << op << " success cookie " << cookie
                              << " bytes " << bytes;
  return AssertionSuccess();
}

AssertionResult failed_with(glex_ep_handle_t ep, bool immediate, uint32_t op, uint64_t cookie,
                            glex_ret_t status, const char* reason) {
  glex_cq_entry e;
  if (AssertionResult r = next_entry(ep, immediate, &e); !r) return r;
  if (e.status != status || e.op != op || e.cookie != cookie || e.bytes != 0 || e.error_id == 0 ||
      !std::strstr(e.reason, reason))
    return AssertionFailure() << "entry op " << e.op << " status " << glex_error_string(e.status)
                              << " cookie " << e.cookie << " bytes " << e.bytes << " error_id "
                              << e.error_id << " reason '" << e.reason << "'; expected op " << op
                              << " " << glex_error_string(status) << " cookie " << cookie
                              << " reason '" << reason << "'";
  return AssertionSuccess();
}

glex_rdma_req rdma_req(glex_ep_addr_t target, uint32_t op, const void* local,
                       glex_mem_handle_t local_mh, uint64_t len, uint64_t remote,
                       glex_mem_handle_t remote_mh, uint32_t flags, uint64_t cookie) {
  glex_rdma_req r{};
  r.target = target;
  r.op = op;
  r.flags = flags;
  r.local_addr = const_cast<void*>(local);
  r.local_mh = local_mh;
  r.len = len;
  r.remote_addr = remote;
  r.remote_mh = remote_mh;
  r.cookie = cookie;
  return r;
}

// Target memory: in this process (pid 0) or in another one, which the test reads and writes
// with process_vm_readv/writev, beside the library.
struct Memory {
  pid_t pid = 0;
  uint64_t addr = 0;
  uint64_t len = 0;
  glex_mem_handle_t mh = 0;
  bool write(uint64_t off, const void* p, uint64_t n) const {
    return copy(true, const_cast<void*>(p), off, n);
  }
  bool read(uint64_t off, void* p, uint64_t n) const { return copy(false, p, off, n); }

 private:
  bool copy(bool to_target, void* p, uint64_t off, uint64_t n) const {
    if (off + n > len) return false;
    if (pid == 0) {
      void* t = reinterpret_cast<void*>(addr + off);
      std::memcpy(to_target ? t : p, to_target ? p : t, n);
      return true;
    }
    for (uint64_t done = 0; done < n;) {
      iovec l{static_cast<uint8_t*>(p) + done, n - done};
      iovec r{reinterpret_cast<void*>(addr + off + done), n - done};
      ssize_t k = to_target ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                            : process_vm_readv(pid, &l, 1, &r, 1, 0);
      if (k <= 0) return false;
      done += static_cast<uint64_t>(k);
    }
    return true;
  }
};

struct TargetInfo {
  uint64_t addr;
  uint64_t mh;
  uint64_t len;
};

// Another process owning target memory: it opens the k-th NIC of `host`, allocates `len` bytes
// (shared: glex_alloc_mem, else malloc), registers them for read and write, sends a TargetInfo
// to `parent` and stays until an MP "done" comes.
class ChildTarget {
 public:
  ChildTarget(const LiveFabricUnderTest& f, int host, int k, bool shared, uint64_t len,
              glex_ep_handle_t parent)
      : parent_(parent) {
    const glex_ep_addr_t to = glex_ep_addr(parent);
    pid_ = fork_child([&]() -> int {
      Port p(f, host, k);
      if (!p.ok()) return 10;
      void* buf = nullptr;
      if (shared ? glex_alloc_mem(p.dev, len, &buf) != GLEX_SUCCESS
                 : (buf = std::malloc(len)) == nullptr)
        return 11;
      std::memset(buf, 0, len);
      glex_mem_handle_t mh;
      if (glex_register_mem(p.dev, buf, len, kRw, &mh) != GLEX_SUCCESS) return 12;
      TargetInfo ti{reinterpret_cast<uint64_t>(buf), mh, len};
      if (send_retry(p.ep, to, &ti, sizeof ti) != GLEX_SUCCESS) return 13;
      glex_mp mp;
      if (glex_recv_mp(p.ep, 60000, &mp) != GLEX_SUCCESS) return 14;
      return mp.len == 4 && std::memcmp(mp.data, "done", 4) == 0 ? 0 : 15;
    });
    glex_mp mp;
    if (glex_recv_mp(parent, kWaitMs, &mp) != GLEX_SUCCESS || mp.len != sizeof(TargetInfo)) return;
    TargetInfo ti;
    std::memcpy(&ti, mp.data, sizeof ti);
    mem = Memory{pid_, ti.addr, ti.len, ti.mh};
    ep = mp.src;
    ok_ = true;
  }
  ~ChildTarget() { kill_now(); }
  ChildTarget(const ChildTarget&) = delete;
  ChildTarget& operator=(const ChildTarget&) = delete;
  bool ok() const { return ok_; }
  // Lets the child go; its exit status (0: it received "done").
  int finish() {
    if (pid_ <= 0) return -1;
    if (send_retry(parent_, ep, "done", 4) != GLEX_SUCCESS) return -2;
    const int st = wait_exit(pid_, 10);
    pid_ = 0;
    return st;
  }
  // Ends the child now and reaps it: its pid is gone when this returns.
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  Memory mem;
  glex_ep_addr_t ep = 0;

 private:
  glex_ep_handle_t parent_;
  pid_t pid_ = 0;
  bool ok_ = false;
};

// Where the target NIC is, seen from the initiator on the first NIC of host 0. On the same host
// it is the NIC beside it on the same NRC, so the route never leaves the host whatever the
// routing engine chose (see EveryNicReachesEveryNicWithMpAndPut for the other pairs).
struct Side {
  const char* name;
  int host;
  int k;
};
void PrintTo(const Side& s, std::ostream* os) {
  *os << s.name;
}
constexpr Side kSameHost{"same_host", 0, 1};
constexpr Side kCrossHost{"cross_host", 1, 0};

// One brought-up two-host fabric per test suite.
class LiveApiSuite : public LiveTwoHostSuite {};

// ---- Devices ----------------------------------------------------------------------------------

class LiveApiDevice : public LiveApiSuite {};

// A process that forks just after it opened a device (its NIC thread just started) gives the
// child a whole allocator and no lock taken: the child opens its own device, sends, and exits.
TEST_F(LiveApiDevice, AChildForkedJustAfterADeviceOpenedOpensItsOwn) {
  const LiveFabricUnderTest& fab = f();
  for (int i = 0; i < 20; ++i) {
    Port parent(fab, 0, 0);
    ASSERT_TRUE(parent.ok()) << glex_last_error();
    const glex_ep_addr_t to = parent.addr();
    const pid_t pid = fork_child([&]() -> int {
      Port c(fab, 1, 0);  // another host: a NIC thread and a direct link of its own
      if (!c.ok()) return 10;
      return send_retry(c.ep, to, &i, sizeof i) == GLEX_SUCCESS ? 0 : 11;
    });
    glex_mp mp;
    EXPECT_EQ(glex_recv_mp(parent.ep, kWaitMs, &mp), GLEX_SUCCESS)
        << "fork " << i << ": " << glex_last_error();
    ASSERT_EQ(wait_exit(pid, 10), 0) << "fork " << i;
  }
}

TEST_F(LiveApiDevice, OpensEveryNicOfEitherHostAndReportsItsNode) {
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      const uint32_t nic = f().nic(h, k);
      ASSERT_NE(nic, UINT32_MAX);
      glex_device_handle_t d = f().open(h, k);
      ASSERT_NE(d, nullptr) << glex_last_error();
      EXPECT_EQ(glex_device_node(d), nic);
      EXPECT_EQ(glex_close_device(d), GLEX_SUCCESS);
    }
  }
  EXPECT_EQ(glex_device_node(nullptr), 0u);
  EXPECT_EQ(glex_close_device(nullptr), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("dev"));
}

// ---- The VP directory (engine/live/directory.h) ----------------------------------------------

class LiveApiDirectory : public LiveApiSuite {};

// A host's daemon tells anyone who asks where the owner of one of its VPs receives: the port of
// the owner's own socket on the host's address, as the segment holds it.
TEST_F(LiveApiDirectory, AHostsDaemonNamesTheSocketOfAVpsOwner) {
  const LiveHost& h2 = f().fabric().hosts[1];
  in_addr ip{};
  ASSERT_EQ(inet_pton(AF_INET, h2.ip.c_str(), &ip), 1);
  const uint32_t nic = f().nic(1, 0);
  uint8_t vp = 0;
  uint16_t port = 0;
  uint32_t generation = 0;
  {
    Port p(f(), 1, 0);
    ASSERT_TRUE(p.ok()) << glex_last_error();
    vp = static_cast<uint8_t>(GLEX_EP_ADDR_VP(p.addr()));
    auto a = ask_directory(ip.s_addr, h2.port, nic, vp, kWaitMs);
    ASSERT_TRUE(a.ok()) << a.error().to_string();
    EXPECT_EQ(a->status, DirectoryStatus::kOpen);
    EXPECT_EQ(a->node, nic);
    EXPECT_EQ(a->vp, vp);
    port = a->port;
    generation = a->generation;
    ASSERT_NE(port, 0) << "the owner has a socket of its own";
    auto seg = Segment::attach(f().name(), f().host_name(1));
    ASSERT_TRUE(seg.ok()) << seg.error().to_string();
    EXPECT_EQ((*seg)->nic_of(nic)->vps[vp].direct_port.load(), port);
    EXPECT_EQ((*seg)->nic_of(nic)->vps[vp].generation.load(), generation);
    // The port is the owner's: nobody else can bind it.
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = ip;
    sa.sin_port = htons(port);
    EXPECT_NE(bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa), 0);
    EXPECT_EQ(errno, EADDRINUSE);
    close(fd);
    // Another VP of the NIC that nobody opened.
    auto free_vp = ask_directory(ip.s_addr, h2.port, nic, static_cast<uint8_t>(vp ^ 1), kWaitMs);
    ASSERT_TRUE(free_vp.ok()) << free_vp.error().to_string();
    EXPECT_EQ(free_vp->status, DirectoryStatus::kNotOpen);
    EXPECT_EQ(free_vp->port, 0);
  }
  // Closed: no owner any more, and no port.
  auto closed = ask_directory(ip.s_addr, h2.port, nic, vp, kWaitMs);
  ASSERT_TRUE(closed.ok()) << closed.error().to_string();
  EXPECT_EQ(closed->status, DirectoryStatus::kNotOpen);
  EXPECT_EQ(closed->port, 0);
  // A NIC of the other host, a switch, a chip beyond the fabric: not this daemon's to name.
  for (uint32_t node : {f().nic(0, 0), f().fabric().topology.num_nodes() - 1, 1'000'000u}) {
    auto a = ask_directory(ip.s_addr, h2.port, node, 0, kWaitMs);
    ASSERT_TRUE(a.ok()) << a.error().to_string();
    EXPECT_EQ(a->status, DirectoryStatus::kNotHere) << node;
  }
}

// A malformed question gets no answer and changes nothing: the next good one is answered.
TEST_F(LiveApiDirectory, AMalformedQuestionIsDroppedAndTheNextAnswered) {
  const LiveHost& h1 = f().fabric().hosts[0];
  in_addr ip{};
  ASSERT_EQ(inet_pton(AF_INET, h1.ip.c_str(), &ip), 1);
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr = ip;
  to.sin_port = htons(h1.port);
  auto q = encode_directory_query({.node = f().nic(0, 0), .vp = 0, .tag = 5});
  q[10] ^= 0xFF;  // the CRC no longer matches
  ASSERT_EQ(sendto(fd, q.data(), q.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(q.size()));
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0) << "no answer to a corrupt question";
  close(fd);
  auto a = ask_directory(ip.s_addr, h1.port, f().nic(0, 0), 0, kWaitMs);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_NE(a->status, DirectoryStatus::kNotHere);
}

TEST_F(LiveApiDevice, RefusesAFabricHostOrNicThatIsNotThere) {
  const std::string name = f().name();
  glex_device_handle_t d = nullptr;
  glex_device_attr a{"no_such_fabric_42", "h1", -1};
  EXPECT_EQ(glex_open_device(&a, &d), GLEX_UNREACHABLE);
  EXPECT_TRUE(last_error_has("no_such_fabric_42"));
  EXPECT_EQ(d, nullptr);
  a = {name.c_str(), "h9", -1};
  EXPECT_EQ(glex_open_device(&a, &d), GLEX_UNREACHABLE);
  EXPECT_TRUE(last_error_has("'h9'"));
  // A NIC of the other host is not opened through this host's segment.
  a = {name.c_str(), "h1", static_cast<int32_t>(f().nic(1, 0))};
  EXPECT_EQ(glex_open_device(&a, &d), GLEX_UNREACHABLE);
  EXPECT_TRUE(last_error_has(fmt::format("nic = {} is not a NIC of host h1", f().nic(1, 0))));
  const uint32_t nrc = f().fabric().topology.peer({f().nic(0, 0), 0})->node;
  a.nic = static_cast<int32_t>(nrc);
  EXPECT_EQ(glex_open_device(&a, &d), GLEX_UNREACHABLE);
  EXPECT_TRUE(last_error_has(fmt::format("nic = {}", nrc)));
  a.nic = 1 << 20;
  EXPECT_EQ(glex_open_device(&a, &d), GLEX_UNREACHABLE);
  EXPECT_TRUE(last_error_has(fmt::format("nic = {}", 1 << 20)));
  EXPECT_EQ(d, nullptr);
  a = {"live:nonsense", "h1", -1};
  EXPECT_NE(glex_open_device(&a, &d), GLEX_SUCCESS);
  EXPECT_STRNE(glex_last_error(), "");
  EXPECT_EQ(d, nullptr);
  a = {name.c_str(), "h1", -1};
  EXPECT_EQ(glex_open_device(&a, nullptr), GLEX_INVALID_PARAM);
}

// attr fields left open come from $GLEX_FABRIC, $GLEX_HOST, $GLEX_NIC and $GLEX_RANK (changed in
// a child only).
TEST_F(LiveApiDevice, OpenFieldsComeFromTheEnvironment) {
  const LiveFabricUnderTest& fab = f();
  pid_t pid = fork_child([&]() -> int {
    for (const char* v :
         {"GLEX_FABRIC", "GLEX_HOST", "GLEX_NIC", "GLEX_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"})
      unsetenv(v);
    auto node_of = [](const glex_device_attr* a) -> int64_t {
      glex_device_handle_t d = nullptr;
      if (glex_open_device(a, &d) != GLEX_SUCCESS) return -1;
      const int64_t n = glex_device_node(d);
      glex_close_device(d);
      return n;
    };
    // A live: spec names the fabric; nic -1 without the environment: the host's first NIC.
    glex_device_attr a{fab.spec().c_str(), "h2", -1};
    if (node_of(&a) != fab.nic(1, 0)) return 1;
    setenv("GLEX_RANK", "1", 1);  // rank mod the host's NICs
    if (node_of(&a) != fab.nic(1, 1)) return 2;
    setenv("GLEX_NIC", std::to_string(fab.nic(1, 3)).c_str(), 1);
    if (node_of(&a) != fab.nic(1, 3)) return 3;
    unsetenv("GLEX_NIC");
    setenv("GLEX_FABRIC", fab.name().c_str(), 1);
    setenv("GLEX_HOST", "h1", 1);
    setenv("GLEX_RANK", "6", 1);  // 6 mod 4 NICs
    if (node_of(nullptr) != fab.nic(0, 2)) return 4;
    glex_device_attr blank{nullptr, nullptr, -1};
    if (node_of(&blank) != fab.nic(0, 2)) return 5;
    // Two hosts of the fabric run here: without a host the choice is refused.
    unsetenv("GLEX_HOST");
    glex_device_handle_t d = nullptr;
    if (glex_open_device(nullptr, &d) != GLEX_UNREACHABLE || d) return 6;
    if (!std::strstr(glex_last_error(), "GLEX_HOST")) return 7;
    return 0;
  });
  EXPECT_EQ(wait_exit(pid), 0);
}

TEST_F(LiveApiDevice, ClosingOneHandleLeavesAnotherHandleOfTheSameNicAlone) {
  Port sender(f(), 0, 1);
  glex_device_handle_t first = f().open(0, 0);
  Port second(f(), 0, 0);
  ASSERT_TRUE(first && second.ok() && sender.ok()) << glex_last_error();
  Registered mem(second.dev, 256, kRw);
  ASSERT_TRUE(mem.ok());
  ASSERT_EQ(glex_close_device(first), GLEX_SUCCESS);
  // The other handle's endpoint still receives and its registration still takes puts.
  const glex_ret_t sent = glex_send_mp(sender.ep, second.addr(), "x", 1, 0);
  EXPECT_EQ(sent, GLEX_SUCCESS) << glex_last_error();
  glex_mp mp;
  if (sent == GLEX_SUCCESS) {
    EXPECT_EQ(glex_recv_mp(second.ep, kWaitMs, &mp), GLEX_SUCCESS);
  }
  Registered src(sender.dev, 256, kRw);
  fill_pattern(src.data, 256, 3);
  glex_rdma_req r = rdma_req(second.addr(), GLEX_OP_PUT, src.data, src.mh, 256, mem.addr(), mem.mh,
                             GLEX_FLAG_LOCAL_CQ, 1);
  ASSERT_EQ(glex_rdma(sender.ep, &r), GLEX_SUCCESS);
  EXPECT_TRUE(completed_ok(sender.ep, true, GLEX_OP_PUT, 1, 256));
  EXPECT_TRUE(same_bytes(mem.data, src.data, 256, "target"));
}

// ---- Endpoints --------------------------------------------------------------------------------

class LiveApiEndpoint : public LiveApiSuite {};

TEST_F(LiveApiEndpoint, AnyVpIsADmaVpAGivenVpIsThatOneAndTheAddressEncodesBoth) {
  glex_device_handle_t d = f().open(0, 0);
  ASSERT_NE(d, nullptr) << glex_last_error();
  const uint32_t node = glex_device_node(d);
  glex_ep_attr any{-1};
  glex_ep_handle_t a = nullptr, b = nullptr, c = nullptr, again = nullptr;
  ASSERT_EQ(glex_create_ep(d, &any, &a), GLEX_SUCCESS) << glex_last_error();
  EXPECT_GE(glex_ep_vp(a), 8u);
  EXPECT_LE(glex_ep_vp(a), 39u);
  ASSERT_EQ(glex_create_ep(d, nullptr, &b), GLEX_SUCCESS) << glex_last_error();  // NULL: any
  EXPECT_GE(glex_ep_vp(b), 8u);
  EXPECT_NE(glex_ep_vp(b), glex_ep_vp(a));
  glex_ep_attr five{5};
  ASSERT_EQ(glex_create_ep(d, &five, &c), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(glex_ep_vp(c), 5u);
  const glex_ep_addr_t addr = glex_ep_addr(c);
  EXPECT_EQ(addr, (glex_ep_addr_t{node} << 8) | 5);
  EXPECT_EQ(addr, GLEX_EP_ADDR(node, 5));
  EXPECT_EQ(GLEX_EP_ADDR_NODE(addr), node);
  EXPECT_EQ(GLEX_EP_ADDR_VP(addr), 5u);
  EXPECT_EQ(glex_ep_addr(a), GLEX_EP_ADDR(node, glex_ep_vp(a)));

  EXPECT_EQ(glex_create_ep(d, &five, &again), GLEX_NO_RESOURCE);
  EXPECT_TRUE(last_error_has("vp 5"));
  EXPECT_EQ(again, nullptr);
  EXPECT_EQ(glex_destroy_ep(c), GLEX_SUCCESS);
  ASSERT_EQ(glex_create_ep(d, &five, &again), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(glex_ep_vp(again), 5u);

  for (int32_t bad : {40, 41, 255, 100000}) {
    glex_ep_attr x{bad};
    glex_ep_handle_t e = nullptr;
    EXPECT_EQ(glex_create_ep(d, &x, &e), GLEX_INVALID_PARAM) << bad;
    EXPECT_TRUE(last_error_has(fmt::format("vp = {}", bad)));
    EXPECT_EQ(e, nullptr);
  }
  glex_ep_handle_t e = nullptr;
  EXPECT_EQ(glex_create_ep(nullptr, &any, &e), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_create_ep(d, &any, nullptr), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_destroy_ep(nullptr), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("NULL"));
  EXPECT_EQ(glex_ep_vp(nullptr), 0u);
  EXPECT_EQ(glex_ep_addr(nullptr), 0u);
  EXPECT_EQ(glex_destroy_ep(a), GLEX_SUCCESS);
  EXPECT_EQ(glex_destroy_ep(b), GLEX_SUCCESS);
  EXPECT_EQ(glex_destroy_ep(again), GLEX_SUCCESS);
  EXPECT_EQ(glex_close_device(d), GLEX_SUCCESS);
}

TEST_F(LiveApiEndpoint, FortyVpsDmaFirstThenNoneIsLeft) {
  glex_device_handle_t d = f().open(0, 1);
  ASSERT_NE(d, nullptr) << glex_last_error();
  std::vector<glex_ep_handle_t> eps;
  std::set<uint32_t> vps;
  for (int i = 0; i < 40; ++i) {
    glex_ep_handle_t e = nullptr;
    ASSERT_EQ(glex_create_ep(d, nullptr, &e), GLEX_SUCCESS) << i << ": " << glex_last_error();
    eps.push_back(e);
    vps.insert(glex_ep_vp(e));
    if (i < 32) {
      EXPECT_GE(glex_ep_vp(e), 8u) << "a PIO VP before the DMA VPs ran out";
    }
  }
  EXPECT_EQ(vps.size(), 40u);
  EXPECT_EQ(*vps.rbegin(), 39u);
  glex_ep_handle_t extra = nullptr;
  EXPECT_EQ(glex_create_ep(d, nullptr, &extra), GLEX_NO_RESOURCE);
  EXPECT_TRUE(last_error_has("no free VP"));
  for (glex_ep_handle_t e : eps) EXPECT_EQ(glex_destroy_ep(e), GLEX_SUCCESS);
  ASSERT_EQ(glex_create_ep(d, nullptr, &extra), GLEX_SUCCESS);
  EXPECT_EQ(glex_destroy_ep(extra), GLEX_SUCCESS);
  EXPECT_EQ(glex_close_device(d), GLEX_SUCCESS);
}

TEST_F(LiveApiEndpoint, ADestroyedVpIsClosedAndStartsEmptyWhenCreatedAgain) {
  Port s(f(), 0, 0);
  glex_device_handle_t d = f().open(0, 1);
  ASSERT_TRUE(s.ok() && d) << glex_last_error();
  glex_ep_attr twenty{20};
  glex_ep_handle_t e = nullptr;
  ASSERT_EQ(glex_create_ep(d, &twenty, &e), GLEX_SUCCESS) << glex_last_error();
  const glex_ep_addr_t to = glex_ep_addr(e);
  ASSERT_EQ(glex_send_mp(s.ep, to, "stale", 5, 0), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(glex_destroy_ep(e), GLEX_SUCCESS);
  EXPECT_EQ(glex_send_mp(s.ep, to, "late", 4, 0), GLEX_UNREACHABLE);
  ASSERT_EQ(glex_create_ep(d, &twenty, &e), GLEX_SUCCESS) << glex_last_error();
  glex_mp mp;
  EXPECT_EQ(glex_recv_mp(e, 0, &mp), GLEX_NO_ENTRY) << "an MP of the previous owner";
  glex_cq_entry c;
  EXPECT_EQ(glex_poll_cq(e, &c), GLEX_NO_ENTRY);
  EXPECT_EQ(glex_destroy_ep(e), GLEX_SUCCESS);
  EXPECT_EQ(glex_close_device(d), GLEX_SUCCESS);
}

TEST_F(LiveApiEndpoint, AVpOfAnotherProcessIsTakenUntilThatProcessIsGone) {
  Port parent(f(), 0, 0);
  ASSERT_TRUE(parent.ok()) << glex_last_error();
  const glex_ep_addr_t to = parent.addr();
  const LiveFabricUnderTest& fab = f();
  pid_t pid = fork_child([&]() -> int {
    glex_device_handle_t d = fab.open(0, 1);
    glex_ep_attr attr{21};
    glex_ep_handle_t e;
    if (!d || glex_create_ep(d, &attr, &e) != GLEX_SUCCESS) return 10;
    if (send_retry(e, to, "held", 4) != GLEX_SUCCESS) return 11;
    glex_mp mp;
    if (glex_recv_mp(e, 60000, &mp) != GLEX_SUCCESS) return 12;
    return 0;  // exits holding the VP
  });
  glex_mp mp;
  ASSERT_EQ(glex_recv_mp(parent.ep, kWaitMs, &mp), GLEX_SUCCESS)
      << glex_last_error() << "; child exit " << wait_exit(pid, 1);
  EXPECT_EQ(mp.src, GLEX_EP_ADDR(f().nic(0, 1), 21));
  glex_device_handle_t d = f().open(0, 1);
  ASSERT_NE(d, nullptr);
  glex_ep_attr attr{21};
  glex_ep_handle_t e = nullptr;
  EXPECT_EQ(glex_create_ep(d, &attr, &e), GLEX_NO_RESOURCE);
  ASSERT_EQ(send_retry(parent.ep, mp.src, "done", 4), GLEX_SUCCESS);
  EXPECT_EQ(wait_exit(pid), 0);
  EXPECT_EQ(glex_create_ep(d, &attr, &e), GLEX_SUCCESS) << glex_last_error();
  if (e) glex_destroy_ep(e);
  glex_close_device(d);
}

// ---- Registered memory ------------------------------------------------------------------------

class LiveApiMemory : public LiveApiSuite {};

TEST_F(LiveApiMemory, RegisterChecksEveryArgument) {
  glex_device_handle_t d = f().open(0, 0);
  ASSERT_NE(d, nullptr);
  std::vector<uint8_t> buf(4096);
  glex_mem_handle_t mh = 0;
  EXPECT_EQ(glex_register_mem(nullptr, buf.data(), 4096, kRw, &mh), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_register_mem(d, nullptr, 4096, kRw, &mh), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("addr"));
  EXPECT_EQ(glex_register_mem(d, buf.data(), 4096, kRw, nullptr), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_register_mem(d, buf.data(), 0, kRw, &mh), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("len = 0"));
  EXPECT_EQ(glex_register_mem(d, buf.data(), 4096, 0, &mh), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("access = 0x0"));
  EXPECT_EQ(glex_register_mem(d, buf.data(), 4096, 0x4, &mh), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("access = 0x4"));
  EXPECT_EQ(glex_register_mem(d, buf.data(), 4096, kRw | 0x4, &mh), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_register_mem(d, reinterpret_cast<void*>(UINT64_MAX - 15), 32, kRw, &mh),
            GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("overflows"));
  EXPECT_EQ(mh, 0u);
  std::set<glex_mem_handle_t> handles;
  for (uint32_t access : {uint32_t{GLEX_MEM_READ}, uint32_t{GLEX_MEM_WRITE}, kRw}) {
    ASSERT_EQ(glex_register_mem(d, buf.data(), 4096, access, &mh), GLEX_SUCCESS)
        << glex_last_error();
    handles.insert(mh);
  }
  EXPECT_EQ(handles.size(), 3u);
  for (glex_mem_handle_t h : handles) EXPECT_EQ(glex_deregister_mem(d, h), GLEX_SUCCESS);
  glex_close_device(d);
}

TEST_F(LiveApiMemory, TheAttHolds256RegistrationsAndReusesAFreedEntry) {
  glex_device_handle_t d = f().open(0, 3);
  ASSERT_NE(d, nullptr);
  std::vector<uint8_t> buf(256 * 64);
  std::vector<glex_mem_handle_t> mhs(256);
  for (size_t i = 0; i < 256; ++i)
    ASSERT_EQ(glex_register_mem(d, buf.data() + i * 64, 64, kRw, &mhs[i]), GLEX_SUCCESS)
        << i << ": " << glex_last_error();
  glex_mem_handle_t more = 0;
  EXPECT_EQ(glex_register_mem(d, buf.data(), 64, kRw, &more), GLEX_NO_RESOURCE);
  EXPECT_TRUE(last_error_has("full"));
  ASSERT_EQ(glex_deregister_mem(d, mhs[100]), GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(d, buf.data(), 64, kRw, &more), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(more >> 32, mhs[100] >> 32);
  EXPECT_NE(more, mhs[100]) << "a new registration must not reuse the key";
  mhs[100] = more;
  for (glex_mem_handle_t h : mhs) EXPECT_EQ(glex_deregister_mem(d, h), GLEX_SUCCESS);
  glex_close_device(d);
}

TEST_F(LiveApiMemory, DeregisterRefusesWhatIsNotARegistration) {
  glex_device_handle_t d = f().open(0, 0);
  ASSERT_NE(d, nullptr);
  std::vector<uint8_t> buf(64);
  glex_mem_handle_t mh;
  ASSERT_EQ(glex_register_mem(d, buf.data(), 64, kRw, &mh), GLEX_SUCCESS);
  EXPECT_EQ(glex_deregister_mem(d, (uint64_t{256} << 32) | (mh & 0xFFFFFFFF)), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("out of range"));
  EXPECT_EQ(glex_deregister_mem(d, mh ^ 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("not a registration"));
  EXPECT_EQ(glex_deregister_mem(d, mh + (uint64_t{50} << 32)), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_deregister_mem(nullptr, mh), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_deregister_mem(d, mh), GLEX_SUCCESS);
  EXPECT_EQ(glex_deregister_mem(d, mh), GLEX_INVALID_PARAM);
  glex_close_device(d);
}

TEST_F(LiveApiMemory, AllocMemGivesZeroedMemoryAndFreeMemTakesOnlyItsOwnPointers) {
  glex_device_handle_t a = f().open(0, 0), b = f().open(0, 1);
  ASSERT_TRUE(a && b);
  void* p = nullptr;
  EXPECT_EQ(glex_alloc_mem(a, 0, &p), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("len = 0"));
  EXPECT_EQ(glex_alloc_mem(a, (uint64_t{1} << 40) + 1, &p), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_alloc_mem(a, 4096, nullptr), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_alloc_mem(nullptr, 4096, &p), GLEX_INVALID_PARAM);
  EXPECT_EQ(p, nullptr);
  ASSERT_EQ(glex_alloc_mem(a, 10000, &p), GLEX_SUCCESS) << glex_last_error();
  ASSERT_NE(p, nullptr);
  auto* bytes = static_cast<uint8_t*>(p);
  EXPECT_TRUE(all_bytes(bytes, 10000, 0, "fresh memory"));
  std::memset(bytes, 0x5C, 10000);
  glex_mem_handle_t mh;
  ASSERT_EQ(glex_register_mem(a, bytes + 10, 9000, kRw, &mh), GLEX_SUCCESS);
  EXPECT_EQ(glex_deregister_mem(a, mh), GLEX_SUCCESS);

  EXPECT_EQ(glex_free_mem(b, p), GLEX_INVALID_PARAM) << "allocated by another device";
  EXPECT_TRUE(last_error_has("not returned by glex_alloc_mem"));
  void* heap = std::malloc(64);
  EXPECT_EQ(glex_free_mem(a, heap), GLEX_INVALID_PARAM);
  std::free(heap);
  EXPECT_EQ(glex_free_mem(a, bytes + 1), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_free_mem(a, nullptr), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_free_mem(nullptr, p), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_free_mem(a, p), GLEX_SUCCESS);
  EXPECT_EQ(glex_free_mem(a, p), GLEX_INVALID_PARAM);
  glex_close_device(a);
  glex_close_device(b);
}

// ---- Mini-packets and the CQ ------------------------------------------------------------------

class LiveApiMp : public LiveApiSuite {};

TEST_F(LiveApiMp, ParametersAreCheckedInTheCall) {
  Port a(f(), 0, 0), b(f(), 0, 1);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  uint8_t data[128] = {1, 2, 3};
  EXPECT_EQ(glex_send_mp(a.ep, b.addr(), data, 121, 0), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("len = 121"));
  EXPECT_EQ(glex_send_mp(a.ep, b.addr(), nullptr, 1, 0), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("data"));
  EXPECT_EQ(glex_send_mp(nullptr, b.addr(), data, 1, 0), GLEX_INVALID_PARAM);
  const uint32_t nrc = f().fabric().topology.peer({f().nic(0, 0), 0})->node;
  EXPECT_EQ(glex_send_mp(a.ep, GLEX_EP_ADDR(nrc, 8), data, 1, 0), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has(fmt::format("target node {} is not a NIC", nrc)));
  EXPECT_EQ(glex_send_mp(a.ep, GLEX_EP_ADDR(0xFFFFFF, 8), data, 1, 0), GLEX_INVALID_PARAM);
  // Bits above a 32-bit node are part of the address, not dropped: no such NIC.
  EXPECT_EQ(glex_send_mp(a.ep, b.addr() | (uint64_t{1} << 40), data, 1, 0), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("is not a NIC"));
  for (uint32_t vp : {40u, 255u}) {
    EXPECT_EQ(glex_send_mp(a.ep, GLEX_EP_ADDR(f().nic(0, 1), vp), data, 1, 0), GLEX_INVALID_PARAM);
    EXPECT_TRUE(last_error_has(fmt::format("target vp {}", vp)));
  }
  for (uint32_t flags : {0x20u, 0x80000000u}) {
    EXPECT_EQ(glex_send_mp(a.ep, b.addr(), data, 1, flags), GLEX_INVALID_PARAM);
    EXPECT_TRUE(last_error_has("unknown bits"));
  }
  EXPECT_EQ(glex_send_mp(a.ep, b.addr(), data, 1, GLEX_FLAG_REMOTE_EVT), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("GLEX_FLAG_REMOTE_EVT"));
  glex_mp mp;
  EXPECT_EQ(glex_recv_mp(b.ep, 0, &mp), GLEX_NO_ENTRY) << "a refused MP was delivered";
  // No data is fine when there is no length.
  ASSERT_EQ(glex_send_mp(a.ep, b.addr(), nullptr, 0, 0), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(glex_recv_mp(b.ep, kWaitMs, &mp), GLEX_SUCCESS);
  EXPECT_EQ(mp.len, 0u);
  EXPECT_EQ(glex_recv_mp(nullptr, 0, &mp), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_recv_mp(b.ep, 0, nullptr), GLEX_INVALID_PARAM);
  glex_cq_entry e;
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY) << "refused in the call: no CQ entry";
}

TEST_F(LiveApiMp, RecvPollsOrWaitsForItsTimeout) {
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok());
  glex_mp mp;
  EXPECT_EQ(glex_recv_mp(a.ep, 0, &mp), GLEX_NO_ENTRY);
  const auto t0 = Clock::now();
  EXPECT_EQ(glex_recv_mp(a.ep, 50, &mp), GLEX_TIMEOUT);
  const int64_t ms = ms_since(t0);
  EXPECT_GE(ms, 49);
  EXPECT_LT(ms, 2000);
  EXPECT_TRUE(last_error_has("within 50 ms"));
  // An MP to oneself.
  ASSERT_EQ(glex_send_mp(a.ep, a.addr(), "me", 2, 0), GLEX_SUCCESS);
  ASSERT_EQ(glex_recv_mp(a.ep, 0, &mp), GLEX_SUCCESS);
  EXPECT_EQ(mp.src, a.addr());
  EXPECT_EQ(std::string(reinterpret_cast<char*>(mp.data), mp.len), "me");
}

TEST_F(LiveApiMp, AnEmptyCqPollsEmptyAndWaitsForItsTimeout) {
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok());
  glex_cq_entry e;
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY);
  const auto t0 = Clock::now();
  EXPECT_EQ(glex_wait_cq(a.ep, 30, &e), GLEX_TIMEOUT);
  const int64_t ms = ms_since(t0);
  EXPECT_GE(ms, 29);
  EXPECT_LT(ms, 2000);
  EXPECT_TRUE(last_error_has("within 30 ms"));
  EXPECT_EQ(glex_poll_cq(nullptr, &e), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_poll_cq(a.ep, nullptr), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_wait_cq(nullptr, 10, &e), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_wait_cq(a.ep, 10, nullptr), GLEX_INVALID_PARAM);
}

TEST_F(LiveApiMp, AFullMpqIsBusyUntilTheReceiverDrainsIt) {
  Port a(f(), 0, 0), b(f(), 0, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint32_t i = 0; i < 1024; ++i)
    ASSERT_EQ(glex_send_mp(a.ep, b.addr(), &i, sizeof i, 0), GLEX_SUCCESS)
        << i << ": " << glex_last_error();
  uint32_t over = 1024;
  EXPECT_EQ(glex_send_mp(a.ep, b.addr(), &over, sizeof over, 0), GLEX_BUSY);
  EXPECT_TRUE(last_error_has("full"));
  for (uint32_t i = 0; i < 1024; ++i) {
    glex_mp mp;
    ASSERT_EQ(glex_recv_mp(b.ep, 0, &mp), GLEX_SUCCESS) << i;
    uint32_t v;
    std::memcpy(&v, mp.data, sizeof v);
    ASSERT_EQ(v, i);
  }
  glex_mp mp;
  EXPECT_EQ(glex_recv_mp(b.ep, 0, &mp), GLEX_NO_ENTRY) << "the refused MP was queued";
  EXPECT_EQ(glex_send_mp(a.ep, b.addr(), &over, sizeof over, 0), GLEX_SUCCESS);
  EXPECT_EQ(glex_recv_mp(b.ep, 0, &mp), GLEX_SUCCESS);
}

// A receiver that died: its full MPQ says so at once; the daemon's liveness scan then closes its
// VP.
TEST_F(LiveApiMp, AGoneReceiverIsReported) {
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok());
  const glex_ep_addr_t to = a.addr();
  const LiveFabricUnderTest& fab = f();
  pid_t pid = fork_child([&]() -> int {
    Port c(fab, 0, 1);
    if (!c.ok() || send_retry(c.ep, to, "here", 4) != GLEX_SUCCESS) return 10;
    for (;;) pause();
  });
  glex_mp mp;
  ASSERT_EQ(glex_recv_mp(a.ep, kWaitMs, &mp), GLEX_SUCCESS);
  const glex_ep_addr_t child = mp.src;
  int sent = 0;
  while (sent < 2000 && glex_send_mp(a.ep, child, "x", 1, 0) == GLEX_SUCCESS) ++sent;
  EXPECT_EQ(sent, 1024);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  glex_ret_t r = glex_send_mp(a.ep, child, "x", 1, 0);
  EXPECT_TRUE(r == GLEX_PEER_DEAD || r == GLEX_UNREACHABLE) << glex_error_string(r);
  const auto t0 = Clock::now();
  while (r != GLEX_UNREACHABLE && ms_since(t0) < 1000) {
    usleep(5000);
    r = glex_send_mp(a.ep, child, "x", 1, 0);
  }
  EXPECT_EQ(r, GLEX_UNREACHABLE) << "the dead receiver's VP is still open after 1 s";
}

// Between two NICs of one host the route may leave the host (fattree: a spine NRC on the other
// host); the operation must still arrive.
TEST_F(LiveApiMp, EveryNicReachesEveryNicWithMpAndPut) {
  struct Nic {
    std::unique_ptr<Port> port;
    std::unique_ptr<Registered> src, dst;
  };
  std::vector<Nic> nics;
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      Nic n;
      n.port = std::make_unique<Port>(f(), h, k);
      ASSERT_TRUE(n.port->ok()) << glex_last_error();
      n.src = std::make_unique<Registered>(n.port->dev, 64, kRw);
      n.dst = std::make_unique<Registered>(n.port->dev, 64, GLEX_MEM_WRITE);
      ASSERT_TRUE(n.src->ok() && n.dst->ok());
      fill_pattern(n.src->data, 64, nics.size());
      nics.push_back(std::move(n));
    }
  }
  std::string failures;
  for (const Nic& a : nics) {
    for (const Nic& b : nics) {
      const std::string pair = fmt::format("NIC {} -> NIC {}", glex_device_node(a.port->dev),
                                           glex_device_node(b.port->dev));
      glex_mp mp;
      glex_ret_t r = glex_send_mp(a.port->ep, b.port->addr(), "x", 1, 0);
      if (r == GLEX_SUCCESS) r = glex_recv_mp(b.port->ep, kWaitMs, &mp);
      if (r != GLEX_SUCCESS) failures += fmt::format("{} MP: {}\n", pair, glex_last_error());
      std::memset(b.dst->data, 0, 64);
      glex_rdma_req put = rdma_req(b.port->addr(), GLEX_OP_PUT, a.src->data, a.src->mh, 64,
                                   b.dst->addr(), b.dst->mh, GLEX_FLAG_LOCAL_CQ, 1);
      glex_cq_entry e{};
      r = glex_rdma(a.port->ep, &put);
      if (r == GLEX_SUCCESS) r = glex_wait_cq(a.port->ep, kWaitMs, &e);
      if (r != GLEX_SUCCESS || e.status != GLEX_SUCCESS ||
          std::memcmp(b.dst->data, a.src->data, 64) != 0)
        failures += fmt::format("{} put: {} '{}'\n", pair, glex_error_string(e.status), e.reason);
    }
  }
  EXPECT_EQ(failures, "");
}

struct SideName {
  std::string operator()(const ::testing::TestParamInfo<Side>& i) const { return i.param.name; }
};

class LiveApiMpPath : public LiveApiSuite, public ::testing::WithParamInterface<Side> {
 protected:
  bool same() const { return GetParam().host == 0; }
};

TEST_P(LiveApiMpPath, EveryLengthFrom0To120ArrivesIntactWithItsSender) {
  Port a(f(), 0, 0), b(f(), GetParam().host, GetParam().k);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  for (uint32_t len = 0; len <= GLEX_MP_PAYLOAD; ++len) {
    uint8_t data[GLEX_MP_PAYLOAD];
    fill_pattern(data, len, len);
    ASSERT_EQ(glex_send_mp(a.ep, b.addr(), data, len, 0), GLEX_SUCCESS) << glex_last_error();
    glex_mp mp{};
    ASSERT_EQ(glex_recv_mp(b.ep, kWaitMs, &mp), GLEX_SUCCESS) << len << ": " << glex_last_error();
    EXPECT_EQ(mp.src, a.addr());
    ASSERT_EQ(mp.len, len);
    EXPECT_TRUE(same_bytes(mp.data, data, len, "MP"));
  }
}

TEST_P(LiveApiMpPath, FlagsLocalCqInterruptAndFenceAreHonoured) {
  Port a(f(), 0, 0), b(f(), GetParam().host, GetParam().k);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  uint8_t data[17] = {9};
  glex_mp mp;
  ASSERT_EQ(glex_send_mp(a.ep, b.addr(), data, 17, GLEX_FLAG_LOCAL_CQ), GLEX_SUCCESS);
  EXPECT_TRUE(completed_ok(a.ep, true, GLEX_OP_MP, 0, 17));
  ASSERT_EQ(glex_recv_mp(b.ep, -1, &mp), GLEX_SUCCESS);  // < 0: until it comes
  EXPECT_EQ(mp.len, 17u);
  ASSERT_EQ(glex_send_mp(a.ep, b.addr(), data, 1, GLEX_FLAG_LOCAL_CQ), GLEX_SUCCESS);
  glex_cq_entry e{};
  ASSERT_EQ(glex_wait_cq(a.ep, -1, &e), GLEX_SUCCESS);
  EXPECT_EQ(e.bytes, 1u);
  ASSERT_EQ(glex_recv_mp(b.ep, kWaitMs, &mp), GLEX_SUCCESS);
  for (uint32_t flags : {0u, uint32_t{GLEX_FLAG_INTERRUPT}, uint32_t{GLEX_FLAG_FENCE}}) {
    ASSERT_EQ(glex_send_mp(a.ep, b.addr(), data, 3, flags), GLEX_SUCCESS) << flags;
    ASSERT_EQ(glex_recv_mp(b.ep, kWaitMs, &mp), GLEX_SUCCESS) << flags;
    EXPECT_EQ(mp.len, 3u);
  }
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY) << "a success without GLEX_FLAG_LOCAL_CQ";
}

TEST_P(LiveApiMpPath, FiveThousandMpsArriveInOrder) {
  Port a(f(), 0, 0), b(f(), GetParam().host, GetParam().k);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  constexpr uint32_t kCount = 5000;
  uint32_t next = 0;
  std::string bad;
  auto take = [&](const glex_mp& mp) {
    uint32_t seq = UINT32_MAX;
    if (mp.len >= 4) std::memcpy(&seq, mp.data, 4);
    uint8_t want[GLEX_MP_PAYLOAD];
    fill_pattern(want, mp.len, next);
    if (bad.empty() && (seq != next || mp.len != 4 + next % 117 || mp.src != a.addr() ||
                        std::memcmp(mp.data + 4, want + 4, mp.len - 4) != 0))
      bad = fmt::format("MP {} arrived as number {} (len {})", next, seq, mp.len);
    ++next;
  };
  for (uint32_t i = 0; i < kCount; ++i) {
    uint8_t data[GLEX_MP_PAYLOAD];
    const uint32_t len = 4 + i % 117;
    fill_pattern(data, len, i);
    std::memcpy(data, &i, 4);
    glex_ret_t r;
    while ((r = glex_send_mp(a.ep, b.addr(), data, len, 0)) == GLEX_BUSY) {
      glex_mp mp;
      while (glex_recv_mp(b.ep, 0, &mp) == GLEX_SUCCESS) take(mp);
    }
    ASSERT_EQ(r, GLEX_SUCCESS) << i << ": " << glex_last_error();
  }
  while (next < kCount) {
    glex_mp mp;
    ASSERT_EQ(glex_recv_mp(b.ep, kWaitMs, &mp), GLEX_SUCCESS) << "after " << next;
    take(mp);
  }
  EXPECT_EQ(bad, "");
  glex_mp mp;
  EXPECT_EQ(glex_recv_mp(b.ep, 0, &mp), GLEX_NO_ENTRY);
}

// On this host the sender is told in the call; across hosts the target's daemon refuses it and
// the sender's CQ says so.
TEST_P(LiveApiMpPath, AnMpToAVpThatIsNotOpenIsUnreachable) {
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok());
  const glex_ep_addr_t closed = GLEX_EP_ADDR(f().nic(GetParam().host, GetParam().k), 33);
  const auto t0 = Clock::now();
  if (same()) {
    EXPECT_EQ(glex_send_mp(a.ep, closed, "x", 1, 0), GLEX_UNREACHABLE);
    EXPECT_TRUE(last_error_has("not open"));
    glex_cq_entry e;
    EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY);
  } else {
    ASSERT_EQ(glex_send_mp(a.ep, closed, "x", 1, 0), GLEX_SUCCESS) << glex_last_error();
    glex_cq_entry e{};
    ASSERT_EQ(glex_wait_cq(a.ep, 1000, &e), GLEX_SUCCESS) << "no refusal within 1 s";
    EXPECT_EQ(e.status, GLEX_UNREACHABLE);
    EXPECT_EQ(e.op, uint32_t{GLEX_OP_MP});
    EXPECT_NE(e.error_id, 0);
    EXPECT_NE(std::strstr(e.reason, "not open"), nullptr) << e.reason;
    EXPECT_LT(ms_since(t0), 1000);
  }
}

INSTANTIATE_TEST_SUITE_P(LiveApi, LiveApiMpPath, ::testing::Values(kSameHost, kCrossHost),
                         SideName());

// ---- RDMA: checks, refusals, events, fences ---------------------------------------------------

class LiveApiRdma : public LiveApiSuite, public ::testing::WithParamInterface<Side> {
 protected:
  bool same() const { return GetParam().host == 0; }
  int host() const { return GetParam().host; }
  int k() const { return GetParam().k; }
};

TEST_P(LiveApiRdma, LocalFieldsAreCheckedInTheCall) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered local(a.dev, 256, kRw), remote(t.dev, 256, kRw), elsewhere(t.dev, 256, kRw);
  ASSERT_TRUE(local.ok() && remote.ok() && elsewhere.ok());
  std::memset(remote.data, kSentinel, 256);
  const glex_rdma_req good = rdma_req(t.addr(), GLEX_OP_PUT, local.data, local.mh, 16,
                                      remote.addr(), remote.mh, GLEX_FLAG_LOCAL_CQ, 1);
  EXPECT_EQ(glex_rdma(nullptr, &good), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_rdma(a.ep, nullptr), GLEX_INVALID_PARAM);
  struct Case {
    const char* what;
    std::function<void(glex_rdma_req&)> edit;
    glex_ret_t ret;
    std::string message;
  };
  const uint32_t nrc = f().fabric().topology.peer({f().nic(0, 0), 0})->node;
  const std::vector<Case> cases = {
      {"op 0", [](auto& r) { r.op = 0; }, GLEX_INVALID_PARAM, "op = 0"},
      {"op MP", [](auto& r) { r.op = GLEX_OP_MP; }, GLEX_INVALID_PARAM, "op = 4"},
      {"op 99", [](auto& r) { r.op = 99; }, GLEX_INVALID_PARAM, "op = 99"},
      {"unknown flag", [](auto& r) { r.flags |= 0x20; }, GLEX_INVALID_PARAM, "unknown bits"},
      {"MP flag", [](auto& r) { r.flags |= GLEX_FLAG_MORE; }, GLEX_INVALID_PARAM,
       "GLEX_FLAG_MORE is for MPs"},
      {"imm len 0",
       [](auto& r) {
         r.op = GLEX_OP_IMM;
         r.len = 0;
       },
       GLEX_INVALID_PARAM, "immediate len = 0"},
      {"imm len 129",
       [](auto& r) {
         r.op = GLEX_OP_IMM;
         r.len = 129;
       },
       GLEX_INVALID_PARAM, "immediate len = 129"},
      {"NULL local", [](auto& r) { r.local_addr = nullptr; }, GLEX_INVALID_PARAM, "local_addr"},
      {"NULL imm data",
       [](auto& r) {
         r.op = GLEX_OP_IMM;
         r.local_addr = nullptr;
       },
       GLEX_INVALID_PARAM, "local_addr"},
      {"remote overflow", [](auto& r) { r.remote_addr = UINT64_MAX - 4; }, GLEX_INVALID_PARAM,
       "overflows"},
      {"event without data[1]",
       [&](auto& r) {
         r.flags |= GLEX_FLAG_REMOTE_EVT;
         r.event_addr = remote.addr(128);
         r.event_mh = remote.mh;
         r.event.data[0] = 7;
       },
       GLEX_INVALID_PARAM, "event.data[1]"},
      {"target an NRC", [&](auto& r) { r.target = GLEX_EP_ADDR(nrc, 8); }, GLEX_INVALID_PARAM,
       "is not a NIC"},
      {"target beyond the chips", [](auto& r) { r.target = GLEX_EP_ADDR(0xFFFFFF, 8); },
       GLEX_INVALID_PARAM, "is not a NIC"},
      {"target vp 40", [&](auto& r) { r.target = GLEX_EP_ADDR(glex_ep_addr(t.ep) >> 8, 40); },
       GLEX_INVALID_PARAM, "target vp 40"},
      {"wrong local key", [](auto& r) { r.local_mh ^= 1; }, GLEX_ACCESS_ERROR,
       "local_addr/local_mh: wrong memory key"},
      {"local ATT index out of range",
       [](auto& r) { r.local_mh = (uint64_t{999} << 32) | (r.local_mh & 0xFFFFFFFF); },
       GLEX_ACCESS_ERROR, "ATT index"},
      {"local range ends outside", [&](auto& r) { r.local_addr = local.data + 250; },
       GLEX_ACCESS_ERROR, "outside the registered range"},
      {"local range starts before", [&](auto& r) { r.local_addr = local.data - 1; },
       GLEX_ACCESS_ERROR, "outside the registered range"},
      {"get into a range that ends outside",
       [&](auto& r) {
         r.op = GLEX_OP_GET;
         r.local_addr = local.data + 241;
       },
       GLEX_ACCESS_ERROR, "outside the registered range"},
      {"local handle of another NIC", [&](auto& r) { r.local_mh = elsewhere.mh; },
       GLEX_ACCESS_ERROR, "local_addr/local_mh"},
  };
  for (const Case& c : cases) {
    glex_rdma_req r = good;
    c.edit(r);
    EXPECT_EQ(glex_rdma(a.ep, &r), c.ret) << c.what;
    EXPECT_TRUE(last_error_has(c.message)) << c.what;
  }
  glex_cq_entry e;
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY) << "refused in the call: no CQ entry";
  EXPECT_EQ(glex_fence(a.ep, 0), GLEX_SUCCESS) << "a refused descriptor is outstanding";
  EXPECT_TRUE(all_bytes(remote.data, 256, kSentinel, "target"));
  // The unedited request goes through.
  ASSERT_EQ(glex_rdma(a.ep, &good), GLEX_SUCCESS) << glex_last_error();
  EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_PUT, 1, 16));
}

// Refused at the target: a CQ entry says why, and nothing of the target memory changed (the
// registered 4 KiB lie inside a larger buffer, to see writes past either end).
TEST_P(LiveApiRdma, ARefusedPutLeavesTheTargetUntouched) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered src(a.dev, 8192, kRw);
  ASSERT_TRUE(src.ok());
  fill_pattern(src.data, 8192, 11);
  std::vector<uint8_t> mem(4096 + 64, kSentinel);
  uint8_t* base = mem.data() + 32;
  const uint64_t b = reinterpret_cast<uint64_t>(base);
  glex_mem_handle_t rw, ro;
  ASSERT_EQ(glex_register_mem(t.dev, base, 4096, kRw, &rw), GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(t.dev, base, 4096, GLEX_MEM_READ, &ro), GLEX_SUCCESS);
  struct Case {
    const char* what;
    uint32_t op;
    uint64_t addr;
    glex_mem_handle_t mh;
    uint64_t len;
    const char* reason;
  };
  const Case cases[] = {
      {"wrong key", GLEX_OP_PUT, b, rw ^ 0x5, 64, "wrong memory key"},
      {"free ATT entry", GLEX_OP_PUT, b, (uint64_t{200} << 32) | (rw & 0xFFFFFFFF), 64,
       "wrong memory key"},
      {"ATT index out of range", GLEX_OP_PUT, b, (uint64_t{1000} << 32) | (rw & 0xFFFFFFFF), 64,
       "ATT index"},
      {"starts inside, ends outside", GLEX_OP_PUT, b + 4000, rw, 200,
       "outside the registered range"},
      {"starts before", GLEX_OP_PUT, b - 8, rw, 16, "outside the registered range"},
      {"starts after", GLEX_OP_PUT, b + 4096, rw, 1, "outside the registered range"},
      {"two chunks, the last outside", GLEX_OP_PUT, b, rw, 4097, "outside the registered range"},
      {"read-only registration", GLEX_OP_PUT, b, ro, 64, "not registered for write"},
      {"immediate, wrong key", GLEX_OP_IMM, b, rw ^ 0x5, 100, "wrong memory key"},
      {"immediate, read-only", GLEX_OP_IMM, b + 7, ro, 128, "not registered for write"},
      {"immediate, ends outside", GLEX_OP_IMM, b + 4090, rw, 7, "outside the registered range"},
  };
  uint64_t cookie = 100;
  for (const Case& c : cases) {
    glex_rdma_req r = rdma_req(t.addr(), c.op, src.data, src.mh, c.len, c.addr, c.mh, 0, ++cookie);
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << c.what << ": " << glex_last_error();
    EXPECT_TRUE(failed_with(a.ep, same(), c.op, cookie, GLEX_ACCESS_ERROR, c.reason)) << c.what;
    EXPECT_TRUE(all_bytes(mem.data(), mem.size(), kSentinel, "target memory")) << c.what;
  }
  EXPECT_EQ(glex_fence(a.ep, kWaitMs), GLEX_SUCCESS);
  // The registration itself works.
  glex_rdma_req r =
      rdma_req(t.addr(), GLEX_OP_PUT, src.data, src.mh, 4096, b, rw, GLEX_FLAG_LOCAL_CQ, 1);
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS);
  EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_PUT, 1, 4096));
  EXPECT_TRUE(same_bytes(base, src.data, 4096, "target"));
  EXPECT_TRUE(all_bytes(mem.data() + 32 + 4096, 32, kSentinel, "after the registration"));
  glex_deregister_mem(t.dev, rw);
  glex_deregister_mem(t.dev, ro);
}

TEST_P(LiveApiRdma, ARefusedGetLeavesTheLocalBufferUntouched) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered dst(a.dev, 8192, kRw), src(t.dev, 4096, kRw);
  ASSERT_TRUE(dst.ok() && src.ok());
  fill_pattern(src.data, 4096, 12);
  glex_mem_handle_t wo;
  ASSERT_EQ(glex_register_mem(t.dev, src.data, 4096, GLEX_MEM_WRITE, &wo), GLEX_SUCCESS);
  const uint64_t b = src.addr();
  struct Case {
    const char* what;
    uint64_t addr;
    glex_mem_handle_t mh;
    uint64_t len;
    const char* reason;
  };
  const Case cases[] = {
      {"wrong key", b, src.mh ^ 0x9, 64, "wrong memory key"},
      {"ATT index out of range", b, (uint64_t{4000} << 32) | (src.mh & 0xFFFFFFFF), 64,
       "ATT index"},
      {"starts inside, ends outside", b + 4000, src.mh, 200, "outside the registered range"},
      {"starts before", b - 1, src.mh, 2, "outside the registered range"},
      {"two chunks, the last outside", b, src.mh, 4097, "outside the registered range"},
      {"write-only registration", b, wo, 64, "not registered for read"},
  };
  uint64_t cookie = 200;
  for (const Case& c : cases) {
    std::memset(dst.data, kSentinel, 8192);
    glex_rdma_req r =
        rdma_req(t.addr(), GLEX_OP_GET, dst.data, dst.mh, c.len, c.addr, c.mh, 0, ++cookie);
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << c.what << ": " << glex_last_error();
    EXPECT_TRUE(failed_with(a.ep, same(), GLEX_OP_GET, cookie, GLEX_ACCESS_ERROR, c.reason))
        << c.what;
    EXPECT_TRUE(all_bytes(dst.data, 8192, kSentinel, "local buffer")) << c.what;
  }
  glex_rdma_req r =
      rdma_req(t.addr(), GLEX_OP_GET, dst.data, dst.mh, 4096, b, src.mh, GLEX_FLAG_LOCAL_CQ, 1);
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS);
  EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_GET, 1, 4096));
  EXPECT_TRUE(same_bytes(dst.data, src.data, 4096, "local buffer"));
  glex_deregister_mem(t.dev, wo);
}

TEST_P(LiveApiRdma, ADeregisteredHandleIsRefused) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered src(a.dev, 512, kRw);
  ASSERT_TRUE(src.ok());
  fill_pattern(src.data, 512, 13);
  std::vector<uint8_t> mem(512, kSentinel);
  glex_mem_handle_t old_mh, new_mh;
  ASSERT_EQ(glex_register_mem(t.dev, mem.data(), 512, kRw, &old_mh), GLEX_SUCCESS);
  const uint64_t b = reinterpret_cast<uint64_t>(mem.data());
  glex_rdma_req r =
      rdma_req(t.addr(), GLEX_OP_PUT, src.data, src.mh, 512, b, old_mh, GLEX_FLAG_LOCAL_CQ, 1);
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS);
  ASSERT_TRUE(completed_ok(a.ep, same(), GLEX_OP_PUT, 1, 512));
  std::memset(mem.data(), kSentinel, 512);
  ASSERT_EQ(glex_deregister_mem(t.dev, old_mh), GLEX_SUCCESS);
  r.cookie = 2;
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS);
  EXPECT_TRUE(failed_with(a.ep, same(), GLEX_OP_PUT, 2, GLEX_ACCESS_ERROR, "wrong memory key"));
  EXPECT_TRUE(all_bytes(mem.data(), 512, kSentinel, "deregistered memory"));
  // Registered again, the memory has a new handle; the old one stays refused.
  ASSERT_EQ(glex_register_mem(t.dev, mem.data(), 512, kRw, &new_mh), GLEX_SUCCESS);
  EXPECT_NE(new_mh, old_mh);
  r.cookie = 3;
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS);
  EXPECT_TRUE(failed_with(a.ep, same(), GLEX_OP_PUT, 3, GLEX_ACCESS_ERROR, "wrong memory key"));
  EXPECT_TRUE(all_bytes(mem.data(), 512, kSentinel, "re-registered memory"));
  r.cookie = 4;
  r.remote_mh = new_mh;
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS);
  EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_PUT, 4, 512));
  EXPECT_TRUE(same_bytes(mem.data(), src.data, 512, "target"));
  glex_deregister_mem(t.dev, new_mh);
}

// The immediate data travel in the descriptor: the source may change once glex_rdma returned.
TEST_P(LiveApiRdma, ImmediatePutCarries1To128Bytes) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered mem(t.dev, 512, kRw);
  ASSERT_TRUE(mem.ok());
  uint64_t cookie = 0;
  for (uint64_t len : {1, 2, 63, 64, 127, 128}) {
    const uint64_t off = 8 + (len * 5) % 8;
    std::memset(mem.data, kSentinel, 512);
    uint8_t data[GLEX_IMM_MAX], want[512];
    fill_pattern(data, len, len);
    std::memset(want, kSentinel, 512);
    std::memcpy(want + off, data, len);
    glex_rdma_req r = rdma_req(t.addr(), GLEX_OP_IMM, data, 0xDEAD, len, mem.addr(off), mem.mh,
                               GLEX_FLAG_LOCAL_CQ, ++cookie);
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << len << ": " << glex_last_error();
    std::memset(data, 0xEE, sizeof data);
    EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_IMM, cookie, len)) << len;
    EXPECT_TRUE(same_bytes(mem.data, want, 512, "target")) << len;
  }
}

TEST_P(LiveApiRdma, ZeroLengthTransfersCompleteAndTouchNothing) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered local(a.dev, 64, kRw), remote(t.dev, 64, kRw);
  ASSERT_TRUE(local.ok() && remote.ok());
  std::memset(local.data, 1, 64);
  std::memset(remote.data, kSentinel, 64);
  for (uint32_t op : {GLEX_OP_PUT, GLEX_OP_GET}) {
    glex_rdma_req r = rdma_req(t.addr(), op, local.data + 8, local.mh, 0, remote.addr(8), remote.mh,
                               GLEX_FLAG_LOCAL_CQ, op);
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << glex_last_error();
    EXPECT_TRUE(completed_ok(a.ep, same(), op, op, 0)) << op;
  }
  EXPECT_TRUE(all_bytes(remote.data, 64, kSentinel, "target"));
  EXPECT_TRUE(all_bytes(local.data, 64, 1, "local"));
}

// GLEX_FLAG_REMOTE_EVT: the 16 bytes are written at the target after the data; the wait returns
// them and clears them for the next use.
TEST_P(LiveApiRdma, RemoteEventFollowsTheDataAndTheWaitClearsIt) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered src(a.dev, 4096, kRw), dst(t.dev, 4096, GLEX_MEM_WRITE), ev(t.dev, 64, kRw);
  ASSERT_TRUE(src.ok() && dst.ok() && ev.ok());
  auto* evt = reinterpret_cast<glex_event*>(ev.data);
  for (uint64_t round = 0; round < 3; ++round) {
    fill_pattern(src.data, 4096, 30 + round);
    glex_rdma_req r = rdma_req(t.addr(), GLEX_OP_PUT, src.data + round, src.mh, 3000 + round,
                               dst.addr(round), dst.mh, GLEX_FLAG_REMOTE_EVT, 0);
    r.event_addr = ev.addr();
    r.event_mh = ev.mh;
    r.event.data[0] = 0x1234 + round;
    r.event.data[1] = 0xABCD0000 + round;
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << glex_last_error();
    glex_event out{};
    ASSERT_EQ(glex_wait_event(evt, kWaitMs, &out), GLEX_SUCCESS) << round;
    EXPECT_EQ(out.data[0], 0x1234 + round);
    EXPECT_EQ(out.data[1], 0xABCD0000 + round);
    EXPECT_EQ(evt->data[0], 0u);
    EXPECT_EQ(evt->data[1], 0u);
    EXPECT_TRUE(same_bytes(dst.data + round, src.data + round, 3000 + round, "data at the event"));
  }
  EXPECT_EQ(glex_fence(a.ep, kWaitMs), GLEX_SUCCESS);
  glex_cq_entry e;
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY) << "success without GLEX_FLAG_LOCAL_CQ";
}

TEST_P(LiveApiRdma, ImmediatePutWritesTheRemoteEvent) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered dst(t.dev, 256, kRw), ev(t.dev, 16, GLEX_MEM_WRITE);
  ASSERT_TRUE(dst.ok() && ev.ok());
  uint8_t data[100];
  fill_pattern(data, 100, 40);
  glex_rdma_req r =
      rdma_req(t.addr(), GLEX_OP_IMM, data, 0, 100, dst.addr(3), dst.mh, GLEX_FLAG_REMOTE_EVT, 0);
  r.event_addr = ev.addr();
  r.event_mh = ev.mh;
  r.event.data[1] = 77;
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << glex_last_error();
  glex_event out{};
  ASSERT_EQ(glex_wait_event(reinterpret_cast<glex_event*>(ev.data), kWaitMs, &out), GLEX_SUCCESS);
  EXPECT_EQ(out.data[0], 0u);
  EXPECT_EQ(out.data[1], 77u);
  EXPECT_TRUE(same_bytes(dst.data + 3, data, 100, "target"));
}

TEST_P(LiveApiRdma, GetWritesTheRemoteEvent) {
  if (!same()) {
  }
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered dst(a.dev, 1000, kRw), src(t.dev, 1000, GLEX_MEM_READ), ev(t.dev, 16, GLEX_MEM_WRITE);
  ASSERT_TRUE(dst.ok() && src.ok() && ev.ok());
  fill_pattern(src.data, 1000, 41);
  glex_rdma_req r = rdma_req(t.addr(), GLEX_OP_GET, dst.data, dst.mh, 1000, src.addr(), src.mh,
                             GLEX_FLAG_REMOTE_EVT | GLEX_FLAG_LOCAL_CQ, 5);
  r.event_addr = ev.addr();
  r.event_mh = ev.mh;
  r.event.data[0] = 1;
  r.event.data[1] = 2;
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << glex_last_error();
  EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_GET, 5, 1000));
  EXPECT_TRUE(same_bytes(dst.data, src.data, 1000, "local buffer"));
  glex_event out{};
  ASSERT_EQ(glex_wait_event(reinterpret_cast<glex_event*>(ev.data), 1000, &out), GLEX_SUCCESS);
  EXPECT_EQ(out.data[0], 1u);
  EXPECT_EQ(out.data[1], 2u);
}

TEST_P(LiveApiRdma, AnEventThatCannotBeWrittenFailsTheOperationAndWritesNoEvent) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  Registered src(a.dev, 256, kRw), dst(t.dev, 256, kRw), ev(t.dev, 64, GLEX_MEM_WRITE),
      ev_ro(t.dev, 64, GLEX_MEM_READ);
  ASSERT_TRUE(src.ok() && dst.ok() && ev.ok() && ev_ro.ok());
  struct Case {
    const char* what;
    uint8_t* event;
    uint64_t addr;
    glex_mem_handle_t mh;
    const char* reason;
  };
  const Case cases[] = {
      {"wrong event key", ev.data, ev.addr(), ev.mh ^ 1, "wrong memory key"},
      {"read-only event memory", ev_ro.data, ev_ro.addr(), ev_ro.mh, "not registered for write"},
      {"event across the end", ev.data + 48, ev.addr(56), ev.mh, "outside the registered range"},
  };
  uint64_t cookie = 300;
  for (const Case& c : cases) {
    std::memset(ev.data, 0, 64);
    std::memset(ev_ro.data, 0, 64);
    glex_rdma_req r = rdma_req(t.addr(), GLEX_OP_PUT, src.data, src.mh, 256, dst.addr(), dst.mh,
                               GLEX_FLAG_REMOTE_EVT, ++cookie);
    r.event_addr = c.addr;
    r.event_mh = c.mh;
    r.event.data[0] = 5;
    r.event.data[1] = 6;
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << c.what << ": " << glex_last_error();
    EXPECT_TRUE(failed_with(a.ep, same(), GLEX_OP_PUT, cookie, GLEX_ACCESS_ERROR, c.reason))
        << c.what;
    EXPECT_TRUE(all_bytes(ev.data, 64, 0, "event memory")) << c.what;
    EXPECT_TRUE(all_bytes(ev_ro.data, 64, 0, "read-only event memory")) << c.what;
    glex_event out;
    EXPECT_EQ(glex_wait_event(reinterpret_cast<glex_event*>(c.event), 20, &out), GLEX_TIMEOUT)
        << c.what;
  }
}

// glex_fence waits for every descriptor of the VP; across hosts it is shown waiting while the
// target host's daemon is stopped.
TEST_P(LiveApiRdma, FenceWaitsUntilEveryDescriptorHasCompleted) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  constexpr uint64_t kSlice = 65536, kSlices = 16;
  Registered src(a.dev, kSlice * kSlices, kRw), dst(t.dev, kSlice * kSlices, GLEX_MEM_WRITE);
  ASSERT_TRUE(src.ok() && dst.ok());
  fill_pattern(src.data, kSlice * kSlices, 50);
  EXPECT_EQ(glex_fence(a.ep, 0), GLEX_SUCCESS) << "nothing posted yet";
  EXPECT_EQ(glex_fence(nullptr, 0), GLEX_INVALID_PARAM);
  const pid_t target_daemon = f().daemons()[1];
  struct Resume {
    pid_t pid;
    ~Resume() {
      if (pid > 0) kill(pid, SIGCONT);
    }
  } resume{same() ? 0 : target_daemon};
  if (!same()) {
    ASSERT_EQ(kill(target_daemon, SIGSTOP), 0);
  }
  for (uint64_t s = 0; s < kSlices; ++s) {
    glex_rdma_req r = rdma_req(t.addr(), GLEX_OP_PUT, src.data + s * kSlice, src.mh, kSlice,
                               dst.addr(s * kSlice), dst.mh, 0, s);
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << glex_last_error();
  }
  if (same()) {
    EXPECT_EQ(glex_fence(a.ep, 0), GLEX_SUCCESS) << "on one host RDMA completes in the call";
  } else {
    const auto t0 = Clock::now();
    EXPECT_EQ(glex_fence(a.ep, 50), GLEX_TIMEOUT);
    EXPECT_GE(ms_since(t0), 49);
    EXPECT_TRUE(last_error_has("outstanding"));
    kill(target_daemon, SIGCONT);
    resume.pid = 0;
  }
  ASSERT_EQ(glex_fence(a.ep, -1), GLEX_SUCCESS) << glex_last_error();  // < 0: no bound
  EXPECT_TRUE(same_bytes(dst.data, src.data, kSlice * kSlices, "target"));
  glex_cq_entry e;
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY) << "success without GLEX_FLAG_LOCAL_CQ";
  EXPECT_EQ(glex_fence(a.ep, 0), GLEX_SUCCESS);
}

TEST_P(LiveApiRdma, FenceFlagStartsAfterEveryEarlierDescriptor) {
  Port a(f(), 0, 0), t(f(), host(), k());
  ASSERT_TRUE(a.ok() && t.ok());
  constexpr uint64_t kBig = uint64_t{1} << 20;
  Registered src(a.dev, kBig + 64, kRw), dst(t.dev, 2 * kBig + 64, GLEX_MEM_WRITE);
  ASSERT_TRUE(src.ok() && dst.ok());
  fill_pattern(src.data, kBig + 64, 60);
  glex_rdma_req big = rdma_req(t.addr(), GLEX_OP_PUT, src.data, src.mh, kBig, dst.addr(), dst.mh,
                               GLEX_FLAG_LOCAL_CQ, 1);
  glex_rdma_req small =
      rdma_req(t.addr(), GLEX_OP_PUT, src.data + kBig, src.mh, 64, dst.addr(2 * kBig), dst.mh,
               GLEX_FLAG_LOCAL_CQ | GLEX_FLAG_FENCE, 2);
  ASSERT_EQ(glex_rdma(a.ep, &big), GLEX_SUCCESS);
  ASSERT_EQ(glex_rdma(a.ep, &small), GLEX_SUCCESS);
  // The big put had completed before the fenced one started: its entry is already there.
  EXPECT_TRUE(completed_ok(a.ep, true, GLEX_OP_PUT, 1, kBig));
  EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_PUT, 2, 64));
  // An MP with GLEX_FLAG_FENCE leaves after the RDMA before it, so its receiver sees the data.
  big = rdma_req(t.addr(), GLEX_OP_PUT, src.data, src.mh, kBig, dst.addr(kBig), dst.mh, 0, 3);
  ASSERT_EQ(glex_rdma(a.ep, &big), GLEX_SUCCESS);
  ASSERT_EQ(glex_send_mp(a.ep, t.addr(), "after", 5, GLEX_FLAG_FENCE), GLEX_SUCCESS);
  EXPECT_EQ(glex_fence(a.ep, 0), GLEX_SUCCESS) << "the fenced MP left before the put completed";
  glex_mp mp;
  ASSERT_EQ(glex_recv_mp(t.ep, kWaitMs, &mp), GLEX_SUCCESS);
  EXPECT_TRUE(same_bytes(dst.data + kBig, src.data, kBig, "data before the fenced MP"));
}

INSTANTIATE_TEST_SUITE_P(LiveApi, LiveApiRdma, ::testing::Values(kSameHost, kCrossHost),
                         SideName());

TEST(LiveApiEvent, WaitTimesOutOnAnEmptyEventAndChecksItsArguments) {
  glex_event evt{}, out{};
  const auto t0 = Clock::now();
  EXPECT_EQ(glex_wait_event(&evt, 30, &out), GLEX_TIMEOUT);
  EXPECT_GE(ms_since(t0), 29);
  EXPECT_TRUE(last_error_has("within 30 ms"));
  EXPECT_EQ(glex_wait_event(nullptr, 0, &out), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_wait_event(&evt, 0, nullptr), GLEX_INVALID_PARAM);
  // An event already written returns at once, even with timeout 0, and is cleared.
  evt.data[0] = 3;
  evt.data[1] = 4;
  ASSERT_EQ(glex_wait_event(&evt, 0, &out), GLEX_SUCCESS);
  EXPECT_EQ(out.data[0], 3u);
  EXPECT_EQ(out.data[1], 4u);
  EXPECT_EQ(evt.data[0], 0u);
  EXPECT_EQ(evt.data[1], 0u);
}

// ---- RDMA data: any length, any alignment, any kind of target memory --------------------------

enum class Owner { kMalloc, kAllocMem, kChildMalloc, kChildAllocMem };
struct DataParam {
  Side side;
  Owner owner;
};

void PrintTo(const DataParam& p, std::ostream* os) {
  *os << p.side.name << " owner " << static_cast<int>(p.owner);
}

std::string data_param_name(const ::testing::TestParamInfo<DataParam>& i) {
  static const char* const kOwner[] = {"malloc", "alloc_mem", "child_malloc", "child_alloc_mem"};
  return std::string(i.param.side.name) + "_" + kOwner[static_cast<int>(i.param.owner)];
}

struct Shape {
  uint64_t len, src, dst;  // bytes, source and destination offsets 0..7
};
std::vector<Shape> shapes() {
  std::vector<Shape> v;
  for (uint64_t len : {uint64_t{1}, uint64_t{7}, uint64_t{128}, uint64_t{129}, uint64_t{4095},
                       uint64_t{65536 + 3}, (uint64_t{1} << 20) + 5}) {
    if (len < (uint64_t{1} << 20)) {
      for (auto [s, d] : {std::pair{0, 0}, {1, 6}, {7, 3}, {4, 4}})
        v.push_back({len, uint64_t(s), uint64_t(d)});
    } else {
      for (auto [s, d] : {std::pair{0, 0}, {3, 5}}) v.push_back({len, uint64_t(s), uint64_t(d)});
    }
  }
  return v;
}

class LiveApiRdmaData : public LiveApiSuite, public ::testing::WithParamInterface<DataParam> {
 protected:
  static constexpr uint64_t kBuf = (uint64_t{1} << 20) + 8192;
  static constexpr uint64_t kGuard = 8;  // bytes before the range, checked untouched

  void SetUp() override {
    LiveApiSuite::SetUp();
    if (HasFatalFailure()) return;
    const DataParam& p = GetParam();
    const bool shared = p.owner == Owner::kAllocMem || p.owner == Owner::kChildAllocMem;
    init_ = std::make_unique<Port>(f(), 0, 0);
    ASSERT_TRUE(init_->ok()) << glex_last_error();
    local_ = std::make_unique<Registered>(init_->dev, kBuf, kRw, shared);
    ASSERT_TRUE(local_->ok()) << glex_last_error();
    if (p.owner == Owner::kChildMalloc || p.owner == Owner::kChildAllocMem) {
      child_ = std::make_unique<ChildTarget>(f(), p.side.host, p.side.k, shared, kBuf, init_->ep);
      ASSERT_TRUE(child_->ok()) << "the target process did not report";
      remote_ = child_->mem;
      target_ = child_->ep;
    } else {
      tport_ = std::make_unique<Port>(f(), p.side.host, p.side.k);
      ASSERT_TRUE(tport_->ok()) << glex_last_error();
      treg_ = std::make_unique<Registered>(tport_->dev, kBuf, kRw, shared);
      ASSERT_TRUE(treg_->ok()) << glex_last_error();
      remote_ = Memory{0, treg_->addr(), kBuf, treg_->mh};
      target_ = tport_->addr();
    }
  }
  void TearDown() override {
    if (child_ && child_->ok()) {
      EXPECT_EQ(child_->finish(), 0);
    }
  }
  bool same() const { return GetParam().side.host == 0; }

  std::unique_ptr<Port> init_, tport_;
  std::unique_ptr<Registered> local_, treg_;
  std::unique_ptr<ChildTarget> child_;
  Memory remote_;
  glex_ep_addr_t target_ = 0;
};

TEST_P(LiveApiRdmaData, PutOfAnyLengthAndAlignmentWritesExactlyItsRange) {
  std::vector<uint8_t> want, got;
  uint64_t cookie = 0;
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(fmt::format("len {} source +{} destination +{}", s.len, s.src, s.dst));
    const uint64_t window = std::min(kBuf, kGuard + s.dst + s.len + 4096);
    want.assign(window, kSentinel);
    ASSERT_TRUE(remote_.write(0, want.data(), window));
    ++cookie;
    fill_pattern(local_->data + kGuard + s.src, s.len, cookie);
    fill_pattern(want.data() + kGuard + s.dst, s.len, cookie);
    glex_rdma_req r =
        rdma_req(target_, GLEX_OP_PUT, local_->data + kGuard + s.src, local_->mh, s.len,
                 remote_.addr + kGuard + s.dst, remote_.mh, GLEX_FLAG_LOCAL_CQ, cookie);
    ASSERT_EQ(glex_rdma(init_->ep, &r), GLEX_SUCCESS) << glex_last_error();
    ASSERT_TRUE(completed_ok(init_->ep, same(), GLEX_OP_PUT, cookie, s.len));
    got.resize(window);
    ASSERT_TRUE(remote_.read(0, got.data(), window));
    ASSERT_TRUE(same_bytes(got.data(), want.data(), window, "target"));
  }
}

TEST_P(LiveApiRdmaData, GetOfAnyLengthAndAlignmentWritesExactlyItsRange) {
  std::vector<uint8_t> want, pattern;
  uint64_t cookie = 0;
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(fmt::format("len {} source +{} destination +{}", s.len, s.src, s.dst));
    const uint64_t window = std::min(kBuf, kGuard + s.dst + s.len + 4096);
    ++cookie;
    pattern.resize(s.len);
    fill_pattern(pattern.data(), s.len, cookie + 1000);
    ASSERT_TRUE(remote_.write(kGuard + s.src, pattern.data(), s.len));
    std::memset(local_->data, kSentinel, window);
    want.assign(window, kSentinel);
    std::memcpy(want.data() + kGuard + s.dst, pattern.data(), s.len);
    glex_rdma_req r =
        rdma_req(target_, GLEX_OP_GET, local_->data + kGuard + s.dst, local_->mh, s.len,
                 remote_.addr + kGuard + s.src, remote_.mh, GLEX_FLAG_LOCAL_CQ, cookie);
    ASSERT_EQ(glex_rdma(init_->ep, &r), GLEX_SUCCESS) << glex_last_error();
    ASSERT_TRUE(completed_ok(init_->ep, same(), GLEX_OP_GET, cookie, s.len));
    ASSERT_TRUE(same_bytes(local_->data, want.data(), window, "local buffer"));
  }
}

INSTANTIATE_TEST_SUITE_P(LiveApi, LiveApiRdmaData,
                         ::testing::Values(DataParam{kSameHost, Owner::kMalloc},
                                           DataParam{kSameHost, Owner::kAllocMem},
                                           DataParam{kSameHost, Owner::kChildMalloc},
                                           DataParam{kSameHost, Owner::kChildAllocMem},
                                           DataParam{kCrossHost, Owner::kMalloc},
                                           DataParam{kCrossHost, Owner::kAllocMem},
                                           DataParam{kCrossHost, Owner::kChildMalloc},
                                           DataParam{kCrossHost, Owner::kChildAllocMem}),
                         data_param_name);

// ---- Memory of another process ----------------------------------------------------------------

struct PeerParam {
  Side side;
  bool shared;
};

void PrintTo(const PeerParam& p, std::ostream* os) {
  *os << p.side.name << (p.shared ? " alloc_mem" : " malloc");
}

class LiveApiPeer : public LiveApiSuite, public ::testing::WithParamInterface<PeerParam> {
 protected:
  bool same() const { return GetParam().side.host == 0; }
  int host() const { return GetParam().side.host; }
  int k() const { return GetParam().side.k; }
};

TEST_P(LiveApiPeer, TheRegistrationOfAnotherProcessIsNotOursToDeregisterNorOurLocalMemory) {
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok());
  ChildTarget c(f(), host(), k(), GetParam().shared, 4096, a.ep);
  ASSERT_TRUE(c.ok());
  Port t(f(), host(), k());  // on the child's NIC
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(glex_deregister_mem(t.dev, c.mem.mh), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("not a registration of this process"));
  Registered mine(a.dev, 4096, kRw);
  ASSERT_TRUE(mine.ok());
  glex_rdma_req r = rdma_req(a.addr(), GLEX_OP_PUT, reinterpret_cast<void*>(c.mem.addr), c.mem.mh,
                             64, mine.addr(), mine.mh, 0, 1);
  EXPECT_EQ(glex_rdma(t.ep, &r), GLEX_ACCESS_ERROR);
  EXPECT_TRUE(last_error_has("not this process's memory"));
  // The registration is intact for its peers.
  Registered src(a.dev, 4096, kRw);
  fill_pattern(src.data, 4096, 70);
  r = rdma_req(c.ep, GLEX_OP_PUT, src.data, src.mh, 4096, c.mem.addr, c.mem.mh, GLEX_FLAG_LOCAL_CQ,
               2);
  ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS);
  EXPECT_TRUE(completed_ok(a.ep, same(), GLEX_OP_PUT, 2, 4096));
  std::vector<uint8_t> got(4096);
  ASSERT_TRUE(c.mem.read(0, got.data(), 4096));
  EXPECT_TRUE(same_bytes(got.data(), src.data, 4096, "target"));
  EXPECT_EQ(c.finish(), 0);
}

// The target process died: puts and gets are refused (the process is gone, or its registration
// was already reclaimed), never reported as done.
TEST_P(LiveApiPeer, AGoneTargetProcessIsRefused) {
  if (same() && GetParam().shared) {
  }
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok());
  Registered src(a.dev, 4096, kRw), dst(a.dev, 4096, kRw);
  ASSERT_TRUE(src.ok() && dst.ok());
  fill_pattern(src.data, 4096, 80);
  ChildTarget c(f(), host(), k(), GetParam().shared, 4096, a.ep);
  ASSERT_TRUE(c.ok());
  glex_rdma_req put = rdma_req(c.ep, GLEX_OP_PUT, src.data, src.mh, 4096, c.mem.addr, c.mem.mh,
                               GLEX_FLAG_LOCAL_CQ, 1);
  ASSERT_EQ(glex_rdma(a.ep, &put), GLEX_SUCCESS);
  ASSERT_TRUE(completed_ok(a.ep, same(), GLEX_OP_PUT, 1, 4096));
  c.kill_now();
  // A same-host initiator checks a shared-memory owner's life at most every ~1 ms
  // (docs/live.md): past that window the dead owner is never written to.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (uint32_t op : {GLEX_OP_PUT, GLEX_OP_GET}) {
    std::memset(dst.data, kSentinel, 4096);
    glex_rdma_req r = rdma_req(c.ep, op, op == GLEX_OP_PUT ? src.data : dst.data,
                               op == GLEX_OP_PUT ? src.mh : dst.mh, 4096, c.mem.addr, c.mem.mh,
                               GLEX_FLAG_LOCAL_CQ, 10 + op);
    ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << glex_last_error();
    glex_cq_entry e;
    ASSERT_TRUE(next_entry(a.ep, same(), &e));
    EXPECT_EQ(e.cookie, 10 + op);
    EXPECT_TRUE(e.status == GLEX_PEER_DEAD || e.status == GLEX_ACCESS_ERROR)
        << "op " << op << ": " << glex_error_string(e.status) << " '" << e.reason << "'";
    EXPECT_EQ(e.bytes, 0u);
    EXPECT_TRUE(all_bytes(dst.data, 4096, kSentinel, "local buffer"));
  }
}

std::string peer_param_name(const ::testing::TestParamInfo<PeerParam>& i) {
  return std::string(i.param.side.name) + (i.param.shared ? "_alloc_mem" : "_malloc");
}

INSTANTIATE_TEST_SUITE_P(LiveApi, LiveApiPeer,
                         ::testing::Values(PeerParam{kSameHost, false}, PeerParam{kSameHost, true},
                                           PeerParam{kCrossHost, false},
                                           PeerParam{kCrossHost, true}),
                         peer_param_name);

// ---- Bootstrap --------------------------------------------------------------------------------

class LiveApiBootstrap : public LiveApiSuite {
 protected:
  void SetUp() override {
    LiveApiSuite::SetUp();
    char tmpl[] = "/tmp/glex-rendezvous-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  // In a child: the job's environment (value nullptr: unset).
  static void env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    unsetenv("PMIX_RANK");
    for (const auto& [k, v] : vars) v ? setenv(k, v, 1) : unsetenv(k);
  }
  std::string dir_;
};

TEST_F(LiveApiBootstrap, TwoRanksLearnRankSizeAndEachOthersAddressThenTalk) {
  const LiveFabricUnderTest& fab = f();
  auto rank = [&](uint32_t me) {
    return fork_child([&, me]() -> int {
      env({{"GLEX_RANK", me ? "1" : "0"},
           {"GLEX_SIZE", "2"},
           {"GLEX_RENDEZVOUS", dir_.c_str()},
           {"GLEX_BOOTSTRAP_TIMEOUT_MS", nullptr}});
      Port p(fab, static_cast<int>(me), 0);  // rank 0 on host h1, rank 1 on host h2
      if (!p.ok()) return 10;
      uint32_t r = 99, n = 99;
      glex_ep_addr_t* addrs = nullptr;
      if (glex_bootstrap(p.ep, &r, &n, &addrs) != GLEX_SUCCESS) return 11;
      if (r != me || n != 2 || !addrs) return 12;
      if (addrs[me] != p.addr()) return 13;
      const glex_ep_addr_t peer = addrs[1 - me];
      std::free(addrs);
      if (GLEX_EP_ADDR_NODE(peer) != fab.nic(static_cast<int>(1 - me), 0)) return 14;
      glex_mp mp;
      if (me == 0) {
        if (send_retry(p.ep, peer, "ping", 4) != GLEX_SUCCESS) return 15;
        if (glex_recv_mp(p.ep, kWaitMs, &mp) != GLEX_SUCCESS) return 16;
        return mp.src == peer && mp.len == 4 && std::memcmp(mp.data, "pong", 4) == 0 ? 0 : 17;
      }
      if (glex_recv_mp(p.ep, kWaitMs, &mp) != GLEX_SUCCESS) return 18;
      if (mp.src != peer || mp.len != 4 || std::memcmp(mp.data, "ping", 4) != 0) return 19;
      return send_retry(p.ep, peer, "pong", 4) == GLEX_SUCCESS ? 0 : 20;
    });
  };
  pid_t r0 = rank(0), r1 = rank(1);
  EXPECT_EQ(wait_exit(r0, 20), 0);
  EXPECT_EQ(wait_exit(r1, 20), 0);
}

TEST_F(LiveApiBootstrap, RankAndSizeMustBeGivenAndConsistent) {
  const LiveFabricUnderTest& fab = f();
  pid_t pid = fork_child([&]() -> int {
    Port p(fab, 0, 0);
    if (!p.ok()) return 10;
    uint32_t r, n;
    glex_ep_addr_t* addrs = nullptr;
    auto refused = [&](const char* part) {
      return glex_bootstrap(p.ep, &r, &n, &addrs) == GLEX_INVALID_PARAM && !addrs &&
             std::strstr(glex_last_error(), part);
    };
    env({{"GLEX_RANK", nullptr}, {"GLEX_SIZE", "2"}, {"GLEX_RENDEZVOUS", dir_.c_str()}});
    if (!refused("GLEX_RANK")) return 1;
    env({{"GLEX_RANK", "0"}, {"GLEX_SIZE", nullptr}});
    if (!refused("GLEX_SIZE")) return 2;
    env({{"GLEX_SIZE", "2"}, {"GLEX_RENDEZVOUS", nullptr}});
    if (!refused("GLEX_RENDEZVOUS")) return 3;
    env({{"GLEX_RENDEZVOUS", dir_.c_str()}, {"GLEX_RANK", "2"}});
    if (!refused("GLEX_RANK = '2'")) return 4;
    env({{"GLEX_RANK", "0"}, {"GLEX_SIZE", "0"}});
    if (!refused("GLEX_SIZE = '0'")) return 5;
    if (glex_bootstrap(nullptr, &r, &n, &addrs) != GLEX_INVALID_PARAM) return 6;
    if (glex_bootstrap(p.ep, nullptr, &n, &addrs) != GLEX_INVALID_PARAM) return 7;
    if (glex_bootstrap(p.ep, &r, nullptr, &addrs) != GLEX_INVALID_PARAM) return 8;
    if (glex_bootstrap(p.ep, &r, &n, nullptr) != GLEX_INVALID_PARAM) return 9;
    return 0;
  });
  EXPECT_EQ(wait_exit(pid), 0);
}

TEST_F(LiveApiBootstrap, ARankThatIsNotANumberIsRefused) {
  const LiveFabricUnderTest& fab = f();
  pid_t pid = fork_child([&]() -> int {
    Port p(fab, 0, 0);
    if (!p.ok()) return 10;
    env({{"GLEX_RANK", "x"}, {"GLEX_SIZE", "1"}, {"GLEX_RENDEZVOUS", dir_.c_str()}});
    uint32_t r, n;
    glex_ep_addr_t* addrs = nullptr;
    return glex_bootstrap(p.ep, &r, &n, &addrs) == GLEX_INVALID_PARAM ? 0 : 1;
  });
  EXPECT_EQ(wait_exit(pid), 0);
}

TEST_F(LiveApiBootstrap, ARankThatNeverComesTimesOut) {
  const LiveFabricUnderTest& fab = f();
  pid_t pid = fork_child([&]() -> int {
    env({{"GLEX_RANK", "0"},
         {"GLEX_SIZE", "2"},
         {"GLEX_RENDEZVOUS", dir_.c_str()},
         {"GLEX_BOOTSTRAP_TIMEOUT_MS", "200"}});
    Port p(fab, 0, 0);
    if (!p.ok()) return 10;
    uint32_t r, n;
    glex_ep_addr_t* addrs = nullptr;
    const auto t0 = Clock::now();
    if (glex_bootstrap(p.ep, &r, &n, &addrs) != GLEX_TIMEOUT || addrs) return 1;
    const int64_t ms = ms_since(t0);
    if (ms < 199 || ms > 5000) return 2;
    return std::strstr(glex_last_error(), "rank 1") ? 0 : 3;
  });
  EXPECT_EQ(wait_exit(pid), 0);
}

// ---- Management -------------------------------------------------------------------------------

class LiveApiMgmt : public LiveApiSuite {};

// A register read of the NRC next to our NIC: a request with an empty forward route is absorbed
// by the first NRC, and the backward route leads out of its port towards the NIC.
TEST_F(LiveApiMgmt, RegisterReadOfTheFirstNrcRoundTrips) {
  Port p(f(), 0, 0);
  ASSERT_TRUE(p.ok());
  const uint32_t nic = f().nic(0, 0);
  const fabric::PortRef up = f().fabric().topology.peer({nic, 0}).value();
  glex_mgmt_info req{};
  req.dest_id = static_cast<uint16_t>(up.node);
  req.dest_type = GLEX_CHIP_NRC;
  req.backward_route.hop_num = 1;
  req.backward_route.hops[0] = up.port;
  req.nmp_type = 0x01;  // register read request
  req.count = 1;
  req.address[0] = chip::reg::kChipId;
  for (uint16_t i = 0; i < 2; ++i) {
    ASSERT_EQ(glex_send_mgmt_req(p.ep, &req, GLEX_MGMT_AUTO_TID), GLEX_SUCCESS)
        << glex_last_error();
    EXPECT_EQ(req.transaction_id, i);
    EXPECT_EQ(req.dest_vp, glex_ep_vp(p.ep));
    glex_mgmt_info ack{};
    ASSERT_EQ(glex_receive_mgmt_ack(p.ep, 1000, &ack), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(ack.nmp_type, 0x02);  // register read response
    EXPECT_EQ(ack.transaction_id, i);
    EXPECT_EQ(ack.src_id, up.node);
    EXPECT_EQ(ack.src_type, GLEX_CHIP_NRC);
    EXPECT_EQ(ack.dest_vp, glex_ep_vp(p.ep));
    EXPECT_EQ(ack.value[0] & 0xFFFF, up.node);
    EXPECT_EQ((ack.value[0] >> 16) & 1, 1u) << "chip id configured";
  }
  glex_cq_entry e;
  EXPECT_EQ(glex_poll_cq(p.ep, &e), GLEX_NO_ENTRY);
}

// The live NIC takes management descriptors only on DMA VPs (the simulated engine already refuses
// such an endpoint): the refusal comes back as a CQ entry.
TEST_F(LiveApiMgmt, AManagementRequestFromAPioVpIsRefusedByTheNic) {
  Port p(f(), 0, 0, 3);
  ASSERT_TRUE(p.ok()) << glex_last_error();
  const fabric::PortRef up = f().fabric().topology.peer({f().nic(0, 0), 0}).value();
  glex_mgmt_info req{};
  req.dest_id = static_cast<uint16_t>(up.node);
  req.dest_type = GLEX_CHIP_NRC;
  req.backward_route.hop_num = 1;
  req.backward_route.hops[0] = up.port;
  req.nmp_type = 0x01;
  req.count = 1;
  req.address[0] = chip::reg::kChipId;
  ASSERT_EQ(glex_send_mgmt_req(p.ep, &req, 0), GLEX_SUCCESS) << glex_last_error();
  glex_cq_entry e{};
  ASSERT_EQ(glex_wait_cq(p.ep, 1000, &e), GLEX_SUCCESS);
  EXPECT_EQ(e.status, GLEX_DESCRIPTOR_ERROR);
  EXPECT_NE(e.error_id, 0);
  EXPECT_NE(std::strstr(e.reason, "PIO"), nullptr) << e.reason;
  glex_mgmt_info ack;
  EXPECT_EQ(glex_receive_mgmt_ack(p.ep, 20, &ack), GLEX_TIMEOUT);
}

// ---- A fabric whose routes are not loaded yet -------------------------------------------------

class LiveApiNoRoutes : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    fabric_ = new LiveFabricUnderTest(2);
    up_ = fabric_->wait_up();
  }
  static void TearDownTestSuite() {
    delete fabric_;
    fabric_ = nullptr;
  }

 protected:
  void SetUp() override { ASSERT_TRUE(up_) << "daemons or links not up"; }
  static inline LiveFabricUnderTest* fabric_ = nullptr;
  static inline bool up_ = false;
};

TEST_F(LiveApiNoRoutes, EverythingBetweenNicsIsUnreachable) {
  Port a(*fabric_, 0, 0), b(*fabric_, 0, 1), c(*fabric_, 1, 0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << glex_last_error();
  // An MP leaves, on this host as across hosts; the switch next to the sender has no route for
  // it, discards it and refuses it to the sender (chip/refusal.h), whose CQ says so.
  for (const Port* to : {&b, &c}) {
    ASSERT_EQ(glex_send_mp(a.ep, to->addr(), "x", 1, 0), GLEX_SUCCESS) << glex_last_error();
    glex_cq_entry e{};
    ASSERT_EQ(glex_wait_cq(a.ep, 1000, &e), GLEX_SUCCESS);
    EXPECT_EQ(e.status, GLEX_UNREACHABLE);
    EXPECT_EQ(e.op, uint32_t{GLEX_OP_MP});
    EXPECT_EQ(e.error_id, chip::kErrNoUsableRoute) << e.reason;
    glex_mp mp;
    EXPECT_EQ(glex_recv_mp(to->ep, 0, &mp), GLEX_NO_ENTRY);
  }
  Registered local(a.dev, 256, kRw), near(b.dev, 256, kRw), far(c.dev, 256, kRw);
  ASSERT_TRUE(local.ok() && near.ok() && far.ok());
  std::memset(near.data, kSentinel, 256);
  std::memset(far.data, kSentinel, 256);
  std::memset(local.data, 1, 256);
  uint64_t cookie = 0;
  for (const Registered* t : {&near, &far}) {
    const glex_ep_addr_t to = t == &near ? b.addr() : c.addr();
    const bool immediate = t == &near;
    for (uint32_t op : {GLEX_OP_PUT, GLEX_OP_GET}) {
      glex_rdma_req r = rdma_req(to, op, local.data, local.mh, 256, t->addr(), t->mh, 0, ++cookie);
      ASSERT_EQ(glex_rdma(a.ep, &r), GLEX_SUCCESS) << glex_last_error();
      EXPECT_TRUE(failed_with(a.ep, immediate, op, cookie, GLEX_UNREACHABLE, "no route"))
          << (immediate ? "same host op " : "cross host op ") << op;
    }
    EXPECT_TRUE(all_bytes(t->data, 256, kSentinel, "target"));
  }
  EXPECT_TRUE(all_bytes(local.data, 256, 1, "local buffer"));
  EXPECT_EQ(glex_fence(a.ep, 1000), GLEX_SUCCESS);
}

// ---- Error strings ----------------------------------------------------------------------------

TEST(LiveApiErrorString, EveryStatusHasItsOwnText) {
  std::set<std::string> texts;
  const std::string unknown = glex_error_string(static_cast<glex_ret_t>(99));
  EXPECT_FALSE(unknown.empty());
  for (int r = GLEX_SUCCESS; r <= GLEX_UNSUPPORTED; ++r) {
    const char* s = glex_error_string(static_cast<glex_ret_t>(r));
    ASSERT_NE(s, nullptr) << r;
    EXPECT_STRNE(s, "") << r;
    EXPECT_NE(std::string(s), unknown) << r;
    texts.insert(s);
  }
  EXPECT_EQ(texts.size(), size_t{GLEX_UNSUPPORTED} + 1);
}

// Frames between the daemons as small as they may be (`fabricd --frame-bytes 1200`, a frame in
// one packet of IPv6's minimum MTU): a put and a get of 1 MiB and 3 bytes between hosts arrive
// whole, some 1,600 frames each way; a size outside the range is refused by name.
TEST(LiveFrames, TheSmallestFramesCarryPutsAndGetsBetweenHostsWhole) {
  DaemonOptions bad;
  bad.frame_bytes = kMinFrameBytes - 1;
  auto spec = parse_live_fabric("live:fattree:k=4,levels=2,hosts=h1:127.0.0.1:1,h2:127.0.0.1:2");
  ASSERT_TRUE(spec.ok());
  auto refused = FabricDaemon::start(*spec, 0, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, 4745);
  EXPECT_NE(refused.error().message.find(fmt::format("frame_bytes = {}", kMinFrameBytes - 1)),
            std::string::npos)
      << refused.error().message;

  DaemonOptions o;
  o.frame_bytes = kMinFrameBytes;
  LiveFabricUnderTest f(2, "fattree:k=4,levels=2", o);
  ASSERT_TRUE(f.bring_up().ok());
  Port a(f, 0, 0), t(f, 1, 0);
  ASSERT_TRUE(a.ok() && t.ok()) << glex_last_error();
  constexpr uint64_t kLen = (uint64_t{1} << 20) + 3;
  Registered src(a.dev, kLen, kRw), dst(t.dev, kLen, kRw), back(a.dev, kLen, kRw);
  ASSERT_TRUE(src.ok() && dst.ok() && back.ok());
  fill_pattern(src.data, kLen, 71);
  std::memset(back.data, kSentinel, kLen);
  glex_rdma_req put = rdma_req(t.addr(), GLEX_OP_PUT, src.data, src.mh, kLen, dst.addr(), dst.mh,
                               GLEX_FLAG_LOCAL_CQ, 1);
  ASSERT_EQ(glex_rdma(a.ep, &put), GLEX_SUCCESS) << glex_last_error();
  ASSERT_TRUE(completed_ok(a.ep, false, GLEX_OP_PUT, 1, kLen));
  EXPECT_TRUE(same_bytes(dst.data, src.data, kLen, "put"));
  glex_rdma_req get = rdma_req(t.addr(), GLEX_OP_GET, back.data, back.mh, kLen, dst.addr(), dst.mh,
                               GLEX_FLAG_LOCAL_CQ, 2);
  ASSERT_EQ(glex_rdma(a.ep, &get), GLEX_SUCCESS) << glex_last_error();
  ASSERT_TRUE(completed_ok(a.ep, false, GLEX_OP_GET, 2, kLen));
  EXPECT_TRUE(same_bytes(back.data, src.data, kLen, "get"));
}

}  // namespace
}  // namespace galaxy::live::testing
