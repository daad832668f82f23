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

// Routes of more than 20 NRCs (the long variant of the management packet, docs/protocol.md):
// a chain of 26 NRCs over two daemons is discovered whole from one end, and the far end's
// registers answer.
TEST(LiveFabric, ManagementReachesChipsMoreThan20HopsAway) {
  LiveFabricUnderTest f(2, "line:n=26");
  ASSERT_TRUE(f.bring_up().ok());
  const nm::FabricMap& m = f.discovery().map;
  EXPECT_TRUE(f.discovery().problems.empty())
      << (f.discovery().problems.empty() ? "" : f.discovery().problems[0]);
  EXPECT_EQ(m.topology.num_nrcs(), 26u);
  EXPECT_EQ(m.topology.num_nics(), 26u);
  uint8_t farthest = 0;
  uint32_t far_node = 0;
  for (uint32_t v = 0; v < m.num_nodes(); ++v)
    if (!m.topology.is_nic(v) && m.hops[v] != UINT8_MAX && m.hops[v] >= farthest) {
      farthest = m.hops[v];
      far_node = v;
    }
  EXPECT_GT(farthest, 20);
  EXPECT_GT(m.target[far_node].backward.hop_num, 20);
  const uint64_t id = f.read_register(m.chip_id[far_node], chip::reg::kChipId);
  ASSERT_NE(id, UINT64_MAX) << "the far NRC answers";
  EXPECT_EQ(id & 0xFFFF, m.chip_id[far_node]);
}

// Datelines across hosts (chip/data_vc.h): on a torus routed by `dor`, the ports' VC rules are
// loaded into the live NRCs, and packets that crossed a dateline cross the links between hosts
// on the class 1 VCs (VC4), counted on the ports as the simulator counts them; they arrive.
TEST(LiveFabric, TorusDatelinesMovePacketsToClassOneAcrossHosts) {
  LiveFabricUnderTest f(2, "torus:4x4");
  ASSERT_TRUE(f.bring_up("dor").ok());
  const fabric::Topology& t = f.fabric().topology;
  const auto crossing = f.crossing_ports();
  ASSERT_FALSE(crossing.empty());
  auto vc_tx = [&](uint8_t vc) {
    uint64_t sum = 0;
    for (const fabric::PortRef& p : crossing) {
      const uint64_t v = f.read_register(
          p.node, static_cast<uint16_t>(chip::reg::kPortBase + p.port * chip::reg::kPortStride +
                                        chip::reg::port::kVcTxPackets + vc));
      EXPECT_NE(v, UINT64_MAX);
      sum += v;
    }
    return sum;
  };
  const uint64_t vc4_before = vc_tx(4);
  // A rule is loaded where the routes need one: some NRC holds a dateline.
  uint64_t rules = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    if (!t.is_nic(v)) rules |= f.read_register(v, chip::reg::kVcRules);
  EXPECT_NE(rules & 0x1111111111111111ull, 0u);
  pid_t child = spawn([&] {
    std::vector<glex_device_handle_t> devs[2];
    std::vector<glex_ep_handle_t> eps[2];
    for (int h = 0; h < 2; ++h)
      for (int k = 0; f.nic(h, k) != UINT32_MAX; ++k) {
        glex_device_handle_t d = f.open(h, k);
        glex_ep_attr attr{-1};
        glex_ep_handle_t e;
        if (!d || glex_create_ep(d, &attr, &e) != GLEX_SUCCESS) return false;
        devs[h].push_back(d);
        eps[h].push_back(e);
      }
    for (glex_ep_handle_t a : eps[0])
      for (glex_ep_handle_t c : eps[1])
        for (auto [from, to] : {std::pair{a, c}, std::pair{c, a}}) {
          const uint64_t word = glex_ep_addr(from);
          glex_mp mp;
          if (glex_send_mp(from, glex_ep_addr(to), &word, sizeof word, 0) != GLEX_SUCCESS ||
              glex_recv_mp(to, 2000, &mp) != GLEX_SUCCESS || mp.src != glex_ep_addr(from))
            return false;
        }
    for (int h = 0; h < 2; ++h)
      for (glex_device_handle_t d : devs[h]) glex_close_device(d);
    return true;
  });
  ASSERT_EQ(wait_exit(child), 0) << "every MP arrives, on whichever class";
  EXPECT_GT(vc_tx(4), vc4_before) << "MPs past a dateline cross hosts on VC4";
}

}  // namespace
}  // namespace galaxy::live::testing
