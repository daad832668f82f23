// Fat trees of switches wider than TH-2's 24 ports (docs/system.md 6, "Any radix and size"), up to
// 128 ports: the whole bring-up works — discovery, routing, loading through management, the check
// of what the chips hold, and table-routed MPs between random NIC pairs, through ports above 23.
// Ports above 31, which the TH-2 management packet's 5-bit fields cannot name, are reached by its
// wide variant (docs/protocol.md), over both back ends.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "chip/registers.h"
#include "nm/discovery.h"
#include "nm/faults.h"
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
                                           "fattree:k=32,levels=2", "fattree:k=36,levels=2",
                                           "fattree:k=48,levels=2", "fattree:k=64,levels=2",
                                           "fattree:k=128,levels=2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// Two 36-port NRCs, 34 NICs each, joined through ports 34/35: the far NRC's routes from the server
// and back both name a port above 31, so its requests, responses and fault reports are all the
// wide variant.
class WideSwitchBackends : public ::testing::TestWithParam<const char*> {};

TEST_P(WideSwitchBackends, DiscoveryRequestsAndFaultReportsCrossPortsAbove31) {
  auto s = testing::Backend::make(GetParam(), "mesh:2,nics=34");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  Requester req(*s->port, {64, 6, s->wait(100 * kUs), 2});
  DiscoveryOptions o;
  o.pipelined = true;
  auto d = discover(req, o);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_EQ(d->failed_requests, 0u);
  EXPECT_TRUE(d->problems.empty()) << d->problems[0];
  const FabricMap& map = d->map;
  EXPECT_TRUE(same_fabric(map, s->topology()));
  // The NRC one hop away, and a NIC behind it on a port above 31.
  uint32_t far = UINT32_MAX;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && map.hops[v] == 1) far = v;
  ASSERT_NE(far, UINT32_MAX);
  EXPECT_TRUE(map.target[far].forward.needs_wide()) << map.target[far].forward.to_string();
  EXPECT_TRUE(map.target[far].backward.needs_wide()) << map.target[far].backward.to_string();
  auto nic = map.topology.peer({far, 33});
  ASSERT_TRUE(nic && map.topology.is_nic(nic->node));
  EXPECT_TRUE(map.target[nic->node].forward.needs_wide());

  // Every chip answers a register round trip.
  int answered = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (v == map.server_node) continue;
    req.submit(MgmtRequest::write(map.target[v], chip::reg::kScratch, 0x5100 + v),
               [&](const MgmtReply& r) { answered += r.status.ok(); });
    req.submit(MgmtRequest::read(map.target[v], chip::reg::kScratch), [&, v](const MgmtReply& r) {
      answered += r.status.ok() && r.response.data.value[0] == 0x5100 + v;
    });
  }
  req.run();
  EXPECT_EQ(answered, 2 * static_cast<int>(map.num_nodes() - 1));

  // The far NRC's fault report comes back over its wide route (FAULT_ROUTE_EXT).
  auto setup = enable_fault_reporting(req, map);
  ASSERT_TRUE(setup.ok());
  EXPECT_EQ(setup->failed, 0u);
  std::vector<FaultRecord> faults;
  req.set_fault_handler(
      [&](const wire::MgmtPacket& p) { faults.push_back(decode_fault(p, map, s->port->now())); });
  ASSERT_TRUE(testing::force_link_down(req, map, {far, 33}).ok());
  req.drain_faults(s->wait(50 * kUs));
  bool from_far = false;
  for (const FaultRecord& f : faults)
    from_far = from_far || (f.chip == map.chip_id[far] && f.port == 33 && f.cause == "link_down");
  EXPECT_TRUE(from_far) << faults.size() << " fault reports";
}

GALAXY_OVER_BACKENDS(WideSwitchBackends);

}  // namespace
}  // namespace galaxy::nm
