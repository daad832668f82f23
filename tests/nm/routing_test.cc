#include "nm/routing.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "chip/eeprom.h"
#include "chip/registers.h"
#include "nm/config.h"
#include "nm/faults.h"
#include "nm/route_load.h"
#include "nm/routing_internal.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

using testing::SimServer;

FabricMap map_of(const std::string& spec) {
  auto t = fabric::build_topology(spec).value();
  return map_from_topology(t, t.nic_node(0)).value();
}

struct Case {
  std::string fabric;
  std::string engine;
  bool deadlock_free;
};

class EngineTest : public ::testing::TestWithParam<Case> {};

// Every NIC reaches every NIC, whatever allowed port each NRC picks, without loops; and the
// channel-dependency graph is acyclic exactly where the engine claims it.
TEST_P(EngineTest, RoutesEveryPairAsClaimed) {
  const Case& c = GetParam();
  FabricMap map = map_of(c.fabric);
  auto rs = compute_routes(map, c.engine);
  ASSERT_TRUE(rs.ok()) << rs.error().to_string();
  RouteCheck check = verify_routes(map, *rs);
  const uint64_t n = map.topology.num_nics();
  EXPECT_EQ(check.nic_pairs, n * (n - 1));
  EXPECT_EQ(check.reachable_pairs, check.nic_pairs);
  EXPECT_EQ(check.loops, 0u);
  EXPECT_EQ(check.misrouted, 0u);
  EXPECT_EQ(check.deadlock_free, c.deadlock_free)
      << (check.problems.empty() ? "" : check.problems[0]);
  EXPECT_GT(check.max_path_nrcs, 0u);
  // Tables only where there are NRCs.
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (map.topology.is_nic(v)) {
      EXPECT_TRUE(rs->writes[v].empty());
    }
}

