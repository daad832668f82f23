// The data half of libglex (include/glex.h) over every back end that can answer it: the
// simulated engine (two devices on one simulated fabric, in this process) and the live engine
// (two NICs of one host, and NICs on two hosts). One test body, each back end a parameter.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../engine/sim_test_util.h"
#include "glex/sim_device.h"
#include "live_fixture.h"

namespace galaxy::live::testing {
namespace {

// Two hosts' devices and endpoints on the back end under test.
struct Pair {
  std::unique_ptr<sim::SimFabric> fabric;            // sim
  std::unique_ptr<glex_device> owned[2];             // sim
  glex_device_handle_t raw[2] = {nullptr, nullptr};  // live
  glex_ep_handle_t ep[2] = {nullptr, nullptr};
  glex_device_handle_t dev(int i) const { return owned[i] ? owned[i].get() : raw[i]; }
  glex_ep_addr_t addr(int i) const { return glex_ep_addr(ep[i]); }
  ~Pair() {
    for (auto* e : ep)
      if (e) glex_destroy_ep(e);
    for (auto* d : raw)
      if (d) glex_close_device(d);
  }
};

class GlexBackends : public ::testing::TestWithParam<std::string> {
 public:
  static void TearDownTestSuite() {
    delete live_;
    live_ = nullptr;
  }

