// The live engine end to end: daemons as processes, the management server's own code over
// libglex, data between processes through libglex (issue "Live fabric and libglex").
#include <gtest/gtest.h>

#include <cstring>

#include "chip/registers.h"
#include "live_fixture.h"

namespace galaxy::live::testing {
namespace {

TEST(LiveFabric, DiscoveryFindsExactlyTheDescribedSwitchesAndEndpoints) {
  LiveFabricUnderTest f(2);
  ASSERT_TRUE(f.bring_up().ok());
  const nm::FabricMap& m = f.discovery().map;
  EXPECT_EQ(m.topology.num_nrcs(), 6u);
  EXPECT_EQ(m.topology.num_nics(), 8u);
  EXPECT_TRUE(nm::check_cabling(m, f.fabric().topology).empty());
  EXPECT_TRUE(nm::same_fabric(m, f.fabric().topology));
}

TEST(LiveFabric, MpBetweenProcessesOnOneHostAndAcrossHosts) {
  LiveFabricUnderTest f(2);
  ASSERT_TRUE(f.bring_up().ok());
  glex_device_handle_t a = f.open(0, 0), b = f.open(0, 1), c = f.open(1, 0);
  ASSERT_TRUE(a && b && c) << glex_last_error();
  glex_ep_attr attr{-1};
  glex_ep_handle_t ea, eb, ec;
  ASSERT_EQ(glex_create_ep(a, &attr, &ea), GLEX_SUCCESS);
  ASSERT_EQ(glex_create_ep(b, &attr, &eb), GLEX_SUCCESS);
  ASSERT_EQ(glex_create_ep(c, &attr, &ec), GLEX_SUCCESS);
  for (glex_ep_handle_t to : {eb, ec}) {
    for (uint32_t len : {0u, 1u, 8u, 119u, 120u}) {
      uint8_t data[120];
      for (uint32_t i = 0; i < len; ++i) data[i] = static_cast<uint8_t>(i * 7 + len);
      ASSERT_EQ(glex_send_mp(ea, glex_ep_addr(to), data, len, 0), GLEX_SUCCESS)
          << glex_last_error();
      glex_mp mp{};
      ASSERT_EQ(glex_recv_mp(to, 2000, &mp), GLEX_SUCCESS) << glex_last_error();
      EXPECT_EQ(mp.src, glex_ep_addr(ea));
      ASSERT_EQ(mp.len, len);
      EXPECT_EQ(std::memcmp(mp.data, data, len), 0);
    }
  }
  glex_destroy_ep(ea);
  glex_destroy_ep(eb);
  glex_destroy_ep(ec);
  glex_close_device(a);
  glex_close_device(b);
  glex_close_device(c);
}

// The counters the management server reads are those the data path increments.
TEST(LiveFabric, ScannedPortCountersMoveWithTraffic) {
  LiveFabricUnderTest f(2);
  ASSERT_TRUE(f.bring_up().ok());
  const nm::FabricMap& m = f.discovery().map;
  const uint32_t src = f.nic(0, 0), dst = f.nic(1, 0);
  // The NRC the source NIC hangs on, and its port towards the NIC.
  auto up = f.fabric().topology.peer({src, 0}).value();
  auto read_rx = [&]() -> uint64_t {
    auto dev = glex::open_live_device(f.name(), "h1", static_cast<int32_t>(f.nic(0, 0)));
    auto port = nm::GlexMgmtPort::open(dev->get()).value();
    nm::Requester req(*port, {});
    uint64_t v = UINT64_MAX;
    const uint32_t nrc = m.node_of.at(static_cast<uint16_t>(up.node));
    req.submit(nm::MgmtRequest::read(m.target[nrc], chip::reg::kPortBase +
                                                        up.port * chip::reg::kPortStride +
                                                        chip::reg::port::kRxPackets),
               [&](const nm::MgmtReply& r) {
                 if (r.status.ok()) v = r.response.data.value[0];
               });
    req.run();
    return v;
  };
  const uint64_t before = read_rx();
  ASSERT_NE(before, UINT64_MAX);
  pid_t child = spawn([&] {
    glex_device_handle_t a = f.open(0, 0), c = f.open(1, 0);
    glex_ep_attr attr{-1};
    glex_ep_handle_t ea, ec;
    if (!a || !c || glex_create_ep(a, &attr, &ea) || glex_create_ep(c, &attr, &ec)) return false;
    for (int i = 0; i < 1000; ++i) {
      if (glex_send_mp(ea, glex_ep_addr(ec), &i, sizeof i, 0) != GLEX_SUCCESS) return false;
      glex_mp mp;
      if (glex_recv_mp(ec, 2000, &mp) != GLEX_SUCCESS) return false;
    }
    glex_close_device(a);  // brings the counters up to date
    glex_close_device(c);
    return true;
  });
  ASSERT_EQ(wait_exit(child), 0);
  (void)dst;
  const uint64_t after = read_rx();
  EXPECT_GE(after - before, 1000u) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace galaxy::live::testing