INSTANTIATE_TEST_SUITE_P(
    Fabrics, EngineTest,
    ::testing::Values(Case{"fattree:k=4,levels=3", "fattree", true},
                      Case{"fattree:k=4,levels=3", "updown", true},
                      Case{"fattree:k=4,levels=3", "minhop", true},
                      Case{"fattree:k=4,levels=2", "fattree", true},
                      Case{"th2:cabinets=3", "fattree", true},
                      Case{"th2:cabinets=3", "updown", true}, Case{"mesh:3x3", "dor", true},
                      Case{"mesh:3x3", "updown", true}, Case{"mesh:3x3,nics=2", "dor", true},
                      Case{"mesh:3x3", "minhop", false},  // all minimal turns: a cycle
                      Case{"torus:4x4", "dor", true},     // datelines: two VC classes per ring
                      Case{"torus:4x4", "dor:datelines=0", false},  // one class on a ring
                      Case{"torus:4x4", "updown", true}, Case{"torus:4x4", "minhop", false},
                      Case{"torus:5x4", "dor", true}, Case{"torus:5x4", "dor:datelines=0", false},
                      Case{"torus:4x4x4", "dor", true}, Case{"torus:6x3x5,nics=2", "dor", true},
                      // Rings of 3: the shorter way is never more than one hop, no cycle.
                      Case{"torus:3x3x3", "dor", true}, Case{"dragonfly", "updown", true},
                      Case{"dragonfly", "fattree", true}, Case{"dragonfly", "minhop", false},
                      Case{"dragonfly", "dragonfly", true},
                      Case{"dragonfly:a=4,p=2,h=2,g=5", "dragonfly", true},  // pairs joined twice
                      Case{"dragonfly:a=3,p=1,h=1", "dragonfly", true},
                      Case{"dragonfly:a=6,p=3,h=3", "dragonfly", true},
                      Case{"dragonfly", "dragonfly:nonminimal=1", true},
                      Case{"dragonfly:a=4,p=2,h=2,g=5", "dragonfly:nonminimal=1", true},
                      Case{"dragonfly:a=3,p=1,h=1", "dragonfly:nonminimal=1", true},
                      Case{"dragonfly:a=6,p=3,h=3", "dragonfly:nonminimal=1", true},
                      Case{"line:n=5", "minhop", true}, Case{"line:n=5", "updown", true},
                      Case{"line:n=5", "dor", true}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string s = i.param.fabric + "_" + i.param.engine;
      for (char& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

// TH-2's bottom switches need the middle detour: plain up*/down* from the NICs' ranks would
// leave NICs on different edge indices unreachable. The fat-tree routes stay minimal (at most
// 5 NRCs inside one leaf group) and use every parallel up-link of an edge NRC.
TEST(RoutingTest, FatTreeOnTh2IsMinimalAndBalanced) {
  FabricMap map = map_of("th2:cabinets=3");
  auto rs = compute_routes(map, "fattree").value();
  RouteCheck check = verify_routes(map, rs);
  EXPECT_EQ(check.max_path_nrcs, 5u);
  // An edge NRC sends a packet from its NIC towards another bottom switch over all 5 uplinks.
  uint32_t edge = map.topology.find_node("cab000/ch0/bsw/nrc0").value();
  uint32_t far_nic = map.topology.find_node("nic00100").value();  // another chassis
  chip::PortSet set = 0;
  for (const RangeWrite& w : rs.writes[edge])
    if (w.inputs.test(0) && far_nic >= w.first_dest && far_nic < w.first_dest + w.count)
      set = w.ports;
  EXPECT_EQ(set, 0x1Fu << 8) << "ports 8-12 are the uplinks";
  // Few writes per NRC: the tables compress into ranges.
  EXPECT_LT(rs.num_writes(), 20 * map.topology.num_nrcs());
}

// The verifier follows each packet's VC class through the rules: a dateline in the wrong place,
// or a ring that never resets, closes a cycle again.
TEST(RoutingTest, DatelinesAreCheckedOverLinkAndClass) {
  FabricMap map = map_of("torus:4x4");
  auto rs = compute_routes(map, "dor").value();
  ASSERT_TRUE(verify_routes(map, rs).deadlock_free);
  // Every NRC port in a ring has a rule; exactly one link each way of each ring is a dateline.
  uint64_t datelines = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    for (uint32_t p = 0; p < rs.vc_rules[v].size(); ++p)
      datelines += (rs.vc_rule(v, p) & chip::kVcRuleDateline) != 0;
  EXPECT_EQ(datelines, 2u * 2u * 4u) << "2 dimensions x 2 directions x 4 rings";
  // Dropping one ring's dateline in one direction leaves that ring one class: a cycle.
  RouteSet one_less = rs;
  bool dropped = false;
  for (uint32_t v = 0; v < map.num_nodes() && !dropped; ++v)
    for (uint8_t& r : one_less.vc_rules[v])
      if ((r & chip::kVcRuleDateline) && !dropped) {
        r = static_cast<uint8_t>(r & ~chip::kVcRuleDateline);
        dropped = true;
      }
  ASSERT_TRUE(dropped);
  RouteCheck check = verify_routes(map, one_less);
  EXPECT_FALSE(check.deadlock_free);
  EXPECT_EQ(check.reachable_pairs, check.nic_pairs) << "the routes themselves are unchanged";
  // One ring for every port (no reset at a turn): class 1 packets of the first dimension keep
  // class 1 into the second, whose dateline then does not separate them: a cycle.
  RouteSet one_ring = rs;
  for (auto& rules : one_ring.vc_rules)
    for (uint8_t& r : rules) r = chip::vc_rule(r & chip::kVcRuleDateline, 1);
  EXPECT_FALSE(verify_routes(map, one_ring).deadlock_free);
}

// The dragonfly engine: minimal paths (one global link, at most a local hop on either side), its
// groups found from the links alone, the global links its datelines; without them the same
// routes close cycles. Few writes: an NRC's destinations in another group are one range.
TEST(RoutingTest, DragonflyIsMinimalWithGlobalLinksAsDatelines) {
  FabricMap map = map_of("dragonfly:a=6,p=3,h=3");  // 19 groups of 6 routers
  auto rs = compute_routes(map, "dragonfly").value();
  RouteCheck check = verify_routes(map, rs);
  EXPECT_TRUE(check.deadlock_free);
  EXPECT_EQ(check.max_path_nrcs, 4u) << "local, global, local";
  uint64_t datelines = 0, global_links = 0;
  const auto& t = map.topology;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      auto peer = t.peer({v, p});
      if (!peer || t.is_nic(peer->node)) continue;
      // The builder's convention (not the engine's input): ports 3-7 local, 8-10 global.
      global_links += p >= 3 + 5;
      datelines += (rs.vc_rule(v, p) & chip::kVcRuleDateline) != 0;
      EXPECT_EQ((rs.vc_rule(v, p) & chip::kVcRuleDateline) != 0, p >= 8)
          << "NRC " << v << " port " << int{p};
    }
  }
  EXPECT_EQ(datelines, global_links);
  EXPECT_LT(rs.num_writes(), 20u * 19u * 6u) << "about a range per group per NRC";
  RouteSet one_class = rs;
  one_class.vc_rules.clear();
  EXPECT_FALSE(verify_routes(map, one_class).deadlock_free);
  // Not a dragonfly: a clear error naming the groups.
  auto bad = compute_routes(map_of("fattree:k=4,levels=2"), "dragonfly");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("no global link"), std::string::npos)
      << bad.error().to_string();
}

