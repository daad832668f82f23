// Fat trees of switches wider than TH-2's 24 ports (SYSTEM.md 6, "Any radix and size"): up to 32
// ports, what the TH-2 management packet's 5-bit port fields name, the whole bring-up works:
// discovery, routing, loading through management, the check of what the chips hold, and
// table-routed MPs between random NIC pairs, through ports 24-31 too.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "chip/registers.h"
#include "nm/discovery.h"
#include "nm/route_load.h"
#include "nm/route_loaded.h"
#include "nm/routing.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

class WideSwitches : public ::testing::TestWithParam<const char*> {};

TEST_P(WideSwitches, BringUpDeliversEveryMp) {
  auto s = testing::SimServer::make(GetParam());
  sim::SimFabric& f = *s.fabric;
  Requester req(*s.port, {256, 6, kSec, 2});
  DiscoveryOptions o;
  o.pipelined = true;
  auto d = discover(req, o);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  const FabricMap& map = d->map;
  ASSERT_EQ(map.num_nodes(), f.topology().num_nodes());
  EXPECT_EQ(d->failed_requests, 0u);

  auto rs = compute_routes(map, "fattree");
  ASSERT_TRUE(rs.ok()) << rs.error().to_string();
  RouteCheck check = verify_routes(map, *rs);
  EXPECT_EQ(check.reachable_pairs, check.nic_pairs);
  EXPECT_TRUE(check.deadlock_free);
  auto load = load_routes(req, map, *rs);
  ASSERT_TRUE(load.ok()) << load.error().to_string();
  EXPECT_EQ(load->failed, 0u);
  LoadedCheck held = check_loaded_tables(
      map, *rs, [&](uint32_t v, uint8_t p) { return &f.nrc(map.chip_id[v]).route_table(p); });
  EXPECT_TRUE(held.ok()) << (held.problems.empty() ? "" : held.problems[0]);

  // 2,000 MPs from VP 0 to VP 1 between random NIC pairs, as `galaxy bringup --mps 2000` sends.
  const auto& t = f.topology();
  uint64_t sent = 0, delivered = 0;
  f.set_mpq_listener([&](uint32_t node, uint8_t vp) {
    if (vp == 1 && f.nic(node).poll_mpq(vp)) ++delivered;
  });
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> pick(0, t.num_nics() - 1);
  const uint8_t data[8] = {'r', 'a', 'd', 'i', 'x', 0, 0, 1};
  for (int i = 0; i < 2000; ++i) {
    uint32_t a = pick(rng), b = pick(rng);
    if (a == b) b = (b + 1) % t.num_nics();
    if (f.post_mp(t.nic_node(a), 0, static_cast<uint16_t>(t.nic_node(b)), 1, data).ok()) ++sent;
  }
  f.sim().run();
  f.set_mpq_listener(nullptr);
  EXPECT_EQ(sent, 2000u);
  EXPECT_EQ(delivered, sent);
  EXPECT_EQ(f.stats().packets_dropped, 0u);
  // Some of them left a switch through a port beyond TH-2's 24.
  uint64_t high = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    if (!t.is_nic(v))
      for (uint32_t p = 24; p < t.num_ports(v); ++p)
        high +=
            f.chip(v).read_register(chip::reg::port_register(p, chip::reg::port::kTxPackets)).value;
  EXPECT_GT(high, 0u);
}

INSTANTIATE_TEST_SUITE_P(Radix, WideSwitches,
                         ::testing::Values("fattree:k=26,levels=2", "fattree:k=30,levels=2",
                                           "fattree:k=32,levels=2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace galaxy::nm
