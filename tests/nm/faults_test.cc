#include "nm/faults.h"

#include <gtest/gtest.h>

#include "chip/registers.h"
#include "nm/discovery.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

using testing::SimServer;

TEST(FaultsTest, LinkDownIsReportedStoredAndTheRegionRediscovered) {
  auto s = SimServer::make("fattree:k=4,levels=3");
  Requester req(*s.port, {64, 6, 100 * kUs, 2});
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
      [&](const wire::MgmtPacket& p) { faults.push_back(decode_fault(p, map, s.port->now())); });
  // Cut a link between two NRCs that some source routes cross.
  const auto& plan = s.fabric->topology();
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
  ASSERT_TRUE(s.fabric->set_link(cut, false).ok());
  req.drain_faults(50 * kUs);
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
}

TEST(FaultsTest, MaskedFaultsAreNotReported) {
  auto s = SimServer::make("line:n=3");
  Requester req(*s.port, {});
  auto map = s.oracle();
  ASSERT_TRUE(enable_fault_reporting(req, map, ~uint64_t{0}).ok());
  int reports = 0;
  req.set_fault_handler([&](const wire::MgmtPacket&) { ++reports; });
  uint32_t far = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && map.hops[v] == 2) far = v;
  ASSERT_TRUE(s.fabric->set_link({far, map.target[far].backward.hops[0]}, false).ok());
  req.drain_faults(50 * kUs);
  EXPECT_EQ(reports, 0);
  // Latched all the same.
  EXPECT_EQ(s.fabric->chip(far).read_register(chip::reg::kFaultStatus).value & 1, 1u);
}

}  // namespace
}  // namespace galaxy::nm
