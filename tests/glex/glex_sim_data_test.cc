// What only the simulated engine's libglex says (the data calls on every back end are in
// tests/integration/glex_backends_test.cc): two hosts on NICs three NRCs apart in one process.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../engine/sim_test_util.h"
#include "glex.h"
#include "glex/sim_device.h"

namespace galaxy {
namespace {

struct Pair {
  std::unique_ptr<sim::SimFabric> fabric;
  std::unique_ptr<glex_device> dev[2];
  glex_ep_handle_t ep[2] = {nullptr, nullptr};
  Pair() {
    fabric = sim::testing::make("fattree:k=4,levels=2");
    sim::testing::program_minimal_routes(*fabric);
    const auto& t = fabric->topology();
    dev[0] = glex::open_sim_device(*fabric, t.nic_node(0));
    dev[1] = glex::open_sim_device(*fabric, t.nic_node(t.num_nics() - 1));
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(glex_create_ep(dev[i].get(), nullptr, &ep[i]), GLEX_SUCCESS);
  }
  ~Pair() {
    for (auto* e : ep)
      if (e) glex_destroy_ep(e);
  }
  glex_ep_addr_t addr(int i) const { return glex_ep_addr(ep[i]); }
};

TEST(GlexSimData, AWaitNothingCanEndReturnsAtOnceSayingWhy) {
  Pair p;
  glex_mp mp{};
  EXPECT_EQ(glex_recv_mp(p.ep[1], 0, &mp), GLEX_NO_ENTRY);
  EXPECT_EQ(glex_recv_mp(p.ep[1], -1, &mp), GLEX_TIMEOUT);
  EXPECT_NE(std::string(glex_last_error()).find("nothing left"), std::string::npos);
}

TEST(GlexSimData, BadArgumentsAreRefusedNamingThem) {
  Pair p;
  EXPECT_EQ(glex_send_mp(p.ep[0], GLEX_EP_ADDR(0xFFFF, 8), "x", 1, 0), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("not a NIC"), std::string::npos);
  EXPECT_EQ(glex_send_mp(p.ep[0], GLEX_EP_ADDR(glex_device_node(p.dev[1].get()), 45), "x", 1, 0),
            GLEX_INVALID_PARAM);
  glex_mem_handle_t mh;
  // Memory that is not mapped cannot be registered.
  EXPECT_EQ(
      glex_register_mem(p.dev[0].get(), reinterpret_cast<void*>(0x10), 4096, GLEX_MEM_READ, &mh),
      GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("not mapped"), std::string::npos);
  EXPECT_EQ(glex_deregister_mem(p.dev[0].get(), 0x1234), GLEX_INVALID_PARAM);
  // A local handle that is not ours: the NIC refuses the descriptor, the CQ says so.
  std::vector<uint8_t> buf(64);
  glex_rdma_req r{};
  r.target = p.addr(1);
  r.op = GLEX_OP_PUT;
  r.local_addr = buf.data();
  r.local_mh = 0x777;
  r.len = 64;
  ASSERT_EQ(glex_rdma(p.ep[0], &r), GLEX_SUCCESS);
  glex_cq_entry e{};
  ASSERT_EQ(glex_wait_cq(p.ep[0], 1000, &e), GLEX_SUCCESS);
  EXPECT_NE(e.status, GLEX_SUCCESS);
}

}  // namespace
}  // namespace galaxy
