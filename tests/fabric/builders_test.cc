#include "fabric/builders.h"

#include <gtest/gtest.h>

#include <chrono>

#include "build_util.h"

namespace galaxy::fabric {
namespace {

using testing::build;

// peer() is symmetric, so every port is in at most one link, and the link count matches.
void expect_consistent(const Topology& t) {
  uint32_t ends = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, static_cast<uint8_t>(p)});
      if (!q) continue;
      ++ends;
      auto back = t.peer(*q);
      ASSERT_TRUE(back.has_value()) << t.name(v) << " port " << p;
      ASSERT_EQ(back->node, v);
      ASSERT_EQ(back->port, p);
    }
  EXPECT_EQ(ends, 2 * t.num_links());
  for (uint32_t i = 0; i < t.num_nics(); ++i) EXPECT_EQ(t.nic_index(t.nic_node(i)), i);
}

uint32_t count_role(const Topology& t, const std::string& role) {
  uint32_t n = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v) n += t.location(v).role == role;
  return n;
}

TEST(Th2, FullScaleCountsAndHops) {
  auto start = std::chrono::steady_clock::now();
  Topology t = build("th2");
  double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(t.num_nics(), 18304u);
  EXPECT_EQ(t.num_nrcs(), 5832u);
  EXPECT_EQ(count_role(t, "bottom-edge"), 572u * 4);
  EXPECT_EQ(count_role(t, "bottom-middle"), 572u * 2);
  EXPECT_EQ(count_role(t, "leaf"), 960u);
  EXPECT_EQ(count_role(t, "root-edge") + count_role(t, "root-middle"), 1440u);
  // NIC links + bottom internal + bottom-leaf + leaf-root + root internal.
  EXPECT_EQ(t.num_links(), 18304u + 572u * 40 + 572u * 20 + 960u * 12 + 240u * 48);
  expect_consistent(t);

  FabricStats s = analyze(t, 0);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.max_hops, 9u);  // docs/system.md 2.7: data paths are at most 9 hops
  // docs/system.md 2.7: "the server reaches any NRC in at most 8".
  ASSERT_EQ(s.hop_histogram.size(), 9u);
  EXPECT_EQ(s.hop_histogram[0], 1u);
  uint64_t total = 0;
  for (uint64_t n : s.hop_histogram) total += n;
  EXPECT_EQ(total, 5832u);
  EXPECT_EQ(s.unreachable_nrcs, 0u);
  EXPECT_LT(build_s, 1.0);
}

TEST(Th2, EveryExternalPortUsed) {
  Topology t = build("th2");
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    const std::string& role = t.location(v).role;
    uint32_t used = 0;
    for (uint32_t p = 0; p < t.num_ports(v); ++p) used += t.peer({v, uint8_t(p)}).has_value();
    uint32_t expected = 24;
    if (role == "bottom-edge") expected = 23;  // port 23 spare
    if (role == "bottom-middle") expected = 20;
    if (role == "leaf" && t.location(v).switch_index >= 940) expected = 20;  // 2-cabinet group
    if (role == "nic") expected = 1;
    EXPECT_EQ(used, expected) << t.name(v);
  }
}

TEST(Th2, NicsUnderOneBottomSwitchAreContiguous) {
  Topology t = build("th2:cabinets=3");
  for (uint32_t i = 0; i < t.num_nics(); ++i) {
    const Location& loc = t.location(t.nic_node(i));
    EXPECT_EQ(static_cast<uint32_t>(loc.switch_index), i / 32);
    EXPECT_EQ(static_cast<uint32_t>(loc.nrc_index), i % 32 / 8);
  }
  auto edge = t.peer({t.nic_node(37), 0});
  ASSERT_TRUE(edge);
  EXPECT_EQ(t.name(edge->node), "cab000/ch1/bsw/nrc0");
  EXPECT_EQ(edge->port, 5);
}

TEST(Th2, SmallerModel) {
  Topology t = build("th2:cabinets=4");
  EXPECT_EQ(t.num_nics(), 4u * 4 * 32);
  EXPECT_EQ(t.num_nrcs(), 16u * 6 + 2 * 20 + 1440);
  expect_consistent(t);
  FabricStats s = analyze(t);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.max_hops, 7u);  // both groups hang off root edge 0: no root middle needed
}

TEST(Th2, RejectsBadParams) {
  EXPECT_FALSE(build_topology("th2:cabinets=0").ok());
  EXPECT_FALSE(build_topology("th2:cabinets=144").ok());
  EXPECT_FALSE(build_topology("th2:racks=4").ok());
  EXPECT_FALSE(build_topology("th2:4").ok());
}

