#include "nm/faults.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "chip/registers.h"
#include "nm/discovery.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

class FaultsBackends : public ::testing::TestWithParam<const char*> {};

TEST_P(FaultsBackends, LinkDownIsReportedStoredAndTheRegionRediscovered) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  Requester req(*s->port, {64, 6, s->wait(100 * kUs), 2});
  DiscoveryOptions d;
  d.pipelined = true;
  auto found = discover(req, d);
  ASSERT_TRUE(found.ok());
  FabricMap map = found->map;
  auto setup = enable_fault_reporting(req, map);
  ASSERT_TRUE(setup.ok());
  EXPECT_EQ(setup->failed, 0u);
  EXPECT_EQ(setup->chips, map.num_nodes() - 1);

  std::vector<FaultRecord> faults;
  req.set_fault_handler(
      [&](const wire::MgmtPacket& p) { faults.push_back(decode_fault(p, map, s->port->now())); });
  // Take down a link between two NRCs that some source routes cross: one of the server's NRC's
  // uplinks (chip ids are plan nodes).
  const auto& plan = s->topology();
  fabric::PortRef cut{UINT32_MAX, 0};
  for (uint32_t v = 0; v < plan.num_nodes() && cut.node == UINT32_MAX; ++v) {
    if (plan.is_nic(v)) continue;
    for (uint8_t p = 0; p < plan.num_ports(v); ++p) {
      auto peer = plan.peer({v, p});
      if (peer && !plan.is_nic(peer->node) &&
          map.hops[map.node_of.at(static_cast<uint16_t>(v))] == 0) {
        cut = {v, p};
        break;
      }
    }
  }
  ASSERT_NE(cut.node, UINT32_MAX);
  const uint32_t cut_at = map.node_of.at(static_cast<uint16_t>(cut.node));
  ASSERT_TRUE(testing::force_link_down(req, map, {cut_at, cut.port}).ok());
  req.drain_faults(s->wait(50 * kUs));
  // The far end's report may have needed the link it reports.
  ASSERT_GE(faults.size(), 1u);
  bool from_cut_end = false;
  for (const auto& f : faults) {
    EXPECT_EQ(f.cause, "link_down");
    EXPECT_EQ(f.severity, "critical");
    from_cut_end = from_cut_end || (f.chip == cut.node && f.port == cut.port);
  }
  EXPECT_TRUE(from_cut_end);

  const FaultRecord& f = faults.front();
  auto upd = rediscover_region(req, map, f.chip, f.port);
  ASSERT_TRUE(upd.ok()) << upd.error().to_string();
  ASSERT_EQ(upd->links_down.size(), 1u);
  EXPECT_GT(upd->routes_changed, 0u);
  EXPECT_EQ(upd->unreachable, 0u);
  EXPECT_EQ(map.topology.num_links(), plan.num_links() - 1);
  // Every chip answers over its new route.
  int answered = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (v == map.server_node) continue;
    req.submit(MgmtRequest::read(map.target[v], chip::reg::kChipId),
               [&](const MgmtReply& r) { answered += r.status.ok(); });
  }
  req.run();
  EXPECT_EQ(answered, static_cast<int>(map.num_nodes() - 1));

  // Let the link train again: both ends report it, and a rediscovery finds it back.
  faults.clear();
  ASSERT_TRUE(testing::force_link_down(req, map, {cut_at, cut.port}, false).ok());
  req.drain_faults(s->wait(50 * kUs));
  ASSERT_GE(faults.size(), 1u);
  from_cut_end = false;
  for (const auto& u : faults) {
    EXPECT_EQ(u.cause, "link_up");
    from_cut_end = from_cut_end || (u.chip == cut.node && u.port == cut.port);
  }
  EXPECT_TRUE(from_cut_end);
  auto again = discover(req, d);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(same_fabric(again->map, plan));
}

