#include <gtest/gtest.h>

#include <string>

#include "engine/sim/sim_fabric.h"
#include "fabric/builders.h"
#include "glex.h"
#include "glex/sim_device.h"

namespace galaxy {
namespace {

struct Fixture {
  std::unique_ptr<sim::SimFabric> fabric;
  std::unique_ptr<glex_device> dev;
  uint32_t server = 0, nrc = 0;
  Fixture() {
    auto topo = fabric::build_topology("line:n=2").value();
    fabric = std::move(sim::SimFabric::create(topo, sim::default_timing().value()).value());
    server = fabric->topology().nic_node(0);
    nrc = fabric->topology().peer({server, 0})->node;
    dev = glex::open_sim_device(*fabric, server);
  }
  glex_mgmt_info read_req(uint16_t addr) {
    glex_mgmt_info r{};
    r.dest_id = static_cast<uint16_t>(nrc);
    r.dest_type = GLEX_CHIP_NRC;
    r.backward_route.hop_num = 1;
    r.backward_route.hops[0] = fabric->topology().peer({server, 0})->port;
    r.nmp_type = 0x01;
    r.count = 1;
    r.address[0] = addr;
    return r;
  }
};

TEST(GlexApiTest, CreateEndpointOnAnyVpOfTheNic) {
  Fixture f;
  glex_ep_handle_t ep = nullptr;
  glex_ep_attr beyond{40};
  EXPECT_EQ(glex_create_ep(f.dev.get(), &beyond, &ep), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("vp = 40"), std::string::npos);
  glex_ep_attr pio{3};  // a PIO VP: data only (the NIC refuses management on it)
  ASSERT_EQ(glex_create_ep(f.dev.get(), &pio, &ep), GLEX_SUCCESS);
  EXPECT_EQ(glex_ep_vp(ep), 3u);
  EXPECT_EQ(glex_destroy_ep(ep), GLEX_SUCCESS);
  EXPECT_EQ(glex_create_ep(nullptr, nullptr, &ep), GLEX_INVALID_PARAM);
  glex_ep_attr v9{9};
  ASSERT_EQ(glex_create_ep(f.dev.get(), &v9, &ep), GLEX_SUCCESS);
  EXPECT_EQ(glex_ep_vp(ep), 9u);
  glex_ep_handle_t again = nullptr;
  EXPECT_EQ(glex_create_ep(f.dev.get(), &v9, &again), GLEX_NO_RESOURCE);
  EXPECT_EQ(glex_destroy_ep(ep), GLEX_SUCCESS);
  EXPECT_EQ(glex_create_ep(f.dev.get(), &v9, &again), GLEX_SUCCESS);  // freed
  EXPECT_EQ(glex_destroy_ep(again), GLEX_SUCCESS);
  EXPECT_EQ(glex_destroy_ep(nullptr), GLEX_INVALID_PARAM);
}

TEST(GlexApiTest, RequestResponseRoundTripWithAutoTid) {
  Fixture f;
  glex_ep_handle_t ep;
  ASSERT_EQ(glex_create_ep(f.dev.get(), nullptr, &ep), GLEX_SUCCESS);
  auto req = f.read_req(0x001);  // CHIP_ID
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(glex_send_mgmt_req(ep, &req, GLEX_MGMT_AUTO_TID), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(req.transaction_id, i);
    glex_mgmt_info ack;
    ASSERT_EQ(glex_receive_mgmt_ack(ep, 1000, &ack), GLEX_SUCCESS);
    EXPECT_EQ(ack.nmp_type, 0x02);
    EXPECT_EQ(ack.transaction_id, req.transaction_id);
    EXPECT_EQ(ack.src_id, f.nrc);
    EXPECT_EQ(ack.value[0] & 0xFFFF, f.nrc);
  }
  // 16-bit ids wrap.
  ep->next_tid = 0xFFFF;
  ASSERT_EQ(glex_send_mgmt_req(ep, &req, GLEX_MGMT_AUTO_TID), GLEX_SUCCESS);
  EXPECT_EQ(req.transaction_id, 0xFFFF);
  glex_mgmt_info ack;
  ASSERT_EQ(glex_receive_mgmt_ack(ep, 1000, &ack), GLEX_SUCCESS);
  ASSERT_EQ(glex_send_mgmt_req(ep, &req, GLEX_MGMT_AUTO_TID), GLEX_SUCCESS);
  EXPECT_EQ(req.transaction_id, 0);
  ASSERT_EQ(glex_receive_mgmt_ack(ep, 1000, &ack), GLEX_SUCCESS);
  glex_destroy_ep(ep);
}

TEST(GlexApiTest, BadFieldsAreRefusedNamingThem) {
  Fixture f;
  glex_ep_handle_t ep;
  ASSERT_EQ(glex_create_ep(f.dev.get(), nullptr, &ep), GLEX_SUCCESS);
  auto req = f.read_req(0x012);
  req.forward_route.hop_num = 1;
  req.forward_route.hops[0] = 140;  // beyond the widest switch
  EXPECT_EQ(glex_send_mgmt_req(ep, &req, 0), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("forward_route.hops[0] = 140 exceeds port 127"),
            std::string::npos);
  req = f.read_req(0x012);
  req.nmp_type = 0x02;  // a response type
  EXPECT_EQ(glex_send_mgmt_req(ep, &req, 0), GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(glex_last_error()).find("nmp_type"), std::string::npos);
  req = f.read_req(0x012);
  req.dest_type = 7;
  EXPECT_EQ(glex_send_mgmt_req(ep, &req, 0), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_send_mgmt_req(ep, &req, 0x80), GLEX_INVALID_PARAM);
  glex_mgmt_info ack;
  EXPECT_EQ(glex_receive_mgmt_ack(ep, -1, &ack), GLEX_INVALID_PARAM);
  EXPECT_EQ(glex_receive_mgmt_ack(ep, 0, &ack), GLEX_TIMEOUT);  // nothing sent
  // An out-of-range register comes back as an error response with the reason.
  req = f.read_req(0x7FFF);
  ASSERT_EQ(glex_send_mgmt_req(ep, &req, 0), GLEX_SUCCESS);
  ASSERT_EQ(glex_receive_mgmt_ack(ep, 1000, &ack), GLEX_SUCCESS);
  EXPECT_EQ(ack.nmp_type, 0x05);
  EXPECT_EQ(ack.error, 1);  // address out of range
  EXPECT_EQ(ack.error_address, 0x7FFF);
  glex_destroy_ep(ep);
}

// Regression: the simulation advanced by someone else must not leave the host clock behind.
TEST(GlexApiTest, HostClockFollowsTheSimulation) {
  Fixture f;
  glex_ep_handle_t ep;
  ASSERT_EQ(glex_create_ep(f.dev.get(), nullptr, &ep), GLEX_SUCCESS);
  f.fabric->sim().run(f.fabric->sim().now() + 5 * sim::kMillisecond);
  auto req = f.read_req(0x012);
  ASSERT_EQ(glex_send_mgmt_req(ep, &req, 0), GLEX_SUCCESS);
  glex_mgmt_info ack;
  EXPECT_EQ(glex_receive_mgmt_ack(ep, 1, &ack), GLEX_SUCCESS);
  EXPECT_GE(f.dev->now_ps(), 5 * sim::kMillisecond);
  glex_destroy_ep(ep);
}

}  // namespace
}  // namespace galaxy