// The dragonfly engine with non-minimal ways (nonminimal=1): a packet fresh from its NIC may also
// go by its router's own global link to an intermediate group and on to the destination's group,
// where that is no longer than the minimal way; packets from local links keep the minimal ways.
// Still at most 4 NRCs, still deadlock free with the global links as datelines (and not without).
TEST(RoutingTest, DragonflyNonMinimalAddsWaysNoLongerThanMinimal) {
  FabricMap map = map_of("dragonfly:a=6,p=3,h=3");  // ports 0-2 NICs, 3-7 local, 8-10 global
  auto minimal = compute_routes(map, "dragonfly").value();
  auto rs = compute_routes(map, "dragonfly:nonminimal=1").value();
  RouteCheck check = verify_routes(map, rs);
  EXPECT_TRUE(check.deadlock_free) << (check.problems.empty() ? "" : check.problems[0]);
  EXPECT_EQ(check.reachable_pairs, check.nic_pairs);
  EXPECT_EQ(check.max_path_nrcs, 4u);
  auto set_at = [](const RouteSet& r, uint32_t v, unsigned in_port, wire::ChipId dest) {
    for (const RangeWrite& w : r.writes[v])
      if (w.inputs.test(in_port) && w.first_dest <= dest && dest < w.first_dest + w.count)
        return w.ports;
    return chip::PortSet{};
  };
  const auto& t = map.topology;
  uint64_t wider = 0, entries = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    for (uint32_t d = 0; d < map.num_nodes(); ++d) {
      if (!t.is_nic(d) || t.peer({d, 0})->node == v) continue;
      const wire::ChipId dest = map.chip_id[d];
      const chip::PortSet from_nic = set_at(rs, v, 0, dest), from_local = set_at(rs, v, 3, dest);
      // Local inputs: the minimal ways; NIC inputs: those and perhaps more, all global.
      EXPECT_EQ(from_local, set_at(minimal, v, 3, dest));
      EXPECT_EQ(from_nic & from_local, from_local) << "NRC " << v << " dest " << dest;
      const chip::PortSet extra = from_nic & ~from_local;
      for (unsigned p = 0; p < 8; ++p) EXPECT_FALSE(extra.test(p)) << "a non-minimal local hop";
      wider += extra.any();
      ++entries;
    }
  }
  EXPECT_GT(wider, entries / 100) << wider << " of " << entries << " entries";  // 1,350 of 38,646
  RouteSet one_class = rs;
  one_class.vc_rules.clear();
  EXPECT_FALSE(verify_routes(map, one_class).deadlock_free);
  EXPECT_FALSE(compute_routes(map, "dragonfly:nonminimal=2").ok());
}

