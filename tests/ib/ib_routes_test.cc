// LIDs and linear forwarding tables from Galaxy's routing engines on InfiniBand subnets built
// by hand: every switch reaches every LID, the tables balance, a CA cabled only on its second
// port is routed, LIDs already held are kept.
#include "nm/ib_routes.h"

#include <gtest/gtest.h>

#include <map>

#include "fabric/builders.h"
#include "ib_test_subnet.h"

namespace galaxy::nm {
namespace {

TEST(IbRoutes, LidsForSwitchesAndLinkedCaPortsOnly) {
  Builder b = two_level();
  auto r = assign_lids(b.net);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->assigned, 4u + 5u);  // four switches, five linked CA ports
  EXPECT_EQ(r->max_lid, 9);
  const IbNode& dual = b.net.nodes[8];
  EXPECT_EQ(dual.ports[1].lid, 0);  // not cabled
  EXPECT_NE(dual.ports[2].lid, 0);
  EXPECT_EQ(b.net.sm_lid(), b.net.nodes[4].ports[1].lid);
}

TEST(IbRoutes, KeepsValidUniqueLidsAndRenumbersClashes) {
  Builder b = two_level();
  b.net.nodes[0].ports[0].info.set_lid(40);
  b.net.nodes[1].ports[0].info.set_lid(40);      // a clash: the second is renumbered
  b.net.nodes[4].ports[1].info.set_lid(0xC000);  // multicast range: renumbered
  auto r = assign_lids(b.net);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kept, 1u);
  EXPECT_EQ(b.net.nodes[0].ports[0].lid, 40);
  EXPECT_NE(b.net.nodes[1].ports[0].lid, 40);
  EXPECT_LE(b.net.nodes[4].ports[1].lid, wire::kMaxUnicastLid);
  EXPECT_EQ(r->max_lid, 40);
}

class IbRoutesByEngine : public ::testing::TestWithParam<const char*> {};

TEST_P(IbRoutesByEngine, EverySwitchReachesEveryLid) {
  Builder b = two_level();
  ASSERT_TRUE(assign_lids(b.net).ok());
  auto r = route_ib(b.net, GetParam());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->unreachable, 0u) << (r->problems.empty() ? "" : r->problems.front());
  // Four switches x (five CA LIDs + four switch LIDs).
  EXPECT_EQ(r->entries, 4u * 9u);
  const IbSubnet& net = b.net;
  // A leaf sends a LID of its own CA out of the port that CA is cabled to, a switch its own LID
  // to port 0, and another leaf's CA up.
  const uint32_t l1 = 3, dual = 8;
  EXPECT_EQ(r->lft[l1][net.nodes[dual].ports[2].lid], 5);
  EXPECT_EQ(r->lft[l1][net.nodes[l1].lid()], 0);
  const uint8_t up = r->lft[l1][net.nodes[4].ports[1].lid];
  EXPECT_TRUE(up == 7 || up == 8);
  // Balanced where the engine allows both up-links (up*/down* from one root allows one): the
  // two LIDs of leaf 0's CAs leave leaf 1 by different up-links; leaf 0 spreads leaf 1's three
  // CA LIDs 2 + 1 over its up-links, two sources each (4 routes); a spine forwards all three of
  // leaf 1's CA LIDs down to it.
  if (std::string(GetParam()) != "updown") {
    EXPECT_NE(r->lft[l1][net.nodes[4].ports[1].lid], r->lft[l1][net.nodes[5].ports[1].lid]);
    EXPECT_EQ(r->max_paths_per_port, 4u);
    EXPECT_EQ(r->max_lids_per_port, 3u);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, IbRoutesByEngine,
                         ::testing::Values("minhop", "updown", "fattree"));

