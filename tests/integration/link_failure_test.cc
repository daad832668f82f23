// A link fails on a small fat tree (taken down through management, in either back end); a fault
// report arrives, the affected region is re-discovered and re-routed, and traffic between every NIC
// pair still flows.
#include <gtest/gtest.h>

#include "../nm/nm_test_util.h"
#include "chip/refusal.h"
#include "nm/discovery.h"
#include "nm/faults.h"
#include "nm/reroute.h"
#include "nm/route_load.h"
#include "nm/routing.h"
#include "nm/trace.h"

namespace galaxy::nm {
namespace {

class LinkFailureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LinkFailureTest, ReportRediscoverRerouteAndAllPairsStillFlow) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  Requester req(*s->port, {64, 6, s->wait(100 * kUs), 2});
  DiscoveryOptions dopt;
  dopt.pipelined = true;
  auto found = discover(req, dopt);
  ASSERT_TRUE(found.ok());
  FabricMap map = found->map;
  auto routes = compute_routes(map, "fattree");
  ASSERT_TRUE(routes.ok()) << routes.error().to_string();
  ASSERT_TRUE(verify_routes(map, *routes).deadlock_free);
  auto load = load_routes(req, map, *routes);
  ASSERT_TRUE(load.ok());
  ASSERT_EQ(load->failed, 0u);
  ASSERT_TRUE(enable_fault_reporting(req, map).ok());
  testing::AllPairs first = s->all_pairs_mp();
  EXPECT_EQ(first.sent, first.pairs);
  EXPECT_EQ(first.delivered, first.pairs);

  // Fail a link between an aggregation and an edge switch away from the server: below it,
  // only that link leads down to the edge, so traffic through it has no alternative.
  const auto& plan = s->topology();
  fabric::PortRef cut{UINT32_MAX, 0};
  for (uint32_t v = 0; v < plan.num_nodes() && cut.node == UINT32_MAX; ++v) {
    if (plan.is_nic(v) || plan.level(v) != 2) continue;  // aggregation
    for (uint8_t p = 0; p < plan.num_ports(v); ++p) {
      auto peer = plan.peer({v, p});
      if (!peer || plan.is_nic(peer->node) || plan.level(peer->node) != 1) continue;
      bool serves_server = false;
      for (uint8_t q = 0; q < plan.num_ports(peer->node); ++q) {
        auto n = plan.peer({peer->node, q});
        serves_server = serves_server || (n && n->node == s->server_node);
      }
      if (!serves_server) {
        cut = {v, p};
        break;
      }
    }
  }
  ASSERT_NE(cut.node, UINT32_MAX);
  std::vector<FaultRecord> faults;
  req.set_fault_handler(
      [&](const wire::MgmtPacket& p) { faults.push_back(decode_fault(p, map, s->port->now())); });
  ASSERT_TRUE(testing::force_link_down(req, map,
                                       {map.node_of.at(static_cast<uint16_t>(cut.node)), cut.port})
                  .ok());
  req.drain_faults(s->wait(50 * kUs));
  ASSERT_FALSE(faults.empty());
  EXPECT_EQ(faults[0].cause, "link_down");

  // Before re-routing, a path trace towards the NICs below the dead link names the hop where
  // it fails (the aggregation switch whose only way down is the dead port) and why.
  uint32_t edge = plan.peer(cut)->node;
  uint16_t agg_chip = map.chip_id[map.node_of.at(static_cast<uint16_t>(cut.node))];
  int failing = 0, traced = 0;
  for (uint8_t q = 0; q < plan.num_ports(edge); ++q) {
    auto dst = plan.peer({edge, q});
    if (!dst || !plan.is_nic(dst->node)) continue;
    for (uint32_t i = 0; i < plan.num_nics(); ++i) {
      uint32_t src = plan.nic_node(i);
      if (plan.peer({src, 0})->node == edge) continue;
      auto tr = trace(req, map, map.node_of.at(static_cast<uint16_t>(src)),
                      map.node_of.at(static_cast<uint16_t>(dst->node)));
      ASSERT_TRUE(tr.ok()) << tr.error().to_string();
      ++traced;
      if (tr->reachable) continue;
      ++failing;
      EXPECT_EQ(tr->failure, TraceFailure::kLinkDown) << tr->reason;
      ASSERT_GE(tr->failed_hop, 0);
      ASSERT_LT(static_cast<size_t>(tr->failed_hop), tr->hops.size());
      EXPECT_EQ(tr->hops[tr->failed_hop].chip_id, agg_chip) << tr->reason;
      EXPECT_NE(tr->reason.find(std::to_string(cut.port)), std::string::npos) << tr->reason;
    }
  }
  EXPECT_GT(traced, 0);
  EXPECT_GT(failing, 0);

  // Before re-routing, traffic that must cross the dead link does not arrive, and each sender
  // is told (chip/refusal.h): the same in both engines.
  testing::AllPairs before = s->all_pairs_mp();
  EXPECT_EQ(before.sent, before.pairs);
  EXPECT_LT(before.delivered, before.pairs);
  EXPECT_GT(before.refused, 0u);
  EXPECT_EQ(before.delivered + before.refused, before.pairs);
  EXPECT_EQ(before.refusal_id, chip::kErrNoUsableRoute) << before.refusal;
  EXPECT_EQ(before.wrong, 0u);

  auto region = rediscover_region(req, map, faults[0].chip, faults[0].port);
  ASSERT_TRUE(region.ok()) << region.error().to_string();
  ASSERT_EQ(region->links_down.size(), 1u);
  auto rr = reroute(req, map, "fattree", *routes);
  ASSERT_TRUE(rr.ok()) << rr.error().to_string();
  EXPECT_EQ(rr->check.reachable_pairs, rr->check.nic_pairs);
  EXPECT_EQ(rr->check.loops, 0u);
  EXPECT_GT(rr->nrcs_reloaded, 0u);
  EXPECT_LT(rr->nrcs_reloaded, map.topology.num_nrcs());  // only the changed ones

  testing::AllPairs after = s->all_pairs_mp();
  EXPECT_EQ(after.sent, after.pairs);
  EXPECT_EQ(after.delivered, after.pairs);
  EXPECT_EQ(after.wrong, 0u);
  EXPECT_EQ(after.pairs, plan.num_nics() * (plan.num_nics() - 1));
}

GALAXY_OVER_BACKENDS(LinkFailureTest);

}  // namespace
}  // namespace galaxy::nm