// A fat tree that lost switches: for every one and every two NRCs (not the server's) of a
// 3-level k=4 fat tree dead (all their links gone), the checked routes join every NIC pair the
// server's part of the fabric connects. Where the fat-tree engine's ranks (distance from the NICs)
// leave pairs that need a forbidden turn, up*/down* from a root routes them instead; some of these
// cases do.
TEST(RoutingTest, CheckedRoutesFallBackToUpDownWhenTheFatTreeEngineFallsShort) {
  const FabricMap whole = map_of("fattree:k=4,levels=3");
  const fabric::Topology& t = whole.topology;
  // Not the server's own NRC (a server cut off routes nothing).
  const uint32_t server_nrc = t.peer({whole.server_node, 0})->node;
  std::vector<uint32_t> nrcs;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    if (!t.is_nic(v) && v != server_nrc) nrcs.push_back(v);
  auto without = [&](std::vector<uint32_t> dead) {
    std::vector<fabric::PortRef> ends;
    for (uint32_t v : dead)
      for (uint8_t p = 0; p < t.num_ports(v); ++p)
        if (t.peer({v, p})) ends.push_back({v, p});
    FabricMap m = without_links(whole, ends);
    recompute_routes(m);
    return m;
  };
  int cases = 0, fell_back = 0;
  for (size_t i = 0; i < nrcs.size(); ++i)
    for (size_t j = i; j < nrcs.size(); ++j) {
      FabricMap m = without(i == j ? std::vector<uint32_t>{nrcs[i]}
                                   : std::vector<uint32_t>{nrcs[i], nrcs[j]});
      auto r = compute_checked_routes(m, "fattree");
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      ++cases;
      fell_back += r->fell_back;
      EXPECT_EQ(r->check.reachable_pairs, r->connected_pairs)
          << "NRCs " << nrcs[i] << " and " << nrcs[j] << " dead, engine " << r->engine;
      EXPECT_EQ(r->check.loops, 0u);
      EXPECT_TRUE(r->check.deadlock_free);
      EXPECT_EQ(r->engine, r->fell_back ? "updown" : "fattree");
      // Where the server reaches every NIC, the fallback alone joins them all too: its root is
      // an NRC the server reaches, never a dead switch still in the map (the highest-level one,
      // when it died). (A fabric cut in parts is routed in the server's part only.)
      bool one_part = true;
      for (uint32_t v = 0; v < m.num_nodes(); ++v)
        one_part = one_part && (!m.topology.is_nic(v) || m.hops[v] != UINT8_MAX);
      if (!one_part) continue;
      auto up = compute_routes(m, "updown");
      ASSERT_TRUE(up.ok());
      EXPECT_EQ(verify_routes(m, *up).reachable_pairs, r->connected_pairs)
          << "updown, NRCs " << nrcs[i] << " and " << nrcs[j] << " dead";
    }
  EXPECT_EQ(cases, 19 * 20 / 2);
  EXPECT_GT(fell_back, 0) << "no case needed the fallback: the test no longer tests it";
  // The whole tree needs none, and a fallback of "" is none.
  auto whole_routes = compute_checked_routes(whole, "fattree", "");
  ASSERT_TRUE(whole_routes.ok());
  EXPECT_FALSE(whole_routes->fell_back);
  EXPECT_EQ(whole_routes->check.reachable_pairs, whole_routes->connected_pairs);
  EXPECT_EQ(whole_routes->connected_pairs, 16u * 15u);
}

TEST(RoutingTest, HandMadeLoopIsDetected) {
  // line:n=2: nrc00 (NIC on port 0, port 2 -> nrc01 port 1), nrc01 (NIC on port 0).
  FabricMap map = map_of("line:n=2");
  uint32_t nrc0 = map.topology.find_node("nrc00").value();
  uint32_t nrc1 = map.topology.find_node("nrc01").value();
  uint32_t nic0 = map.topology.find_node("nic00").value();
  uint32_t nic1 = map.topology.find_node("nic01").value();
  RouteSet rs;
  rs.writes.resize(map.num_nodes());
  rs.writes[nrc0] = {{0x7, static_cast<uint16_t>(nic0), 1, 0x1},
                     {0x7, static_cast<uint16_t>(nic1), 1, 0x4}};
  rs.writes[nrc1] = {{0x7, static_cast<uint16_t>(nic0), 1, 0x2},
                     {0x7, static_cast<uint16_t>(nic1), 1, 0x2}};  // back to nrc00: a loop
  RouteCheck check = verify_routes(map, rs);
  EXPECT_EQ(check.nic_pairs, 2u);
  EXPECT_EQ(check.reachable_pairs, 1u);
  EXPECT_EQ(check.loops, 1u);
  EXPECT_FALSE(check.deadlock_free);
  ASSERT_FALSE(check.problems.empty());
  EXPECT_NE(check.problems[0].find("loop"), std::string::npos) << check.problems[0];

  // Repaired, both pairs are delivered; a route to the wrong NIC is reported as misrouted.
  rs.writes[nrc1][1].ports = 0x1;
  check = verify_routes(map, rs);
  EXPECT_EQ(check.reachable_pairs, 2u);
  EXPECT_TRUE(check.deadlock_free);
  rs.writes[nrc1][0].ports = 0x1;  // nic00's traffic handed to nic01
  check = verify_routes(map, rs);
  EXPECT_EQ(check.reachable_pairs, 1u);
  EXPECT_EQ(check.misrouted, 1u);
}

