#include "fabric/topology.h"

#include <gtest/gtest.h>

namespace galaxy::fabric {
namespace {

// Two NRCs (4 ports) in a chain, a NIC on each, one NIC left unconnected.
Topology small() {
  Topology t;
  EXPECT_EQ(*t.add_node(NodeKind::kNrc, 4, "s0", {0, 1, 2, 3, "leaf"}, 1), 0u);
  EXPECT_EQ(*t.add_node(NodeKind::kNic, 1, "h0"), 1u);
  EXPECT_EQ(*t.add_node(NodeKind::kNrc, 4, "s1"), 2u);
  EXPECT_EQ(*t.add_node(NodeKind::kNic, 1, "h1"), 3u);
  EXPECT_TRUE(t.connect({0, 0}, {1, 0}).ok());
  EXPECT_TRUE(t.connect({0, 3}, {2, 1}).ok());
  EXPECT_TRUE(t.connect({2, 0}, {3, 0}).ok());
  return t;
}

TEST(Topology, CountsIndicesAndAttributes) {
  Topology t = small();
  EXPECT_EQ(t.num_nodes(), 4u);
  EXPECT_EQ(t.num_nodes(NodeKind::kNic), 2u);
  EXPECT_EQ(t.num_nodes(NodeKind::kNrc), 2u);
  EXPECT_EQ(t.num_links(), 3u);
  EXPECT_EQ(t.nic_index(3), 1u);
  EXPECT_EQ(t.nic_index(0), kNoNode);
  EXPECT_EQ(t.nic_node(0), 1u);
  EXPECT_EQ(t.num_ports(0), 4u);
  EXPECT_EQ(t.location(0), (Location{0, 1, 2, 3, "leaf"}));
  EXPECT_EQ(t.level(0), 1);
  EXPECT_EQ(t.name(2), "s1");
  EXPECT_EQ(t.find_node("h1"), 3u);
  EXPECT_FALSE(t.find_node("h9"));
}

TEST(Topology, PeerIsSymmetricAndFreePortsHaveNone) {
  Topology t = small();
  EXPECT_EQ(t.peer({0, 3}), (PortRef{2, 1}));
  EXPECT_EQ(t.peer({2, 1}), (PortRef{0, 3}));
  EXPECT_FALSE(t.peer({0, 1}));
  EXPECT_FALSE(t.peer({0, 4}));  // beyond the node's ports
  EXPECT_FALSE(t.peer({9, 0}));  // no such node
}

TEST(Topology, ConnectRejectsBadEnds) {
  Topology t = small();
  Status s = t.connect({0, 1}, {7, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Code::kOutOfRange);
  EXPECT_NE(s.error().message.find("node 7 does not exist"), std::string::npos);
  s = t.connect({0, 4}, {2, 2});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("port 4 of node 0 ('s0') exceeds its 4 ports"),
            std::string::npos);
  s = t.connect({0, 1}, {2, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("port 1 of node 2 ('s1') is already linked to port 3 of node 0"),
            std::string::npos);
  EXPECT_FALSE(t.connect({0, 1}, {0, 1}).ok());
  EXPECT_TRUE(t.connect({0, 1}, {0, 2}).ok());  // a loopback cable between two ports is legal
  EXPECT_EQ(t.num_links(), 4u);
}

TEST(Topology, AddNodeRejectsPortCounts) {
  Topology t;
  EXPECT_FALSE(t.add_node(NodeKind::kNrc, 0, "x").ok());
  auto r = t.add_node(NodeKind::kNrc, 255, "x");  // InfiniBand numbers ports in 8 bits
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ports = 255 is outside [2, 254]"), std::string::npos);
  r = t.add_node(NodeKind::kNrc, 1, "x");  // a switch has at least two ports
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ports = 1 is outside [2, 254]"), std::string::npos);
  EXPECT_TRUE(t.add_node(NodeKind::kNrc, 254, "x").ok());
  EXPECT_TRUE(t.add_node(NodeKind::kNic, 1, "y").ok());
  EXPECT_EQ(t.num_nodes(), 2u);
}

TEST(Topology, BfsCountsNrcsAndDoesNotCrossNics) {
  Topology t = small();
  auto d = t.bfs_distances(1);
  EXPECT_EQ(d, (std::vector<uint32_t>{1, 0, 2, 2}));
  d = t.bfs_distances(0);
  EXPECT_EQ(d, (std::vector<uint32_t>{0, 0, 1, 1}));
  // A NIC with two ports between two NRCs is not a path between them.
  Topology u;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(u.add_node(NodeKind::kNrc, 2, "s").ok());
  ASSERT_TRUE(u.add_node(NodeKind::kNic, 2, "hca").ok());
  ASSERT_TRUE(u.connect({0, 0}, {2, 0}).ok());
  ASSERT_TRUE(u.connect({1, 0}, {2, 1}).ok());
  EXPECT_EQ(u.bfs_distances(0)[1], kNoNode);
  EXPECT_EQ(u.bfs_distances(2)[1], 1u);
}

TEST(Analyze, StatsAndHistogram) {
  Topology t = small();
  FabricStats s = analyze(t, 0);
  EXPECT_EQ(s.nics, 2u);
  EXPECT_EQ(s.nrcs, 2u);
  EXPECT_EQ(s.links, 3u);
  EXPECT_EQ(s.max_hops, 2u);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.hop_histogram, (std::vector<uint64_t>{1, 1}));
  EXPECT_TRUE(analyze(t, 5).hop_histogram.empty());
}

TEST(Analyze, DetectsDisconnection) {
  Topology t = small();
  ASSERT_TRUE(t.add_node(NodeKind::kNrc, 2, "island").ok());
  ASSERT_TRUE(t.add_node(NodeKind::kNic, 1, "h2").ok());
  ASSERT_TRUE(t.connect({4, 0}, {5, 0}).ok());
  FabricStats s = analyze(t, 0);
  EXPECT_FALSE(s.connected);
  EXPECT_EQ(s.unreachable_nrcs, 1u);
  EXPECT_EQ(s.max_hops, 2u);

  Topology lonely = small();
  ASSERT_TRUE(lonely.add_node(NodeKind::kNic, 1, "unplugged").ok());
  EXPECT_FALSE(analyze(lonely).connected);
}

TEST(Analyze, MultiPortNicsUseTheShorterAttachment) {
  // s0 - s1 - s2 chain; h0 on s0, hca on s0 and s2, h2 on s2.
  Topology t;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t.add_node(NodeKind::kNrc, 4, "s").ok());
  ASSERT_TRUE(t.add_node(NodeKind::kNic, 1, "h0").ok());
  ASSERT_TRUE(t.add_node(NodeKind::kNic, 2, "hca").ok());
  ASSERT_TRUE(t.add_node(NodeKind::kNic, 1, "h2").ok());
  ASSERT_TRUE(t.connect({0, 0}, {1, 0}).ok());
  ASSERT_TRUE(t.connect({1, 1}, {2, 0}).ok());
  ASSERT_TRUE(t.connect({0, 1}, {3, 0}).ok());
  ASSERT_TRUE(t.connect({0, 2}, {4, 0}).ok());
  ASSERT_TRUE(t.connect({2, 2}, {4, 1}).ok());
  ASSERT_TRUE(t.connect({2, 1}, {5, 0}).ok());
  FabricStats s = analyze(t);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.max_hops, 3u);  // h0 to h2; the hca is 1 NRC from both
  EXPECT_EQ(t.bfs_distances(4)[3], 1u);
  EXPECT_EQ(t.bfs_distances(4)[5], 1u);
}

}  // namespace
}  // namespace galaxy::fabric