 protected:
  void SetUp() override {
    pair_ = std::make_unique<Pair>();
    Pair& p = *pair_;
    if (GetParam() == "sim") {
      p.fabric = sim::testing::make("fattree:k=4,levels=2");
      sim::testing::program_minimal_routes(*p.fabric);
      const auto& t = p.fabric->topology();
      p.owned[0] = glex::open_sim_device(*p.fabric, t.nic_node(0));
      p.owned[1] = glex::open_sim_device(*p.fabric, t.nic_node(t.num_nics() - 1));
    } else {
      if (!live_) {
        live_ = new LiveFabricUnderTest(2);
        Status s = live_->bring_up();
        live_error_ = s.ok() ? "" : s.error().to_string();
      }
      ASSERT_TRUE(live_error_.empty()) << "bring-up: " << live_error_;
      p.raw[0] = live_->open(0, 0);
      p.raw[1] = GetParam() == "live_same_host" ? live_->open(0, 1) : live_->open(1, 0);
      ASSERT_TRUE(p.raw[0] && p.raw[1]) << glex_last_error();
    }
    for (int i = 0; i < 2; ++i)
      ASSERT_EQ(glex_create_ep(p.dev(i), nullptr, &p.ep[i]), GLEX_SUCCESS) << glex_last_error();
  }
  void TearDown() override { pair_.reset(); }
  std::unique_ptr<Pair> pair_;
  static inline LiveFabricUnderTest* live_ = nullptr;
  static inline std::string live_error_;
};

TEST_P(GlexBackends, MpsOfEveryLengthArriveInOrderWithTheirSender) {
  Pair& p = *pair_;
  for (uint32_t len = 0; len <= GLEX_MP_PAYLOAD; ++len) {
    std::vector<uint8_t> d(len);
    std::iota(d.begin(), d.end(), static_cast<uint8_t>(len));
    ASSERT_EQ(glex_send_mp(p.ep[0], p.addr(1), d.data(), len, 0), GLEX_SUCCESS) << len;
  }
  for (uint32_t len = 0; len <= GLEX_MP_PAYLOAD; ++len) {
    glex_mp mp{};
    ASSERT_EQ(glex_recv_mp(p.ep[1], 1000, &mp), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(mp.src, p.addr(0));
    ASSERT_EQ(mp.len, len);
    for (uint32_t i = 0; i < len; ++i) ASSERT_EQ(mp.data[i], static_cast<uint8_t>(len + i));
  }
  glex_mp mp{};
  EXPECT_EQ(glex_recv_mp(p.ep[1], 0, &mp), GLEX_NO_ENTRY);
  EXPECT_EQ(glex_recv_mp(p.ep[1], 20, &mp), GLEX_TIMEOUT);
}

TEST_P(GlexBackends, PutAtOddAlignmentWritesExactlyItsBytesThenTheEvent) {
  Pair& p = *pair_;
  std::vector<uint8_t> src(5000), dst(6000, 0xEE);
  std::iota(src.begin(), src.end(), 1);
  glex_event evt{};
  glex_mem_handle_t smh, dmh, emh;
  ASSERT_EQ(glex_register_mem(p.dev(0), src.data(), src.size(), GLEX_MEM_READ, &smh), GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(p.dev(1), dst.data(), dst.size(), GLEX_MEM_WRITE, &dmh),
            GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(p.dev(1), &evt, sizeof evt, GLEX_MEM_WRITE, &emh), GLEX_SUCCESS);
  glex_rdma_req r{};
  r.target = p.addr(1);
  r.op = GLEX_OP_PUT;
  r.flags = GLEX_FLAG_REMOTE_EVT | GLEX_FLAG_LOCAL_CQ;
  r.local_addr = src.data() + 3;
  r.local_mh = smh;
  r.len = 4097;
  r.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + 77;
  r.remote_mh = dmh;
  r.event_addr = reinterpret_cast<uint64_t>(&evt);
  r.event_mh = emh;
  r.event.data[0] = 42;
  r.event.data[1] = 7;
  r.cookie = 99;
  ASSERT_EQ(glex_rdma(p.ep[0], &r), GLEX_SUCCESS) << glex_last_error();
  glex_event got{};
  ASSERT_EQ(glex_wait_event(&evt, 1000, &got), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(got.data[0], 42u);
  EXPECT_EQ(got.data[1], 7u);
  EXPECT_EQ(evt.data[1], 0u);  // cleared for the next use
  for (size_t i = 0; i < dst.size(); ++i) {
    const bool inside = i >= 77 && i < 77 + 4097;
    ASSERT_EQ(dst[i], inside ? src[3 + i - 77] : 0xEE) << i;
  }
  glex_cq_entry e{};
  ASSERT_EQ(glex_wait_cq(p.ep[0], 1000, &e), GLEX_SUCCESS);
  EXPECT_EQ(e.op, static_cast<uint32_t>(GLEX_OP_PUT));
  EXPECT_EQ(e.status, GLEX_SUCCESS);
  EXPECT_EQ(e.cookie, 99u);
  EXPECT_EQ(e.bytes, 4097u);
  EXPECT_EQ(glex_poll_cq(p.ep[0], &e), GLEX_NO_ENTRY);
}

// More puts than the NIC's descriptor queue and the CQ hold, posted as fast as they are taken:
// none fails for want of room (the post says GLEX_BUSY, and the caller reads its CQ, or the
// descriptor waits for the NIC's queue), every one completes in order, and every byte lands.
TEST_P(GlexBackends, PutsPostedFasterThanTheyMoveAllCompleteInOrder) {
  Pair& p = *pair_;
  constexpr uint32_t kPuts = 3000, kBytes = 256;
  std::vector<uint8_t> src(kPuts * kBytes), dst(kPuts * kBytes, 0);
  for (uint32_t i = 0; i < kPuts; ++i)
    std::fill_n(src.begin() + i * kBytes, kBytes, static_cast<uint8_t>(i * 7 + 1));
  glex_mem_handle_t smh, dmh;
  ASSERT_EQ(glex_register_mem(p.dev(0), src.data(), src.size(), GLEX_MEM_READ, &smh), GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(p.dev(1), dst.data(), dst.size(), GLEX_MEM_WRITE, &dmh),
            GLEX_SUCCESS);
  std::vector<glex_cq_entry> done;
  for (uint32_t i = 0; i < kPuts; ++i) {
    glex_rdma_req r{};
    r.target = p.addr(1);
    r.op = GLEX_OP_PUT;
    r.flags = GLEX_FLAG_LOCAL_CQ;
    r.local_addr = src.data() + i * kBytes;
    r.local_mh = smh;
    r.len = kBytes;
    r.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + i * kBytes;
    r.remote_mh = dmh;
    r.cookie = i;
    glex_ret_t ret;
    while ((ret = glex_rdma(p.ep[0], &r)) == GLEX_BUSY) {
      glex_cq_entry e{};
      if (glex_wait_cq(p.ep[0], 1, &e) == GLEX_SUCCESS) done.push_back(e);
    }
    ASSERT_EQ(ret, GLEX_SUCCESS) << i << ": " << glex_last_error();
  }
  ASSERT_EQ(glex_fence(p.ep[0], 60000), GLEX_SUCCESS) << glex_last_error();
  while (done.size() < kPuts) {
    glex_cq_entry e{};
    ASSERT_EQ(glex_wait_cq(p.ep[0], 5000, &e), GLEX_SUCCESS)
        << done.size() << ": " << glex_last_error();
    done.push_back(e);
  }
  for (uint32_t i = 0; i < kPuts; ++i) {
    ASSERT_EQ(done[i].status, GLEX_SUCCESS) << i << ": " << done[i].reason;
    ASSERT_EQ(done[i].cookie, i);
  }
  glex_cq_entry e{};
  EXPECT_EQ(glex_poll_cq(p.ep[0], &e), GLEX_NO_ENTRY);
  EXPECT_TRUE(src == dst);
}

TEST_P(GlexBackends, GetAndImmediateMoveTheirBytesAndFenceWaitsForBoth) {
  Pair& p = *pair_;
  std::vector<uint8_t> remote(3000), local(3000, 0);
  std::iota(remote.begin(), remote.end(), 5);
  glex_mem_handle_t rmh, lmh;
  ASSERT_EQ(glex_register_mem(p.dev(1), remote.data(), remote.size(),
                              GLEX_MEM_READ | GLEX_MEM_WRITE, &rmh),
            GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(p.dev(0), local.data(), local.size(), GLEX_MEM_READ, &lmh),
            GLEX_SUCCESS);
  glex_rdma_req g{};
  g.target = p.addr(1);
  g.op = GLEX_OP_GET;
  g.local_addr = local.data() + 1;
  g.local_mh = lmh;
  g.len = 2500;
  g.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + 11;
  g.remote_mh = rmh;
  ASSERT_EQ(glex_rdma(p.ep[0], &g), GLEX_SUCCESS) << glex_last_error();
  const char text[] = "immediate bytes";
  glex_rdma_req im{};
  im.target = p.addr(1);
  im.op = GLEX_OP_IMM;
  im.local_addr = const_cast<char*>(text);
  im.len = sizeof text;
  im.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + 2900;
  im.remote_mh = rmh;
  ASSERT_EQ(glex_rdma(p.ep[0], &im), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(glex_fence(p.ep[0], 1000), GLEX_SUCCESS) << glex_last_error();
  for (size_t i = 0; i < 2500; ++i) ASSERT_EQ(local[1 + i], remote[11 + i]) << i;
  EXPECT_EQ(local[0], 0);
  EXPECT_EQ(local[2501], 0);
  EXPECT_EQ(std::memcmp(remote.data() + 2900, text, sizeof text), 0);
  glex_cq_entry e{};
  EXPECT_EQ(glex_poll_cq(p.ep[0], &e), GLEX_NO_ENTRY);  // successes not asked for
}

TEST_P(GlexBackends, ARefusedPutCompletesWithAnAccessErrorAndWritesNothing) {
  Pair& p = *pair_;
  std::vector<uint8_t> src(256, 1), dst(256, 0);
  glex_mem_handle_t smh, dmh;
  ASSERT_EQ(glex_register_mem(p.dev(0), src.data(), src.size(), GLEX_MEM_READ, &smh), GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(p.dev(1), dst.data(), dst.size(), GLEX_MEM_READ, &dmh),
            GLEX_SUCCESS);  // not writable by peers
  glex_rdma_req r{};
  r.target = p.addr(1);
  r.op = GLEX_OP_PUT;
  r.local_addr = src.data();
  r.local_mh = smh;
  r.len = 200;
  r.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  r.remote_mh = dmh;
  r.cookie = 5;
  ASSERT_EQ(glex_rdma(p.ep[0], &r), GLEX_SUCCESS);
  glex_cq_entry e{};
  ASSERT_EQ(glex_wait_cq(p.ep[0], 1000, &e), GLEX_SUCCESS);  // errors always complete
  EXPECT_EQ(e.status, GLEX_ACCESS_ERROR);
  EXPECT_EQ(e.cookie, 5u);
  EXPECT_NE(e.error_id, 0);
  EXPECT_NE(e.reason[0], 0);  // why, in words
  for (uint8_t b : dst) ASSERT_EQ(b, 0);
  // A wrong key: refused the same way.
  r.remote_mh = dmh + 1;
  r.cookie = 6;
  ASSERT_EQ(glex_rdma(p.ep[0], &r), GLEX_SUCCESS);
  ASSERT_EQ(glex_wait_cq(p.ep[0], 1000, &e), GLEX_SUCCESS);
  EXPECT_EQ(e.status, GLEX_ACCESS_ERROR);
  EXPECT_EQ(e.cookie, 6u);
  for (uint8_t b : dst) ASSERT_EQ(b, 0);
}

TEST_P(GlexBackends, AnMpWithLocalCqCompletesIntoTheCq) {
  Pair& p = *pair_;
  ASSERT_EQ(glex_send_mp(p.ep[0], p.addr(1), "hi", 2, GLEX_FLAG_LOCAL_CQ), GLEX_SUCCESS);
  glex_cq_entry e{};
  ASSERT_EQ(glex_wait_cq(p.ep[0], 1000, &e), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(e.op, static_cast<uint32_t>(GLEX_OP_MP));
  EXPECT_EQ(e.status, GLEX_SUCCESS);
  glex_mp mp{};
  ASSERT_EQ(glex_recv_mp(p.ep[1], 1000, &mp), GLEX_SUCCESS);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(mp.data), mp.len), "hi");
}

// A NIC as users name it, in the fabric the device belongs to; a router, an unknown name and an
// empty one are refused with the reason.
TEST_P(GlexBackends, ANicIsFoundByItsIdNameAndIndexAndNamedBack) {
  Pair& p = *pair_;
  const fabric::Topology& t = GetParam() == "sim" ? p.fabric->topology() : live_->fabric().topology;
  const uint32_t peer = glex_device_node(p.dev(1));
  for (const std::string& name :
       {std::to_string(peer), t.name(peer), fmt::format("nic:{}", t.nic_index(peer))}) {
    uint32_t chip = UINT32_MAX;
    ASSERT_EQ(glex_resolve_nic(p.dev(0), name.c_str(), &chip), GLEX_SUCCESS)
        << name << ": " << glex_last_error();
    EXPECT_EQ(chip, peer) << name;
  }
  uint32_t router = 0;
  while (t.is_nic(router)) ++router;
  uint32_t chip = 7777;
  EXPECT_EQ(glex_resolve_nic(p.dev(0), t.name(router).c_str(), &chip), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("E6162"), std::string::npos) << glex_last_error();
  EXPECT_EQ(glex_resolve_nic(p.dev(0), "no-such-chip", &chip), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("no-such-chip"), std::string::npos);
  EXPECT_EQ(glex_resolve_nic(p.dev(0), "", &chip), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("E6163"), std::string::npos) << glex_last_error();
  EXPECT_EQ(glex_resolve_nic(p.dev(0), std::string(300, 'x').c_str(), &chip), GLEX_INVALID_PARAM);
  EXPECT_EQ(chip, 7777u);  // untouched by a refusal
  // And back: a chip's name, into a buffer that must hold it.
  char buf[GLEX_NAME_MAX + 1];
  ASSERT_EQ(glex_node_name(p.dev(0), peer, buf, sizeof buf), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(std::string(buf), t.name(peer));
  EXPECT_EQ(glex_node_name(p.dev(0), peer, buf, t.name(peer).size()), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("E6165"), std::string::npos) << glex_last_error();
  EXPECT_EQ(glex_node_name(p.dev(0), t.num_nodes(), buf, sizeof buf), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("E6164"), std::string::npos) << glex_last_error();
}

INSTANTIATE_TEST_SUITE_P(Engines, GlexBackends,
                         ::testing::Values("sim", "live_same_host", "live_cross_host"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galaxy::live::testing
