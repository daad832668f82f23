#include "nm/discovery.h"

#include <gtest/gtest.h>

#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

using testing::SimServer;

// (back end, topology): the live fabrics are the smaller ones (each host's daemon is a process).
// Every route discovery built really reaches its chip (up to `limit` chips): read CHIP_ID
// through it.
void expect_routes_reach_their_chips(Requester& req, const FabricMap& map, int limit) {
  int checked = 0;
  for (uint32_t v = 0; v < map.num_nodes() && checked < limit; ++v) {
    if (map.topology.is_nic(v) && v == map.server_node) continue;
    MgmtReply got;
    req.submit(MgmtRequest::read(map.target[v], chip::reg::kChipId),
               [&](const MgmtReply& x) { got = x; });
    req.run();
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_EQ(chip::reg::chip_id_value(got.response.data.value[0]), map.chip_id[v]);
    ++checked;
  }
}

class DiscoveryTest : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(DiscoveryTest, SerialAndPipelinedFindTheBuiltFabric) {
  const auto [kind, spec] = GetParam();
  for (bool pipelined : {false, true}) {
    auto s = testing::Backend::make(kind, spec);
    ASSERT_TRUE(s) << kind << " " << spec << " did not come up";
    Requester req(*s->port, {});
    DiscoveryOptions o;
    o.pipelined = pipelined;
    auto r = discover(req, o);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_TRUE(same_fabric(r->map, s->topology())) << spec;
    EXPECT_EQ(r->failed_requests, 0u);
    // Two ports per register, two registers per packet, for each NRC's own radix.
    uint64_t want = 0;
    const auto& plan = s->topology();
    for (uint32_t v = 0; v < plan.num_nodes(); ++v)
      if (!plan.is_nic(v)) want += ((plan.num_ports(v) + 1) / 2 + 1) / 2;
    EXPECT_EQ(r->requests, want);
    expect_routes_reach_their_chips(req, r->map, 12);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sim, DiscoveryTest,
    ::testing::Combine(::testing::Values("sim"),
                       ::testing::Values("line:n=5", "fattree:k=4,levels=3", "mesh:3x3",
                                         "torus:4x4", "dragonfly:a=4,p=2,h=2", "th2:cabinets=1")),
    [](const auto& i) { return testing::param_name(std::get<1>(i.param)); });
INSTANTIATE_TEST_SUITE_P(Live, DiscoveryTest,
                         ::testing::Combine(::testing::Values("live"),
                                            ::testing::Values("fattree:k=4,levels=2",
                                                              "fattree:k=4,levels=3")),
                         [](const auto& i) { return testing::param_name(std::get<1>(i.param)); });

// A fabric whose chip ids run from 0xFFF0 across 65,535 (17-bit ids, wire/chip_id.h): its chips
// say so in CHIP_ID, discovery reads each NRC's PEER_SUMMARY_HIGH with its peer identities and
// finds every chip under its whole id, 0xFFFF (all ones in 16 bits, but no longer "unconfigured")
// and those above 0x10000 included, every link where it is, and routes that reach each chip.
TEST(DiscoveryTest, ChipIdsPastSixteenBitsAreFoundWhole) {
  constexpr uint32_t kFirst = 0xFFF0;
  for (bool pipelined : {false, true}) {
    sim::SimOptions so;
    so.first_chip_id = kFirst;
    auto s = SimServer::make_with("fattree:k=4,levels=3", so);
    const auto& plan = s.fabric->topology();
    Requester req(*s.port, {});
    DiscoveryOptions o;
    o.pipelined = pipelined;
    auto r = discover(req, o);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_TRUE(r->problems.empty()) << r->problems.front();
    EXPECT_EQ(r->failed_requests, 0u);
    ASSERT_EQ(r->map.num_nodes(), plan.num_nodes());
    std::vector<bool> seen(plan.num_nodes());
    for (uint32_t n = 0; n < r->map.num_nodes(); ++n) {
      const uint32_t v = r->map.chip_id[n] - kFirst;  // the plan's node of this chip
      ASSERT_LT(v, plan.num_nodes()) << "chip id " << r->map.chip_id[n];
      EXPECT_FALSE(seen[v]);
      seen[v] = true;
      EXPECT_EQ(r->map.topology.is_nic(n), plan.is_nic(v));
      for (uint8_t p = 0; p < r->map.topology.num_ports(n); ++p) {
        auto got = r->map.topology.peer({n, p});
        auto want = plan.peer({v, p});
        ASSERT_EQ(got.has_value(), want.has_value()) << "chip " << r->map.chip_id[n] << ":" << p;
        if (!got) continue;
        EXPECT_EQ(r->map.chip_id[got->node], kFirst + want->node);
        EXPECT_EQ(got->port, want->port);
      }
    }
    EXPECT_TRUE(r->map.node_of.count(0xFFFF));
    EXPECT_TRUE(r->map.node_of.count(kFirst + plan.num_nodes() - 1));
    // Identity words as on any fabric, plus one PEER_SUMMARY_HIGH register per NRC: the 4-port
    // NRCs' two identity registers and it take two packets.
    uint64_t want = 0;
    for (uint32_t v = 0; v < plan.num_nodes(); ++v)
      if (!plan.is_nic(v)) want += ((plan.num_ports(v) + 1) / 2 + 1 + 1) / 2;
    EXPECT_EQ(r->requests, want);
    expect_routes_reach_their_chips(req, r->map, 40);
  }
}

// A chain of 30 NRCs: the 21st from the server NIC would need a 21-hop route back, more than a
// management packet's source route holds. It is reported by name and nothing is sent to it by a
// truncated route; everything nearer is found and answers through the routes discovery built.
TEST(DiscoveryTest, ChipsBeyondTheSourceRoutesReachAreReportedNotMisrouted) {
  for (bool pipelined : {false, true}) {
    auto s = SimServer::make("mesh:40");
    Requester req(*s.port, {});
    DiscoveryOptions o;
    o.pipelined = pipelined;
    auto r = discover(req, o);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->failed_requests, 0u);
    ASSERT_EQ(r->problems.size(), 1u);
    EXPECT_NE(r->problems[0].find("E5031"), std::string::npos) << r->problems[0];
    EXPECT_NE(r->problems[0].find("more than 31 NRC hops"), std::string::npos) << r->problems[0];
    EXPECT_EQ(r->map.topology.num_nrcs(), 31u);
    EXPECT_EQ(r->map.topology.num_nics(), 31u);
    for (uint32_t v = 0; v < r->map.num_nodes(); ++v) EXPECT_LE(r->map.hops[v], 31);
    expect_routes_reach_their_chips(req, r->map, 62);
  }
  // Routes recomputed from a map (as after a fault) follow the same limit: the chips past it are
  // unreachable, not given truncated routes.
  auto s = SimServer::make("mesh:40");
  const FabricMap m = s.oracle();
  uint32_t reachable_nrcs = 0;
  for (uint32_t v = 0; v < m.num_nodes(); ++v) {
    if (m.hops[v] == UINT8_MAX) {
      EXPECT_EQ(m.target[v].forward.hop_num, 0u);
      continue;
    }
    EXPECT_LE(m.hops[v], 31);
    reachable_nrcs += !m.topology.is_nic(v);
  }
  EXPECT_EQ(reachable_nrcs, 31u);
}