// The engines compute destination switches on several threads and the verifier checks
// destinations on several; what they produce must not depend on how many. Also with problems
// to report: one NRC's writes cut short leave destinations misrouted all over the fabric, whose
// messages must come out the same and in the same order.
TEST(RoutingTest, RoutesAndChecksAreTheSameOnAnyNumberOfThreads) {
  struct Run {
    RouteSet rs;
    RouteCheck check;
  };
  auto run = [](const FabricMap& map, const std::string& engine, unsigned workers,
                bool cut) -> Run {
    detail::set_route_workers(workers);
    auto rs = compute_routes(map, engine);
    EXPECT_TRUE(rs.ok()) << rs.error().to_string();
    if (!rs.ok()) return {};
    if (cut) {
      for (auto& w : rs->writes)
        if (w.size() > 2) {
          w.resize(w.size() / 2);
          break;
        }
    }
    RouteCheck check = verify_routes(map, *rs);
    detail::set_route_workers(0);
    return {*rs, check};
  };
  const std::pair<std::string, std::string> cases[] = {
      {"th2:cabinets=3", "fattree"},
      {"fattree:k=8,levels=3", "updown"},
      {"torus:4x4x4", "dor"},
      {"dragonfly:a=6,p=3,h=3", "dragonfly"},
      {"dragonfly:a=6,p=3,h=3", "dragonfly:nonminimal=1"},
      {"mesh:4x4", "minhop"},
      {"fattree:k=4,levels=3", "minhop"}};
  for (const auto& [fabric, engine] : cases)
    for (bool cut : {false, true}) {
      SCOPED_TRACE(fabric + " " + engine + (cut ? " cut short" : ""));
      FabricMap map = map_of(fabric);
      const Run one = run(map, engine, 1, cut);
      if (cut) {
        EXPECT_GT(one.check.misrouted, 0u);
        EXPECT_FALSE(one.check.problems.empty());
      }
      for (unsigned workers : {2u, 3u, 5u}) {
        SCOPED_TRACE(fmt::format("{} threads", workers));
        const Run many = run(map, engine, workers, cut);
        EXPECT_EQ(many.rs.writes, one.rs.writes);
        EXPECT_EQ(many.rs.vc_rules, one.rs.vc_rules);
        EXPECT_EQ(many.check.reachable_pairs, one.check.reachable_pairs);
        EXPECT_EQ(many.check.loops, one.check.loops);
        EXPECT_EQ(many.check.misrouted, one.check.misrouted);
        EXPECT_EQ(many.check.deadlock_free, one.check.deadlock_free);
        EXPECT_EQ(many.check.channels, one.check.channels);
        EXPECT_EQ(many.check.dependencies, one.check.dependencies);
        EXPECT_EQ(many.check.max_path_nrcs, one.check.max_path_nrcs);
        EXPECT_EQ(many.check.problems, one.check.problems);
      }
    }
}