TEST(FatTree, AlFaresCounts) {
  Topology t = build("fattree:k=24,levels=3");
  EXPECT_EQ(t.num_nics(), 3456u);
  EXPECT_EQ(t.num_nrcs(), 720u);
  expect_consistent(t);
  FabricStats s = analyze(t);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.max_hops, 5u);
}

TEST(FatTree, FormulaForAllShapes) {
  for (uint32_t k : {4u, 6u, 8u})
    for (uint32_t n : {1u, 2u, 3u, 4u}) {
      Topology t = build(fmt::format("fattree:k={},levels={}", k, n));
      uint32_t m = k / 2, per_level = 1;
      for (uint32_t i = 1; i < n; ++i) per_level *= m;
      EXPECT_EQ(t.num_nics(), 2 * per_level * m) << k << " " << n;
      EXPECT_EQ(t.num_nrcs(), 2 * per_level * (n - 1) + per_level) << k << " " << n;
      // Every switch port is used: half down, half up, top all down.
      EXPECT_EQ(t.num_links() * 2, t.num_nics() + t.num_nrcs() * k) << k << " " << n;
      expect_consistent(t);
      FabricStats s = analyze(t);
      EXPECT_TRUE(s.connected) << k << " " << n;
      EXPECT_EQ(s.max_hops, 2 * n - 1) << k << " " << n;
    }
}

TEST(FatTree, RejectsBadParams) {
  EXPECT_FALSE(build_topology("fattree:k=5").ok());
  EXPECT_FALSE(build_topology("fattree:k=2").ok());
  EXPECT_FALSE(build_topology("fattree:k=130").ok());
  EXPECT_FALSE(build_topology("fattree:k=33").ok());  // odd
  EXPECT_FALSE(build_topology("fattree:k=32,levels=6").ok());
  EXPECT_FALSE(build_topology("fattree:k=4,levls=3").ok());
  EXPECT_FALSE(build_topology("fattree:k=x").ok());
}

TEST(Grid, TorusDegreeAndCounts) {
  Topology t = build("torus:8x8x8");
  EXPECT_EQ(t.num_nrcs(), 512u);
  EXPECT_EQ(t.num_nics(), 512u);
  EXPECT_EQ(t.num_links(), 512u + 3 * 512);
  expect_consistent(t);
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    ASSERT_EQ(t.num_ports(v), 7u);
    for (uint32_t p = 0; p < 7; ++p) EXPECT_TRUE(t.peer({v, uint8_t(p)})) << t.name(v) << p;
  }
  FabricStats s = analyze(t);
  EXPECT_EQ(s.max_hops, 13u);  // 3 x 4 router-to-router links + 1
}

TEST(Grid, MeshPortLayoutAndSizeTwoTorus) {
  Topology mesh = build("mesh:3x2,nics=2");
  EXPECT_EQ(mesh.num_nrcs(), 6u);
  EXPECT_EQ(mesh.num_nics(), 12u);
  EXPECT_EQ(mesh.num_links(), 12u + 2 * 2 + 3);
  auto r00 = *mesh.find_node("r0.0");
  auto r10 = *mesh.find_node("r1.0");
  auto r01 = *mesh.find_node("r0.1");
  EXPECT_EQ(mesh.peer({r00, 3}), (PortRef{r10, 2}));  // +x -> -x
  EXPECT_EQ(mesh.peer({r00, 5}), (PortRef{r01, 4}));  // +y -> -y
  EXPECT_FALSE(mesh.peer({r00, 2}));                  // -x at the edge
  EXPECT_EQ(analyze(mesh).max_hops, 4u);

  Topology torus = build("torus:3x2");
  // x ring of 3 wraps (3 links per row); y ring of 2 has one link per column.
  EXPECT_EQ(torus.num_links(), 6u + 2 * 3 + 3);
  Topology ring = build("torus:5");
  EXPECT_EQ(ring.num_links(), 5u + 5);
  EXPECT_EQ(analyze(ring).max_hops, 3u);
}

TEST(Grid, RejectsBadParams) {
  EXPECT_FALSE(build_topology("torus").ok());
  EXPECT_FALSE(build_topology("torus:4x4x4x4").ok());
  EXPECT_FALSE(build_topology("torus:4x0").ok());
  EXPECT_FALSE(build_topology("torus:4xx4").ok());
  EXPECT_FALSE(build_topology("mesh:4x4,nics=125").ok());
  EXPECT_FALSE(build_topology("mesh:4,nics=127").ok());
  EXPECT_FALSE(build_topology("mesh:4,nics=0").ok());
  EXPECT_FALSE(build_topology("mesh:4,4").ok());
  EXPECT_FALSE(build_topology("mesh:2048x2048").ok());
  EXPECT_TRUE(build_topology("mesh:4,nics=30").ok());
  EXPECT_TRUE(build_topology("mesh:4x4x4,nics=26").ok());
}