TEST(DiscoveryTimeTest, SerialTimeIsSixRequestsPerNrcAtItsHopCount) {
  auto s = SimServer::make("th2:cabinets=1");
  Requester req(*s.port, {});
  auto r = discover(req, {});
  ASSERT_TRUE(r.ok());
  double want = 0;
  for (uint32_t v = 0; v < r->map.num_nodes(); ++v)
    // 24-port NRCs: 6 requests, each reading two registers (DP plus one more read, 0.7 us).
    if (!r->map.topology.is_nic(v)) want += 6 * (7.40 + 0.7 + (r->map.hops[v] + 1) * 0.8762);
  EXPECT_NEAR(static_cast<double>(r->elapsed) / kUs, want, want * 0.001);
}

class DiscoveryCablingTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DiscoveryCablingTest, MissingLinkIsReportedWithBothEnds) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  const auto& plan = s->topology();
  const FabricMap oracle = s->oracle();
  Requester req(*s->port, {});
  // Take down one NRC-NRC link far from the server.
  fabric::PortRef cut{UINT32_MAX, 0};
  for (uint32_t v = plan.num_nodes(); v-- > 0 && cut.node == UINT32_MAX;)
    for (uint8_t p = 0; p < plan.num_ports(v); ++p) {
      auto peer = plan.peer({v, p});
      if (!plan.is_nic(v) && peer && !plan.is_nic(peer->node)) {
        cut = {v, p};
        break;
      }
    }
  ASSERT_TRUE(testing::force_link_down(req, oracle, cut).ok());
  auto r = discover(req, {});
  ASSERT_TRUE(r.ok());
  auto issues = check_cabling(r->map, plan);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, CablingIssue::Kind::kMissing);
  std::string ends = issues[0].a + " " + issues[0].b;
  EXPECT_NE(ends.find(plan.name(cut.node)), std::string::npos) << ends;
  EXPECT_NE(ends.find(plan.name(plan.peer(cut)->node)), std::string::npos) << ends;
  EXPECT_FALSE(same_fabric(r->map, plan));
}

GALAXY_OVER_BACKENDS(DiscoveryCablingTest);

}  // namespace
}  // namespace galaxy::nm