// A chip dies (every link down): its neighbours' reports that arrive go to one re-discovery,
// which reads over routes around the reported links, finds the chip silent after one request
// timeout and takes all of its links out of the map, the unreported ones too; every other chip
// still answers.
TEST_P(FaultsBackends, AChipThatDiesIsTakenOutInOneBatchFromItsNeighboursReports) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  const Picoseconds timeout = s->wait(100 * kUs);
  Requester req(*s->port, {64, 6, timeout, 2});
  DiscoveryOptions d;
  d.pipelined = true;
  auto found = discover(req, d);
  ASSERT_TRUE(found.ok());
  FabricMap map = found->map;
  ASSERT_TRUE(enable_fault_reporting(req, map).ok());
  std::vector<FaultRecord> faults;
  req.set_fault_handler(
      [&](const wire::MgmtPacket& p) { faults.push_back(decode_fault(p, map, s->port->now())); });
  // A switch with no NIC of its own, away from the server.
  uint32_t dead = UINT32_MAX;
  for (uint32_t v = 0; v < map.num_nodes() && dead == UINT32_MAX; ++v) {
    if (map.topology.is_nic(v) || map.hops[v] == 0 || map.hops[v] == UINT8_MAX) continue;
    bool nic_below = false;
    for (uint8_t p = 0; p < map.topology.num_ports(v); ++p)
      if (auto peer = map.topology.peer({v, p}); peer && map.topology.is_nic(peer->node))
        nic_below = true;
    if (!nic_below) dead = v;
  }
  ASSERT_NE(dead, UINT32_MAX);
  // Its links go down, the one towards the server last (written at the other end).
  const uint8_t back = map.target[dead].backward.hops[0];
  std::vector<uint8_t> ports;
  for (uint8_t p = 0; p < map.topology.num_ports(dead); ++p)
    if (map.topology.peer({dead, p}) && p != back) ports.push_back(p);
  ports.push_back(back);
  for (uint8_t p : ports) ASSERT_TRUE(testing::force_link_down(req, map, {dead, p}).ok());
  req.drain_faults(s->wait(50 * kUs));
  std::vector<std::pair<wire::ChipId, uint8_t>> reported;
  for (const auto& f : faults)
    if (f.cause == "link_down" && f.chip != map.chip_id[dead])
      reported.push_back({static_cast<wire::ChipId>(f.chip), f.port});
  // Reports whose fault route crossed the dead chip are lost; the rest say which links went.
  ASSERT_GE(reported.size(), 1u) << "a neighbour reports";
  const Picoseconds t0 = s->port->now();
  auto upd = rediscover_region(req, map, reported);
  const Picoseconds took = s->port->now() - t0;
  ASSERT_TRUE(upd.ok()) << upd.error().to_string();
  ASSERT_EQ(upd->silent.size(), 1u);
  EXPECT_EQ(upd->silent[0], map.chip_id[dead]);
  EXPECT_EQ(map.hops[dead], UINT8_MAX);
  for (uint8_t p = 0; p < map.topology.num_ports(dead); ++p)
    EXPECT_FALSE(map.topology.peer({dead, p})) << "port " << int{p};
  EXPECT_LT(took, 2 * 3 * timeout) << "one timeout for the silent chip, not one per report";
  int answered = 0, asked = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (v == map.server_node || v == dead || map.hops[v] == UINT8_MAX) continue;
    ++asked;
    req.submit(MgmtRequest::read(map.target[v], chip::reg::kChipId),
               [&](const MgmtReply& r) { answered += r.status.ok(); });
  }
  req.run();
  EXPECT_EQ(answered, asked);
  EXPECT_EQ(asked, static_cast<int>(map.num_nodes()) - 2);
}

// A chip more than 20 NRCs from the server reports over its long backward route (its hops
// beyond 20 in FAULT_ROUTE_EXT): a link forced down at the far end of a 26-NRC chain.
TEST_P(FaultsBackends, ChipsBeyond20HopsReportOverTheirLongRoutes) {
  auto s = testing::Backend::make(GetParam(), "line:n=26");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  Requester req(*s->port, {});
  auto map = s->oracle();
  ASSERT_TRUE(enable_fault_reporting(req, map).ok());
  std::vector<FaultRecord> faults;
  req.set_fault_handler(
      [&](const wire::MgmtPacket& p) { faults.push_back(decode_fault(p, map, s->port->now())); });
  uint32_t far = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && map.hops[v] != UINT8_MAX && map.hops[v] > map.hops[far]) far = v;
  ASSERT_GT(map.target[far].backward.hop_num, 21);
  // Its link towards the server: the report must come from beyond the cut, the far chip itself.
  const uint8_t toward_server = map.target[far].backward.hops[0];
  ASSERT_TRUE(testing::force_link_down(req, map, {far, toward_server}).ok());
  req.drain_faults(s->wait(50 * kUs));
  bool from_near_end = false;
  for (const auto& f : faults) from_near_end = from_near_end || f.cause == "link_down";
  EXPECT_TRUE(from_near_end) << "the link's near end (21+ hops out) reported";
  faults.clear();
  ASSERT_TRUE(testing::force_link_down(req, map, {far, toward_server}, false).ok());
  req.drain_faults(s->wait(50 * kUs));
  bool far_reported = false;
  for (const auto& f : faults)
    far_reported = far_reported || (f.cause == "link_up" && f.chip == map.chip_id[far]);
  EXPECT_TRUE(far_reported) << "the far chip (" << int{map.target[far].backward.hop_num}
                            << " hops back) reported over its long route";
}

