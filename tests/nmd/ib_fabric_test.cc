// The daemon's InfiniBand back end (nmd/ib_fabric.h) on a subnet modelled in-process
// (tests/ib/ib_model_subnet.h): the console's view of a swept subnet (chips by GUID, IBA port
// numbers, link states, levels), a switch's table as the model's switch holds it, a trace, a
// counter that rises between scans as a port_errors fault, one node's counters read now with
// their changes, and a cable pulled between sweeps as a critical link_down alarm with the link
// kept in the view, down. Names are the ones users give: descriptions, GUID names, LIDs.
#include "nmd/ib_fabric.h"

#include <gtest/gtest.h>

#include "../ib/ib_model_subnet.h"
#include "fabric/builders.h"

namespace galaxy::nmd {
namespace {

struct IbFabricTest : ::testing::Test {
  fabric::Topology topo;
  test::ModelSubnet* model = nullptr;  // owned by fabric
  std::unique_ptr<IbFabric> fabric;
  std::vector<Event> events;

  void SetUp() override {
    // k = 4, 2 levels: 4 leaves (level 1) with 2 hosts each, 2 spines (level 2); 8 hosts.
    auto t = fabric::build_topology("fattree:k=4,levels=2");
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    topo = std::move(*t);
    auto port = std::make_unique<test::ModelSubnet>(topo, topo.nic_node(0));
    model = port.get();
    fabric = std::make_unique<IbFabric>(std::move(port), [this](Event e) { events.push_back(e); });
  }
  std::vector<Event> of_cause(const std::string& cause) const {
    std::vector<Event> out;
    for (const Event& e : events)
      if (e.cause == cause) out.push_back(e);
    return out;
  }
  uint32_t chip(const std::string& name) const {
    auto c = fabric->resolve(name);
    EXPECT_TRUE(c.ok()) << name << ": " << c.error().to_string();
    return c.ok() ? *c : fabric::kNoNode;
  }
};

TEST_F(IbFabricTest, ASweptSubnetIsShownByGuidWithIbaPortNumbers) {
  auto r = fabric->sweep("fattree");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ((*r)["subnet_up"], true);
  EXPECT_EQ((*r)["changed"], false);
  EXPECT_EQ(fabric->routes_summary()["engine"], "fattree");
  ASSERT_EQ(of_cause("subnet up").size(), 1u);

  auto v = fabric->view();
  ASSERT_EQ(v->chips.size(), topo.num_nodes());
  EXPECT_EQ(v->links(), topo.num_links());
  EXPECT_EQ(v->links_down(), 0u);
  EXPECT_EQ(v->port_base, 1);
  EXPECT_EQ(v->nic_chips.size(), topo.num_nics());
  for (uint32_t n = 0; n < topo.num_nodes(); ++n) {
    // Every node of the model by its description, its GUID name and its GUID.
    const uint32_t c = chip(topo.name(n));
    EXPECT_EQ(c, chip(fabric::guid_name(topo.is_nic(n) ? 'H' : 'S', model->guid(n))));
    EXPECT_EQ(c, chip(fmt::format("{:#x}", model->guid(n))));
    const ChipView& cv = v->chips[c];
    EXPECT_EQ(cv.name, topo.name(n));
    EXPECT_EQ(cv.kind, topo.kind(n));
    EXPECT_EQ(cv.level, topo.level(n)) << cv.name;
    EXPECT_GE(cv.hops, 0);
    EXPECT_EQ(v->plan->identity(c).guid, model->guid(n));
    for (uint8_t p = 0; p < topo.num_ports(n); ++p) {
      auto peer = topo.peer({n, p});
      const PortView& pv = v->port(c, p);
      if (!peer) {
        EXPECT_EQ(pv.link, LinkView::kFree);
        continue;
      }
      EXPECT_EQ(pv.link, LinkView::kUp) << cv.name << " port " << p + 1;
      EXPECT_EQ(v->chips[pv.peer].name, topo.name(peer->node));
      EXPECT_EQ(pv.peer_port, peer->port);
    }
  }
  // A CA by the LID it holds ("lid:N": a bare number is a chip id, as everywhere in the API).
  const uint32_t host = topo.nic_node(5);
  EXPECT_EQ(chip(fmt::format("lid:{}", model->lid(host, 1))), chip(topo.name(host)));
  EXPECT_EQ(chip("3"), 3u);
  // The JSON numbers ports as IBA does.
  nlohmann::json j = chip_json(*v, chip(topo.name(host)), true);
  EXPECT_EQ(j["ports"][0]["port"], 1);
  EXPECT_EQ(j["ports"][0]["link"], "up");
}

TEST_F(IbFabricTest, RoutesAndTraceAreWhatTheSwitchesHold) {
  ASSERT_TRUE(fabric->sweep("minhop").ok());
  const uint32_t leaf = topo.peer({topo.nic_node(0), 0})->node;
  auto routes = fabric->chip_routes(topo.name(leaf));
  ASSERT_TRUE(routes.ok()) << routes.error().to_string();
  EXPECT_EQ((*routes)["engine"], "minhop");
  EXPECT_EQ((*routes)["lid"], model->lid(leaf, 0));
  uint32_t lids = 0;
  for (const auto& range : (*routes)["ranges"])
    for (uint32_t lid = range["first_lid"]; lid <= range["last_lid"]; ++lid, ++lids)
      EXPECT_EQ(model->lft(leaf, static_cast<uint16_t>(lid)), range["port"].get<int>())
          << "LID " << lid;
  EXPECT_EQ(lids, topo.num_nodes());  // one LID per switch and per CA
  EXPECT_FALSE(fabric->chip_routes(topo.name(topo.nic_node(0))).ok());  // a CA has no table

  const uint32_t src = topo.nic_node(0), dst = topo.nic_node(7);
  auto tr = fabric->trace(topo.name(src), std::to_string(model->lid(dst, 1)));
  ASSERT_TRUE(tr.ok()) << tr.error().to_string();
  EXPECT_EQ((*tr)["fabric"], "ib");
  EXPECT_EQ((*tr)["reachable"], true);
  EXPECT_EQ((*tr)["dlid"], model->lid(dst, 1));
  ASSERT_EQ((*tr)["hops"].size(), 3u);  // leaf, spine, leaf
  EXPECT_EQ((*tr)["hops"][0]["description"], topo.name(leaf));
  // The console's fields: each hop's chip id and chosen port.
  EXPECT_EQ((*tr)["hops"][0]["chip"], chip(topo.name(leaf)));
  EXPECT_EQ((*tr)["hops"][0]["chosen"], (*tr)["hops"][0]["out_port"]);
  EXPECT_EQ((*tr)["hops"][2]["out_port"], topo.peer({dst, 0})->port + 1);
  auto bad = fabric->trace(topo.name(src), "no such node");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("no such node"), std::string::npos);
}

TEST_F(IbFabricTest, ACounterThatRisesBetweenScansIsAFault) {
  ASSERT_TRUE(fabric->sweep("fattree").ok());
  auto first = fabric->scan();
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ((*first)["ports_read"], 2 * topo.num_links());
  EXPECT_EQ((*first)["ports_failed"], 0);
  EXPECT_EQ((*first)["ports_errors_rose"], 0);

  const uint32_t host = topo.nic_node(3);
  auto before = fabric->chip_status(topo.name(host));
  ASSERT_TRUE(before.ok()) << before.error().to_string();
  EXPECT_EQ((*before)["first_read"], true);

  model->counters(host, 1).rcv_errors = 7;
  model->counters(host, 1).xmit_data = 1000;
  auto second = fabric->scan();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)["ports_errors_rose"], 1);
  EXPECT_EQ((*second)["ports_with_errors"], 1);
  auto faults = of_cause("port_errors");
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].chip, chip(topo.name(host)));
  EXPECT_EQ(faults[0].port, 1);
  EXPECT_EQ(faults[0].location, topo.name(host) + " port 1");
  EXPECT_NE(faults[0].detail.find("\"rose_by\":7"), std::string::npos) << faults[0].detail;

  auto v = fabric->view();
  const uint32_t c = chip(topo.name(host));
  EXPECT_TRUE(v->port(c, 0).scanned);
  EXPECT_EQ(v->ib_counters[v->chips[c].first_port].rcv_errors, 7);
  EXPECT_GT(v->port(c, 0).crc_errors_per_s, 0);

  auto after = fabric->chip_status(fmt::format("lid:{}", model->lid(host, 1)));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["first_read"], false);
  bool seen = false;
  for (const auto& ch : (*after)["changes"])
    if (ch["counter"] == "PortRcvErrors") {
      EXPECT_EQ(ch["delta"], 7);
      seen = true;
    }
  EXPECT_TRUE(seen) << after->dump();
}

