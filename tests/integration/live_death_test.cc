// A process that dies mid-transfer does not hang its peers: their operations complete with an
// error within the configured timeout, and the fabric goes on serving the others (issue "Live
// fabric and libglex", acceptance). Same host and across hosts.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "live_fixture.h"

namespace galaxy::live::testing {
namespace {

class LiveDeath : public ::testing::TestWithParam<int> {};  // the victim's host: 0 or 1

TEST_P(LiveDeath, PeersOfADeadProcessGetErrorsAndTheFabricServesOthers) {
  DaemonOptions o;
  o.op_timeout_ns = 2'000'000'000;  // the configured timeout of remote operations
  LiveFabricUnderTest f(2, "fattree:k=4,levels=2", o);
  ASSERT_TRUE(f.bring_up().ok());
  const int victim_host = GetParam();
  glex_device_handle_t me = f.open(0, 0);
  ASSERT_TRUE(me) << glex_last_error();
  glex_ep_attr attr{8};
  glex_ep_handle_t ep;
  ASSERT_EQ(glex_create_ep(me, &attr, &ep), GLEX_SUCCESS);
  const glex_ep_addr_t my_addr = glex_ep_addr(ep);

  // The victim: registers 64 MiB, says where, then idles until killed.
  pid_t victim = spawn([&] {
    glex_device_handle_t d = f.open(victim_host, 1);
    glex_ep_attr a{9};
    glex_ep_handle_t e;
    if (!d || glex_create_ep(d, &a, &e)) return false;
    static std::vector<uint8_t> buf(64 << 20);
    glex_mem_handle_t mh;
    if (glex_register_mem(d, buf.data(), buf.size(), GLEX_MEM_WRITE, &mh)) return false;
    uint64_t where[2] = {reinterpret_cast<uint64_t>(buf.data()), mh};
    if (glex_send_mp(e, my_addr, where, sizeof where, 0)) return false;
    pause();
    return true;
  });
  glex_mp mp;
  ASSERT_EQ(glex_recv_mp(ep, 5000, &mp), GLEX_SUCCESS) << glex_last_error();
  uint64_t where[2];
  std::memcpy(where, mp.data, sizeof where);
  const glex_ep_addr_t victim_addr = mp.src;

  std::vector<uint8_t> src(1 << 20, 0xab);
  glex_mem_handle_t lmh;
  ASSERT_EQ(glex_register_mem(me, src.data(), src.size(), GLEX_MEM_READ, &lmh), GLEX_SUCCESS);
  glex_rdma_req q{};
  q.target = victim_addr;
  q.op = GLEX_OP_PUT;
  q.flags = GLEX_FLAG_LOCAL_CQ;
  q.local_addr = src.data();
  q.local_mh = lmh;
  q.len = src.size();
  q.remote_addr = where[0];
  q.remote_mh = where[1];
  // Transfers are running when the victim dies.
  for (int i = 0; i < 8; ++i) {
    q.cookie = static_cast<uint64_t>(i);
    q.remote_addr = where[0] + static_cast<uint64_t>(i) * src.size();
    ASSERT_EQ(glex_rdma(ep, &q), GLEX_SUCCESS) << glex_last_error();
  }
  kill(victim, SIGKILL);
  EXPECT_EQ(wait_exit(victim), 128);
  const auto t0 = std::chrono::steady_clock::now();
  // Keep putting: every operation completes, and once the death is noticed with an error.
  glex_ret_t last = GLEX_SUCCESS;
  int completions = 0;
  for (int i = 8; i < 64 && last == GLEX_SUCCESS; ++i) {
    q.cookie = static_cast<uint64_t>(i);
    q.remote_addr = where[0] + static_cast<uint64_t>(i % 64) * src.size();
    ASSERT_EQ(glex_rdma(ep, &q), GLEX_SUCCESS) << glex_last_error();
    glex_cq_entry e;
    while (glex_wait_cq(ep, 5000, &e) == GLEX_SUCCESS) {
      ++completions;
      last = e.status;
      if (last != GLEX_SUCCESS) break;
      if (glex_fence(ep, 0) == GLEX_SUCCESS) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(last, GLEX_SUCCESS) << "puts to a dead process kept succeeding";
  EXPECT_TRUE(last == GLEX_PEER_DEAD || last == GLEX_ACCESS_ERROR || last == GLEX_TIMEOUT)
      << glex_error_string(last);
  EXPECT_LT(waited, 4.0) << "errors must come within the configured timeout (2 s) + a scan";
  EXPECT_EQ(glex_fence(ep, 5000), GLEX_SUCCESS) << "nothing may stay outstanding";
  // An MP to the dead process is refused or goes unanswered; our receive times out.
  glex_ret_t r = glex_send_mp(ep, victim_addr, "x", 1, 0);
  EXPECT_TRUE(r == GLEX_SUCCESS || r == GLEX_UNREACHABLE || r == GLEX_PEER_DEAD)
      << glex_error_string(r);
  EXPECT_EQ(glex_recv_mp(ep, 100, &mp), GLEX_TIMEOUT);

  // The fabric serves the others: a new process on the victim's host answers an MP.
  pid_t other = spawn([&] {
    glex_device_handle_t d = f.open(victim_host, 1);
    glex_ep_attr a{9};  // the dead process's VP is free again
    glex_ep_handle_t e;
    if (!d || glex_create_ep(d, &a, &e)) return false;
    if (glex_send_mp(e, my_addr, "hello", 5, 0)) return false;
    glex_mp m;
    return glex_recv_mp(e, 5000, &m) == GLEX_SUCCESS && m.len == 2;
  });
  do {
    ASSERT_EQ(glex_recv_mp(ep, 5000, &mp), GLEX_SUCCESS) << glex_last_error();
  } while (mp.len != 5);  // skip a late nack of the MP above, if any
  EXPECT_EQ(std::memcmp(mp.data, "hello", 5), 0);
  ASSERT_EQ(glex_send_mp(ep, mp.src, "ok", 2, 0), GLEX_SUCCESS);
  EXPECT_EQ(wait_exit(other), 0);
  glex_destroy_ep(ep);
  glex_close_device(me);
}

// The other side of the timeout: transfers that wait behind others of their VP for longer than
// it, on a host too slow to move them sooner, are not failed while their target answers.
TEST(LiveTimeout, TransfersQueuedLongerThanTheTimeoutCompleteWhileTheirTargetAnswers) {
  DaemonOptions o;
  o.op_timeout_ns = 1'000'000'000;  // long: a loaded CI host stalls daemons
  LiveFabricUnderTest f(2, "fattree:k=4,levels=2", o);
  ASSERT_TRUE(f.bring_up().ok());
  glex_device_handle_t me = f.open(0, 0), them = f.open(1, 0);
  ASSERT_TRUE(me && them) << glex_last_error();
  glex_ep_attr attr{8};
  glex_ep_handle_t ep, tep;
  ASSERT_EQ(glex_create_ep(me, &attr, &ep), GLEX_SUCCESS);
  ASSERT_EQ(glex_create_ep(them, &attr, &tep), GLEX_SUCCESS);
  constexpr uint64_t kPiece = 1 << 20;
  std::vector<uint8_t> src(kPiece, 0xab), dst(kPiece);
  glex_mem_handle_t smh, dmh;
  ASSERT_EQ(glex_register_mem(me, src.data(), kPiece, GLEX_MEM_READ | GLEX_MEM_WRITE, &smh),
            GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(them, dst.data(), kPiece, GLEX_MEM_READ | GLEX_MEM_WRITE, &dmh),
            GLEX_SUCCESS);
  auto post = [&](int op, uint64_t n) {
    glex_rdma_req q{};
    q.target = glex_ep_addr(tep);
    q.op = op;
    q.local_addr = src.data();
    q.local_mh = smh;
    q.len = kPiece;
    q.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    q.remote_mh = dmh;
    for (uint64_t i = 0; i < n; ++i)
      if (glex_rdma(ep, &q) != GLEX_SUCCESS) return false;
    return true;
  };
  // This host's pace: 16 MiB, fenced.
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(post(GLEX_OP_PUT, 16)) << glex_last_error();
  ASSERT_EQ(glex_fence(ep, 60000), GLEX_SUCCESS) << glex_last_error();
  const double per_piece =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 16;
  // Enough pieces posted at once that the last waits two timeouts (at most 2048 of them).
  const auto pieces = static_cast<uint64_t>(std::clamp(2 * 1.0 / per_piece, 16.0, 2048.0));
  for (int op : {GLEX_OP_PUT, GLEX_OP_GET}) {
    t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(post(op, pieces)) << glex_last_error();
    ASSERT_EQ(glex_fence(ep, 120000), GLEX_SUCCESS) << glex_last_error();
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %llu MiB posted at once, completed in %.2f s (timeout 1 s)\n",
                op == GLEX_OP_PUT ? "puts" : "gets", static_cast<unsigned long long>(pieces), took);
    glex_cq_entry e;
    EXPECT_EQ(glex_poll_cq(ep, &e), GLEX_NO_ENTRY)
        << (op == GLEX_OP_PUT ? "put" : "get") << " failed: " << glex_error_string(e.status) << " "
        << e.reason;
  }
  glex_destroy_ep(tep);
  glex_destroy_ep(ep);
  glex_close_device(them);
  glex_close_device(me);
}

INSTANTIATE_TEST_SUITE_P(Hosts, LiveDeath, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == 0 ? std::string("same_host")
                                               : std::string("cross_host");
                         });

}  // namespace
}  // namespace galaxy::live::testing