TEST(RoutingTest, RangeCompressionMergesConsecutiveIds) {
  std::vector<RangeWrite> out;
  RangeCompressor c(0x3);
  c.add(5, 0x10, out);
  c.add(6, 0x10, out);
  c.add(7, 0x10, out);
  c.add(8, 0, out);      // no route: skipped, the range may cover it
  c.add(10, 0x10, out);  // 9 is not a NIC: covered
  c.add(11, 0x20, out);
  c.finish(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (RangeWrite{0x3, 5, 6, 0x10}));
  EXPECT_EQ(out[1], (RangeWrite{0x3, 11, 1, 0x20}));
  // Exact (FabricMap::exact_ranges, as route_ib asks): an id with no route closes the range.
  out.clear();
  RangeCompressor e(0x3, /*exact=*/true);
  e.add(5, 0x10, out);
  e.add(8, 0, out);
  e.add(10, 0x10, out);
  e.finish(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (RangeWrite{0x3, 5, 1, 0x10}));
  EXPECT_EQ(out[1], (RangeWrite{0x3, 10, 1, 0x10}));

  std::vector<RangeWrite> w{{0x1, 0, 4, 0x8}, {0x6, 0, 4, 0x8}, {0x6, 4, 2, 0x8}};
  merge_input_masks(w);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], (RangeWrite{0x7, 0, 4, 0x8}));
  EXPECT_EQ(w[1], (RangeWrite{0x6, 4, 2, 0x8}));
}

TEST(RoutingTest, RegistryDescribesEnginesAndRejectsBadSpecs) {
  std::string d = routing_engines().describe();
  for (const char* name : {"fattree", "updown", "minhop", "dor", "root="})
    EXPECT_NE(d.find(name), std::string::npos) << name;
  FabricMap map = map_of("fattree:k=4,levels=2");
  EXPECT_EQ(compute_routes(map, "spanning").error().id, 8u);
  EXPECT_EQ(compute_routes(map, "updown:root=9999").error().id, 5100u);
  EXPECT_FALSE(compute_routes(map, "fattree:bogus=1").ok());
  EXPECT_EQ(compute_routes(map, "dor").error().code, Code::kInvalidArgument);
  // A given root changes the tables but not their correctness.
  uint32_t some_nrc = 0;
  while (map.topology.is_nic(some_nrc)) ++some_nrc;
  auto rs = compute_routes(map, fmt::format("updown:root={}", some_nrc));
  ASSERT_TRUE(rs.ok());
  RouteCheck check = verify_routes(map, *rs);
  EXPECT_EQ(check.reachable_pairs, check.nic_pairs);
  EXPECT_TRUE(check.deadlock_free);
}

// DOR's dimension order decides the range writes: routed first, the dimension along which
// chip ids vary slowest makes a few long ranges per NRC. Every order routes every pair.
TEST(RoutingTest, DorRoutesTheSlowestVaryingDimensionFirst) {
  for (const char* spec : {"mesh:6x5x4", "torus:6x6x6"}) {
    FabricMap map = map_of(spec);
    uint64_t writes[4] = {};
    const char* orders[4] = {"auto", "xyz", "zyx", "yxz"};
    for (int i = 0; i < 4; ++i) {
      auto rs = compute_routes(map, fmt::format("dor:order={}", orders[i]));
      ASSERT_TRUE(rs.ok()) << rs.error().to_string();
      RouteCheck check = verify_routes(map, *rs);
      EXPECT_EQ(check.reachable_pairs, check.nic_pairs) << spec << " " << orders[i];
      writes[i] = rs->num_writes();
    }
    EXPECT_LE(writes[0], *std::min_element(writes + 1, writes + 4)) << spec;
    EXPECT_LT(writes[0] * 3, *std::max_element(writes + 1, writes + 4)) << spec;
  }
  FabricMap map = map_of("mesh:3x3");
  for (const char* bad : {"xyz", "xx", "yz", "ab"}) {
    auto rs = compute_routes(map, fmt::format("dor:order={}", bad));
    ASSERT_FALSE(rs.ok()) << bad;
    EXPECT_EQ(rs.error().id, 5113u);
    EXPECT_NE(rs.error().message.find(fmt::format("order = '{}'", bad)), std::string::npos);
  }
  EXPECT_TRUE(compute_routes(map, "dor:order=yx").ok());
}

// Loaded through in-band management, the chips hold exactly the computed tables and route
// MPs between all NIC pairs.
class RoutingBackends : public ::testing::TestWithParam<const char*> {};