TEST_F(IbFabricTest, ACablePulledBetweenSweepsIsAnAlarmAndStaysInTheView) {
  ASSERT_TRUE(fabric->sweep("fattree").ok());
  const uint32_t leaf = topo.peer({topo.nic_node(0), 0})->node;
  // The leaf's first up-link: ports 0-1 lead to hosts (IB 1-2), 2-3 up (IB 3-4).
  auto spine = topo.peer({leaf, 2});
  ASSERT_TRUE(spine && !topo.is_nic(spine->node));
  EXPECT_FALSE(fabric->heavy_sweep_due());  // a light sweep finds nothing changed
  model->unplug(leaf, 3);
  EXPECT_TRUE(fabric->heavy_sweep_due());  // the leaf's PortStateChange
  auto r = fabric->sweep("fattree");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ((*r)["changed"], true);
  EXPECT_EQ((*r)["subnet_up"], true);
  EXPECT_EQ((*r)["links"], topo.num_links() - 1);
  auto alarms = of_cause("link_down");
  ASSERT_EQ(alarms.size(), 1u);
  EXPECT_EQ(alarms[0].kind, EventKind::kAlarm);
  EXPECT_EQ(alarms[0].severity, EventSeverity::kCritical);
  EXPECT_EQ(alarms[0].chip, chip(topo.name(leaf)));
  EXPECT_EQ(alarms[0].port, 3);

  auto v = fabric->view();
  EXPECT_EQ(v->links(), topo.num_links());  // the link is kept, down
  EXPECT_EQ(v->links_down(), 1u);
  const PortView& pv = v->port(chip(topo.name(leaf)), 2);
  EXPECT_EQ(pv.link, LinkView::kDown);
  EXPECT_EQ(v->chips[pv.peer].name, topo.name(spine->node));

  // A third sweep changes nothing more; no second alarm.
  auto again = fabric->sweep("fattree");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)["changed"], false);
  EXPECT_EQ(of_cause("link_down").size(), 1u);
}