uint32_t global_links(const Topology& t) {
  uint32_t n = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, uint8_t(p)});
      if (q && !t.is_nic(v) && !t.is_nic(q->node) &&
          t.location(v).cabinet < t.location(q->node).cabinet)
        ++n;
    }
  return n;
}

TEST(Dragonfly, DefaultIsTheBalancedMaximum) {
  Topology t = build("dragonfly");
  EXPECT_EQ(t.num_nrcs(), 9u * 4);
  EXPECT_EQ(t.num_nics(), 9u * 4 * 2);
  EXPECT_EQ(global_links(t), 9u * 8 / 2);
  EXPECT_EQ(t.num_links(), 72u + 9 * 6 + 36);
  expect_consistent(t);
  // Every port is used in the balanced maximum.
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint32_t p = 0; p < t.num_ports(v); ++p) EXPECT_TRUE(t.peer({v, uint8_t(p)}));
  FabricStats s = analyze(t);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.max_hops, 4u);  // local, global, local
}

TEST(Dragonfly, FewerGroupsStillJoinEveryPair) {
  for (uint32_t g : {2u, 3u, 5u, 6u}) {
    Topology t = build(fmt::format("dragonfly:a=4,p=1,h=2,g={}", g));
    expect_consistent(t);
    // Every pair of groups has at least one global link.
    std::vector<std::vector<int>> joined(g, std::vector<int>(g, 0));
    for (uint32_t v = 0; v < t.num_nodes(); ++v)
      for (uint32_t p = 0; p < t.num_ports(v); ++p) {
        auto q = t.peer({v, uint8_t(p)});
        if (q && !t.is_nic(v) && !t.is_nic(q->node))
          joined[t.location(v).cabinet][t.location(q->node).cabinet] = 1;
      }
    for (uint32_t i = 0; i < g; ++i)
      for (uint32_t j = 0; j < g; ++j) EXPECT_TRUE(joined[i][j]) << g << ": " << i << "-" << j;
    // Full rounds of g-1 ports give 8 / (g-1) links per pair.
    uint32_t full = 8 / (g - 1);
    EXPECT_GE(global_links(t), full * g * (g - 1) / 2);
    EXPECT_TRUE(analyze(t).connected);
  }
}

TEST(Dragonfly, RejectsBadParams) {
  EXPECT_FALSE(build_topology("dragonfly:g=10").ok());
  EXPECT_FALSE(build_topology("dragonfly:g=1").ok());
  EXPECT_FALSE(build_topology("dragonfly:a=64,p=32,h=40").ok());  // 135 ports
  EXPECT_FALSE(build_topology("dragonfly:x=1").ok());
}

TEST(Line, HopCounts) {
  Topology t = build("line:n=32");  // the longest source route's 31 hops to the far end
  EXPECT_EQ(t.num_nrcs(), 32u);
  EXPECT_EQ(t.num_nics(), 32u);
  auto hist = hop_histogram(t, t.nic_node(0));
  ASSERT_EQ(hist.size(), 32u);
  for (uint64_t n : hist) EXPECT_EQ(n, 1u);
  auto dist = t.bfs_distances(t.nic_node(0));
  for (uint32_t i = 0; i < 32; ++i) {
    EXPECT_EQ(dist[*t.find_node(fmt::format("nrc{:02}", i))], i + 1);
    EXPECT_EQ(dist[t.nic_node(i)], i == 0 ? 0u : i + 1);
  }
  EXPECT_EQ(analyze(t).max_hops, 32u);
  EXPECT_FALSE(build_topology("line:n=33").ok());
  EXPECT_FALSE(build_topology("line:n=0").ok());
}

TEST(Registry, ListsEveryBuilderWithDocumentedParams) {
  const auto& r = topology_builders();
  for (const char* name : {"th2", "fattree", "mesh", "torus", "dragonfly", "line"}) {
    auto e = r.find(name);
    ASSERT_TRUE(e.ok()) << name;
    EXPECT_FALSE((*e)->params.empty()) << name;
  }
  EXPECT_NE(r.describe().find("levels="), std::string::npos);
  auto unknown = build_topology("hypercube:4");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, Code::kNotFound);
}

}  // namespace
}  // namespace galaxy::fabric