TEST_P(FaultsBackends, MaskedFaultsAreNotReported) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  Requester req(*s->port, {});
  auto map = s->oracle();
  ASSERT_TRUE(enable_fault_reporting(req, map, ~uint64_t{0}).ok());
  int reports = 0;
  req.set_fault_handler([&](const wire::MgmtPacket&) { ++reports; });
  uint32_t far = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && map.hops[v] == 2) far = v;
  auto near = *map.topology.peer({far, map.target[far].backward.hops[0]});
  ASSERT_TRUE(testing::force_link_down(req, map, near).ok());
  req.drain_faults(s->wait(50 * kUs));
  EXPECT_EQ(reports, 0);
  // Latched all the same.
  uint64_t status = 0;
  req.submit(MgmtRequest::read(map.target[near.node], chip::reg::kFaultStatus),
             [&](const MgmtReply& r) {
               ASSERT_TRUE(r.status.ok());
               status = r.response.data.value[0];
             });
  req.run();
  EXPECT_EQ(status & 1, 1u);
}

// LINK_STATE [1:0] of `end` (a plan node and port) through a map of the fabric, UINT64_MAX
// if the chip does not answer.
uint64_t link_state(Requester& req, const FabricMap& map, fabric::PortRef end) {
  uint64_t v = UINT64_MAX;
  req.submit(MgmtRequest::read(map.target[map.node_of.at(static_cast<uint16_t>(end.node))],
                               chip::reg::port_register(end.port, chip::reg::port::kLinkState)),
             [&](const MgmtReply& r) {
               if (r.status.ok()) v = r.response.data.value[0] & 3;
             });
  req.run();
  return v;
}

TEST_P(FaultsBackends, ForcedDownLinkIsDownAtBothEndsUntilEnabled) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  const auto& plan = s->topology();
  // Live: a link between two NRCs of different hosts, whose ends learn of each other only through
  // the link layer's frames.
  fabric::PortRef end{UINT32_MAX, 0};
  for (uint32_t v = 0; v < plan.num_nodes() && end.node == UINT32_MAX; ++v)
    for (uint8_t p = 0; p < plan.num_ports(v) && end.node == UINT32_MAX; ++p) {
      auto peer = plan.peer({v, p});
      if (plan.is_nic(v) || !peer || plan.is_nic(peer->node)) continue;
      if (s->live_fabric() && !s->live->fabric().crosses_hosts({v, p})) continue;
      end = {v, p};
    }
  ASSERT_NE(end.node, UINT32_MAX);
  const fabric::PortRef peer = *plan.peer(end);
  Requester req(*s->port, {64, 6, s->wait(100 * kUs), 2});
  ASSERT_TRUE(testing::force_link_down(req, s->oracle(), end).ok());
  auto found = discover(req, {});  // routes around the link to reach both ends
  ASSERT_TRUE(found.ok());
  const FabricMap& m = found->map;
  EXPECT_EQ(m.topology.num_links(), plan.num_links() - 1);
  auto both = [&](uint64_t state) {
    for (int i = 0; i < 200; ++i) {  // live: the far end hears of it within a frame
      if (link_state(req, m, end) == state && link_state(req, m, peer) == state) return true;
      if (!s->live_fabric()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  constexpr auto kDown = static_cast<uint64_t>(chip::LinkState::kDown);
  constexpr auto kUp = static_cast<uint64_t>(chip::LinkState::kUp);
  EXPECT_TRUE(both(kDown));
  // Nothing trains while it is held down.
  if (s->live_fabric()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(both(kDown));

  ASSERT_TRUE(testing::force_link_down(req, s->oracle(), end, false).ok());
  EXPECT_TRUE(both(kUp));
  auto again = discover(req, {});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(same_fabric(again->map, plan));
}

GALAXY_OVER_BACKENDS(FaultsBackends);

}  // namespace
}  // namespace galaxy::nm