TEST_F(IbFabricTest, NoneChecksTheTablesWithoutWritingAny) {
  ASSERT_TRUE(fabric->sweep("minhop").ok());
  const uint64_t sets_before = model->sets, smps_before = model->sent_smps;
  auto r = fabric->sweep("none");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ((*r)["unreachable_routes"], 0);
  EXPECT_EQ(fabric->routes_summary()["engine"], "none");
  EXPECT_GT(model->sent_smps, smps_before);  // it read the subnet
  EXPECT_EQ(model->sets, sets_before);       // and wrote nothing
  EXPECT_EQ(of_cause("subnet checked").size(), 1u);
}

TEST_F(IbFabricTest, BesideAMasterSmTheDaemonIsStandbyAndWritesNothing) {
  wire::SmInfo master;
  master.guid = 0x77;
  master.sm_key = 1;
  master.priority = 3;
  master.sm_state = static_cast<uint8_t>(wire::SmState::kMaster);
  model->run_sm(topo.nic_node(6), master);
  auto r = fabric->sweep("fattree");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ((*r)["role"], "standby");
  EXPECT_EQ((*r)["master"]["guid"], "0x0000000000000077");
  EXPECT_EQ(fabric->routes_summary()["role"], "standby");
  EXPECT_EQ(model->sets, 0u);
  ASSERT_EQ(of_cause("standby").size(), 1u);
  EXPECT_EQ(of_cause("subnet up").size(), 0u);
  EXPECT_EQ(fabric->view()->chips.size(), topo.num_nodes());  // the subnet is still shown
}

// The daemon's SM options reach the SM (galaxy nmd --fabric ib: --mkey, --mkey-level,
// --mkey-lease-s, --sm-priority, --sm-key, all in one IbSmOptions): the key placed in every
// port at those protect bits and lease.
TEST(IbFabricOptions, TheDaemonsKeyAndPriorityReachTheSm) {
  auto topo = fabric::build_topology("fattree:k=4,levels=2").value();
  auto port = std::make_unique<test::ModelSubnet>(topo, topo.nic_node(0));
  test::ModelSubnet* model = port.get();
  nm::IbSmOptions o;
  o.priority = 7;
  o.sm_key = 0x5151;
  o.m_key = 0xABCDEF0123;
  o.m_key_protect = 1;
  o.m_key_lease_s = 30;
  IbFabric f(
      std::move(port), [](Event) {}, o);
  auto r = f.sweep("minhop");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ((*r)["subnet_up"], true);
  uint32_t sw = 0;
  while (topo.is_nic(sw)) ++sw;
  const wire::PortInfo& pi = model->port_info(sw, 0);
  EXPECT_EQ(pi.m_key(), 0xABCDEF0123u);
  EXPECT_EQ(pi.m_key_protect_bits(), 1);
  EXPECT_EQ(pi.m_key_lease_period(), 30);
}

}  // namespace
}  // namespace galaxy::nmd