// A Galaxy topology as an IB subnet (IB port = topology port + 1), its CAs' LIDs dealt round
// the switches they hang off (as directed-route discovery from one host hands them out: a leaf's
// CAs do not get consecutive LIDs), switch LIDs after them.
Builder from_topology(const fabric::Topology& t) {
  Builder b;
  using T = wire::IbNodeType;
  for (uint32_t n = 0; n < t.num_nodes(); ++n)
    b.add(t.is_nic(n) ? T::kCa : T::kSwitch, static_cast<uint8_t>(t.num_ports(n)), t.name(n));
  for (uint32_t n = 0; n < t.num_nodes(); ++n)
    for (uint32_t p = 0; p < t.num_ports(n); ++p)
      if (auto peer = t.peer({n, static_cast<uint8_t>(p)});
          peer && std::pair(n, p) < std::pair(peer->node, uint32_t{peer->port}))
        b.link(n, static_cast<uint8_t>(p + 1), peer->node, static_cast<uint8_t>(peer->port + 1));
  std::map<uint32_t, std::vector<uint32_t>> by_switch;  // switch -> its CAs
  for (uint32_t n = 0; n < t.num_nodes(); ++n)
    if (t.is_nic(n)) by_switch[b.net.nodes[n].ports[1].peer_node].push_back(n);
  uint16_t lid = 1;
  for (size_t round = 0, dealt = 1; dealt != 0; ++round) {
    dealt = 0;
    for (auto& [sw, cas] : by_switch)
      if (round < cas.size()) {
        b.net.nodes[cas[round]].ports[1].info.set_lid(lid++);
        dealt += 1;
      }
  }
  for (auto& node : b.net.nodes)
    if (node.is_switch()) node.ports[0].info.set_lid(lid++);
  b.net.sm_node = t.nic_node(0);
  b.net.sm_port = 1;
  return b;
}

// One TH-2 cabinet under the full top level (1,484 switches): the fattree engine gives a bottom
// switch one set of ports for packets from its CAs and another for packets from above, and leaves
// the LIDs no packet from above carries without a route; the LFT's one entry per LID must not take
// ports from a class that has no route for it.
TEST_P(IbRoutesByEngine, InterleavedLidsOnATh2Cabinet) {
  auto t = fabric::build_topology("th2:cabinets=1");
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  Builder b = from_topology(*t);
  auto lids = assign_lids(b.net);
  ASSERT_TRUE(lids.ok());
  EXPECT_EQ(lids->kept, t->num_nodes());
  auto r = route_ib(b.net, GetParam());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->unreachable, 0u) << (r->problems.empty() ? "" : r->problems.front());
  EXPECT_EQ(r->entries, uint64_t{t->num_nrcs()} * t->num_nodes());
}

TEST(IbRoutes, AnUnknownEngineIsAnError) {
  Builder b = two_level();
  ASSERT_TRUE(assign_lids(b.net).ok());
  EXPECT_FALSE(route_ib(b.net, "nosuch").ok());
}

TEST(IbRoutes, TheCheckSeesDeadEndsAndLoops) {
  Builder b = two_level();
  ASSERT_TRUE(assign_lids(b.net).ok());
  auto r = route_ib(b.net, "minhop");
  ASSERT_TRUE(r.ok());
  const uint16_t host0 = b.net.nodes[4].ports[1].lid;
  IbRoutes dead = *r;
  dead.lft[3][host0] = 3;  // leaf1 port 3: no cable
  check_ib_routes(b.net, dead);
  EXPECT_EQ(dead.unreachable, 1u);
  ASSERT_FALSE(dead.problems.empty());
  EXPECT_NE(dead.problems.back().find("leaf1"), std::string::npos);
  IbRoutes loop = *r;
  loop.lft[0][host0] = 2;  // spine0 sends it down to leaf1, which sends it up again
  loop.lft[3][host0] = 7;
  check_ib_routes(b.net, loop);
  EXPECT_GE(loop.unreachable, 1u);
  IbRoutes fine = *r;
  check_ib_routes(b.net, fine);
  EXPECT_EQ(fine.unreachable, 0u);
}

}  // namespace
}  // namespace galaxy::nm
