// The direct path between processes of different hosts (engine/live/direct.h, glex/direct_path.h;
// docs/live.md "The direct path"): an MP to a VP on the host the path enters crosses from the
// sending process to the owner's process over their own Link, not through the daemons; the link
// layer repairs a lossy wire; whatever the receiving process cannot deliver goes to its daemon,
// which refuses it; a peer that dies has what it did not acknowledge refused, not lost.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "live_fixture.h"

namespace galaxy::live::testing {
namespace {

using DirectClock = std::chrono::steady_clock;

// Sends `n` numbered MPs from `from` to `to`, taking each at `to` as it comes (the sender never
// waits for more than the link's window). In trains of `train` MPs: all but a train's last say
// GLEX_FLAG_MORE.
::testing::AssertionResult stream(glex_ep_handle_t from, glex_ep_handle_t to, uint64_t n,
                                  uint64_t train = 1) {
  uint64_t sent = 0, got = 0;
  const auto deadline = DirectClock::now() + std::chrono::seconds(60);
  while (got < n) {
    if (DirectClock::now() > deadline)
      return ::testing::AssertionFailure() << "sent " << sent << ", got " << got << " in 60 s";
    if (sent < n) {
      const uint32_t len = 9 + static_cast<uint32_t>(sent % 112);
      uint8_t data[120] = {};
      std::memcpy(data, &sent, sizeof sent);
      data[len - 1] = static_cast<uint8_t>(sent);
      const bool more = (sent + 1) % train != 0 && sent + 1 != n;
      const glex_ret_t r =
          glex_send_mp(from, glex_ep_addr(to), data, len, more ? GLEX_FLAG_MORE : 0);
      if (r == GLEX_SUCCESS)
        ++sent;
      else if (r != GLEX_BUSY)
        return ::testing::AssertionFailure() << "send " << sent << ": " << glex_last_error();
    }
    glex_mp mp;
    const glex_ret_t r = glex_recv_mp(to, sent == n ? 1000 : 0, &mp);
    if (r == GLEX_NO_ENTRY) continue;
    if (r != GLEX_SUCCESS)
      return ::testing::AssertionFailure() << "receive " << got << ": " << glex_last_error();
    uint64_t seq;
    std::memcpy(&seq, mp.data, sizeof seq);
    const uint32_t want = 9 + static_cast<uint32_t>(got % 112);
    if (seq != got || mp.len != want || mp.data[want - 1] != static_cast<uint8_t>(got) ||
        mp.src != glex_ep_addr(from))
      return ::testing::AssertionFailure()
             << "MP " << got << " came as seq " << seq << " of " << mp.len << " bytes";
    ++got;
  }
  glex_mp extra;
  if (glex_recv_mp(to, 50, &extra) != GLEX_TIMEOUT)
    return ::testing::AssertionFailure() << "an MP beyond the " << n << " sent (a duplicate)";
  return ::testing::AssertionSuccess();
}

class LiveDirect : public LiveTwoHostSuite {};

// With both daemons stopped, MPs still cross between the hosts both ways, every one once and in
// order: they go from process to process.
TEST_F(LiveDirect, MpsCrossBetweenHostsWhileBothDaemonsAreStopped) {
  Port a(f(), 0, 0), b(f(), 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  // The first MP each way asks the target host's daemon where the owner receives.
  ASSERT_TRUE(stream(a.ep, b.ep, 1));
  ASSERT_TRUE(stream(b.ep, a.ep, 1));
  DaemonsStopped stopped(f());
  EXPECT_TRUE(stream(a.ep, b.ep, 2000));
  EXPECT_TRUE(stream(b.ep, a.ep, 2000));
}

// Trains of MPs (GLEX_FLAG_MORE) share frames: every MP still arrives once and in order, trains
// longer than a frame holds included; and an MP that said more would follow, with nothing after
// it, leaves by itself within the sender's lease while the sender does nothing.
TEST_F(LiveDirect, TrainsOfMpsArriveOnceAndInOrderAndAHeldMpLeavesByItself) {
  Port a(f(), 0, 0), b(f(), 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  ASSERT_TRUE(stream(a.ep, b.ep, 1));
  ASSERT_TRUE(stream(b.ep, a.ep, 1));
  DaemonsStopped stopped(f());
  EXPECT_TRUE(stream(a.ep, b.ep, 3000, 40));
  EXPECT_TRUE(stream(b.ep, a.ep, 3000, 100));  // 100 MPs are more than one frame
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(glex_send_mp(a.ep, b.addr(), &i, sizeof i, GLEX_FLAG_MORE), GLEX_SUCCESS)
        << glex_last_error();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the sender neither sends nor polls
  for (int i = 0; i < 3; ++i) {
    glex_mp mp;
    ASSERT_EQ(glex_recv_mp(b.ep, 2000, &mp), GLEX_SUCCESS) << "held MP " << i << " never left";
    int got;
    std::memcpy(&got, mp.data, sizeof got);
    EXPECT_EQ(got, i);
  }
}

// The target's endpoint closes after its process's link came up: the process hands the MP to
// its daemon, which refuses it, and the sender's CQ says so.
TEST_F(LiveDirect, AnMpForAnEndpointClosedAfterTheLinkCameUpIsRefusedByItsDaemon) {
  Port a(f(), 0, 0);
  glex_device_handle_t d = f().open(1, 0);
  ASSERT_TRUE(a.ok() && d) << glex_last_error();
  glex_ep_handle_t e = nullptr;
  glex_ep_attr attr{-1};
  ASSERT_EQ(glex_create_ep(d, &attr, &e), GLEX_SUCCESS) << glex_last_error();
  ASSERT_TRUE(stream(a.ep, e, 3));
  glex_ep_handle_t other = nullptr;  // the process goes on with another endpoint
  ASSERT_EQ(glex_create_ep(d, &attr, &other), GLEX_SUCCESS);
  const glex_ep_addr_t gone = glex_ep_addr(e);
  ASSERT_EQ(glex_destroy_ep(e), GLEX_SUCCESS);
  ASSERT_EQ(glex_send_mp(a.ep, gone, "late", 4, 0), GLEX_SUCCESS) << glex_last_error();
  // The closed VP's process keeps its socket: it takes the MP and gives it to its daemon.
  glex_cq_entry c{};
  const auto t0 = DirectClock::now();
  glex_ret_t r = GLEX_TIMEOUT;
  while (r != GLEX_SUCCESS && DirectClock::now() - t0 < std::chrono::seconds(2)) {
    glex_mp mp;
    (void)glex_recv_mp(other, 1, &mp);  // the receiving process polls its socket
    r = glex_poll_cq(a.ep, &c);
  }
  ASSERT_EQ(r, GLEX_SUCCESS) << "no refusal within 2 s";
  EXPECT_EQ(c.status, GLEX_UNREACHABLE);
  EXPECT_EQ(c.op, uint32_t{GLEX_OP_MP});
  EXPECT_NE(std::strstr(c.reason, "not open"), nullptr) << c.reason;
  EXPECT_EQ(glex_destroy_ep(other), GLEX_SUCCESS);
  EXPECT_EQ(glex_close_device(d), GLEX_SUCCESS);
}

// A receiver killed while its link is up: the sender's link gives up after its dead time, what
// it had not acknowledged goes through the daemons, and the receiver's daemon refuses each MP
// (its owner is gone): every one is reported in the sender's CQ, none hangs.
TEST_F(LiveDirect, TheMpsOfAReceiverThatDiedAreRefusedNotLost) {
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok()) << glex_last_error();
  const glex_ep_addr_t to = a.addr();
  const LiveFabricUnderTest& fab = f();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    Port c(fab, 1, 0);
    if (!c.ok() || glex_send_mp(c.ep, to, "here", 4, 0) != GLEX_SUCCESS) _exit(10);
    glex_mp mp;
    if (glex_recv_mp(c.ep, kWaitMs, &mp) != GLEX_SUCCESS) _exit(11);
    (void)!write(ready[1], "r", 1);
    for (;;) pause();
  }
  glex_mp mp;
  ASSERT_EQ(glex_recv_mp(a.ep, kWaitMs, &mp), GLEX_SUCCESS) << glex_last_error();
  const glex_ep_addr_t dead = mp.src;
  ASSERT_EQ(glex_send_mp(a.ep, dead, "up", 2, 0), GLEX_SUCCESS);  // the link to it comes up
  char r;
  ASSERT_EQ(read(ready[0], &r, 1), 1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  constexpr int kLost = 10;
  // As one train: the frames the sender gives up hold several MPs, each refused on its own.
  for (int i = 0; i < kLost; ++i)
    ASSERT_EQ(glex_send_mp(a.ep, dead, &i, sizeof i, i + 1 < kLost ? GLEX_FLAG_MORE : 0),
              GLEX_SUCCESS)
        << glex_last_error();
  int refused = 0;
  const auto t0 = DirectClock::now();
  while (refused < kLost && DirectClock::now() - t0 < std::chrono::seconds(10)) {
    glex_cq_entry c{};
    if (glex_wait_cq(a.ep, 100, &c) != GLEX_SUCCESS) continue;
    EXPECT_TRUE(c.status == GLEX_UNREACHABLE || c.status == GLEX_PEER_DEAD)
        << glex_error_string(c.status);
    ++refused;
  }
  EXPECT_EQ(refused, kLost) << "MPs to a dead receiver must each be reported";
  close(ready[0]);
  close(ready[1]);
}

// A receiver stopped (or starved) longer than the link's dead time is not dead: the sender's link
// goes Down, but the receiver's daemon still names it, so the link waits, handshaking, and
// resumes when the receiver runs again. Every MP arrives once and in order; had the sender handed
// what it had not seen acknowledged to the daemons, the receiver would take those MPs twice.
TEST_F(LiveDirect, AReceiverStoppedPastTheDeadTimeGetsEveryMpOnceInOrder) {
  Port a(f(), 0, 0);
  ASSERT_TRUE(a.ok()) << glex_last_error();
  const glex_ep_addr_t to = a.addr();
  const LiveFabricUnderTest& fab = f();
  constexpr uint64_t kMps = 3000;
  const pid_t child = fork();
  if (child == 0) {
    Port c(fab, 1, 0);
    if (!c.ok() || glex_send_mp(c.ep, to, "here", 4, 0) != GLEX_SUCCESS) _exit(10);
    for (uint64_t i = 0; i < kMps; ++i) {
      glex_mp mp;
      if (glex_recv_mp(c.ep, kWaitMs, &mp) != GLEX_SUCCESS) _exit(11);
      uint64_t seq;
      std::memcpy(&seq, mp.data, sizeof seq);
      if (seq != i) {
        std::fprintf(stderr, "receiver: MP %llu came as %llu\n", static_cast<unsigned long long>(i),
                     static_cast<unsigned long long>(seq));
        _exit(12);
      }
    }
    glex_mp extra;
    _exit(glex_recv_mp(c.ep, 500, &extra) == GLEX_TIMEOUT ? 0 : 13);  // 13: a duplicate
  }
  glex_mp mp;
  ASSERT_EQ(glex_recv_mp(a.ep, kWaitMs, &mp), GLEX_SUCCESS) << glex_last_error();
  const glex_ep_addr_t peer = mp.src;
  uint64_t sent = 0;
  auto send_some = [&](uint64_t until, std::chrono::milliseconds within) {
    const auto deadline = DirectClock::now() + within;
    while (sent < until && DirectClock::now() < deadline) {
      const glex_ret_t r = glex_send_mp(a.ep, peer, &sent, sizeof sent, 0);
      if (r == GLEX_SUCCESS)
        ++sent;
      else if (r != GLEX_BUSY)
        break;
    }
  };
  // Stopped in the middle of a burst: frames it took are not yet acknowledged.
  using std::chrono::milliseconds;
  send_some(kMps / 3, milliseconds(30000));
  kill(child, SIGSTOP);
  send_some(2 * kMps / 3, milliseconds(200));       // into the window and the backlog, while room
  std::this_thread::sleep_for(milliseconds(3000));  // the link's dead time is 2 s
  kill(child, SIGCONT);
  send_some(kMps, milliseconds(30000));
  EXPECT_EQ(sent, kMps) << glex_last_error();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "receiver exit " << WEXITSTATUS(status) << " (12: out of order, 13: a duplicate)";
  // Nothing came back as refused: the MPs went to a live receiver.
  glex_cq_entry c{};
  EXPECT_NE(glex_poll_cq(a.ep, &c), GLEX_SUCCESS) << glex_error_string(c.status);
}

// The lossy link of the issue (5% drop, 1% duplicate, 2% reorder, 1% corrupt), on the direct
// links too, with the daemons stopped so that nothing else can carry the MPs: every MP arrives
// once and in order.
TEST(LiveDirectLossy, EveryMpArrivesOnceAndInOrderOverALossyDirectLink) {
  DaemonOptions o;
  o.impaired = true;
  o.impairment = parse_impairment("drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,seed=11").value();
  LiveFabricUnderTest f(2, "fattree:k=4,levels=2", o);
  ASSERT_TRUE(f.bring_up().ok());
  Port a(f, 0, 0), b(f, 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  ASSERT_TRUE(stream(a.ep, b.ep, 1));
  ASSERT_TRUE(stream(b.ep, a.ep, 1));
  DaemonsStopped stopped(f);
  EXPECT_TRUE(stream(a.ep, b.ep, env_or("GALAXY_LIVE_STRESS_MPS", 20000) / 5));
  EXPECT_TRUE(stream(b.ep, a.ep, 1000));
  EXPECT_TRUE(stream(a.ep, b.ep, 2000, 30));  // frames of many MPs, lost and repaired whole
}

}  // namespace
}  // namespace galaxy::live::testing

namespace galaxy::live::testing {
namespace {

// CPU seconds a process has used (user and system), from /proc/<pid>/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoul(f);
    if (i == 15) stime = std::stoul(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Two hosts with a process on each whose direct link is up, all idle: the daemons, the
// processes' NIC threads and the links' keepalives together use under 2% of a core.
TEST(LiveDirectIdle, AnIdleTwoHostFabricUsesUnderTwoPercentOfACore) {
  LiveFabricUnderTest f(2);
  ASSERT_TRUE(f.bring_up().ok());
  Port a(f, 0, 0), b(f, 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  ASSERT_TRUE(stream(a.ep, b.ep, 10));
  ASSERT_TRUE(stream(b.ep, a.ep, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the leases run out
  auto total = [&] {
    double s = cpu_seconds(getpid());
    for (pid_t p : f.daemons()) s += cpu_seconds(p);
    return s;
  };
  const double self_before = cpu_seconds(getpid());
  const double before = total();
  const auto t0 = DirectClock::now();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double used = total() - before;
  const double wall = std::chrono::duration<double>(DirectClock::now() - t0).count();
  const double self = cpu_seconds(getpid()) - self_before;
  std::printf("idle fabric: %.2f%% of a core (daemons %.2f%%, this process's NIC threads %.2f%%)\n",
              100 * used / wall, 100 * (used - self) / wall, 100 * self / wall);
  EXPECT_LT(used / wall, 0.02);
}

}  // namespace
}  // namespace galaxy::live::testing