TEST_P(RoutingBackends, LoadedTablesDeliverMpsBetweenAllPairs) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  FabricMap map = s->oracle();
  auto rs = compute_routes(map, "fattree").value();
  Requester req(*s->port, {64, 6, kSec, 2});
  LoadOptions lo;
  lo.verify_per_nrc = 2;
  auto load = load_routes(req, map, rs, lo);
  ASSERT_TRUE(load.ok()) << load.error().to_string();
  EXPECT_EQ(load->packets, rs.num_writes());
  EXPECT_EQ(load->failed, 0u);
  EXPECT_EQ(load->nrcs, map.topology.num_nrcs());
  EXPECT_GT(load->verify_packets, 0u);
  EXPECT_EQ(load->verify_mismatches, 0u);
  EXPECT_GT(load->elapsed, 0u);
  // Read back through management: the last destination of each range on two input ports.
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    for (const RangeWrite& w : rs.writes[v])
      for (uint8_t p = 0; p < 2; ++p)
        if (w.inputs.test(p)) {
          uint32_t dst = map.node_of.at(static_cast<uint16_t>(w.first_dest + w.count - 1));
          EXPECT_EQ(testing::read_route(req, map, v, p, dst), w.ports) << v << ":" << +p;
        }

  testing::AllPairs r = s->all_pairs_mp();
  EXPECT_EQ(r.pairs, 240u);
  EXPECT_EQ(r.sent, r.pairs);
  EXPECT_EQ(r.delivered, r.sent);
  EXPECT_EQ(r.wrong, 0u);
  if (!s->live_fabric()) {
    EXPECT_EQ(s->sim_fabric->stats().packets_dropped, 0u);
  }
}

// Pipelined loading overlaps the writes; serial loading (the paper's mode) pays a whole
// request per write.
TEST(RoutingTest, PipelinedLoadIsFasterThanSerial) {
  Picoseconds elapsed[2] = {0, 0};
  uint64_t writes = 0;
  for (int pipelined = 0; pipelined < 2; ++pipelined) {
    auto s = SimServer::make("fattree:k=4,levels=3");
    FabricMap map = s.oracle();
    auto rs = compute_routes(map, "updown").value();
    writes = rs.num_writes();
    Requester req(*s.port, pipelined ? RequesterOptions{64, 6, kSec, 2} : RequesterOptions{});
    auto load = load_routes(req, map, rs);
    ASSERT_TRUE(load.ok());
    EXPECT_EQ(load->failed, 0u);
    elapsed[pipelined] = load->elapsed;
  }
  EXPECT_GT(static_cast<double>(elapsed[0]) / kUs, 5.0 * static_cast<double>(writes));
  EXPECT_LT(elapsed[1] * 4, elapsed[0]);
}

TEST_P(RoutingBackends, EepromBootImageHoldsTheTables) {
  auto s = testing::Backend::make(GetParam(), "line:n=2");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  FabricMap map = s->oracle();
  auto rs = compute_routes(map, "minhop").value();
  Requester req(*s->port, {16, 6, 10 * kSec, 2});
  LoadOptions lo;
  lo.also_eeprom = true;
  auto load = load_routes(req, map, rs, lo);
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->failed, 0u);
  EXPECT_GT(load->eeprom_packets, 0u);
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (map.topology.is_nic(v)) continue;
    auto image = read_boot_image(req, map, v);  // in-band, as a server would check it
    ASSERT_TRUE(image.ok()) << image.error().to_string();
    ASSERT_EQ(image->routes.size(), rs.writes[v].size());
    for (size_t i = 0; i < rs.writes[v].size(); ++i) {
      EXPECT_EQ(image->routes[i].first, rs.writes[v][i].first_dest);
      EXPECT_EQ(image->routes[i].ports, rs.writes[v][i].ports);
    }
  }
}

TEST(RoutingTest, Th2SmallComputesAndVerifiesQuickly) {
  FabricMap map = map_of("th2:cabinets=3");
  auto t0 = std::chrono::steady_clock::now();
  auto rs = compute_routes(map, "fattree").value();
  RouteCheck check = verify_routes(map, rs);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(check.deadlock_free);
  EXPECT_LT(ms, 2000);
}

GALAXY_OVER_BACKENDS(RoutingBackends);

}  // namespace
}  // namespace galaxy::nm
