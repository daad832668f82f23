// Galaxy's subnet manager (nm/ib_sm.h) on subnets modelled in-process (ib_model_subnet.h): a
// sweep brings every port ACTIVE, gives every port a unique LID, and leaves tables in the
// switches along which every CA reaches every other CA; a second sweep keeps the LIDs; a cable
// pulled between sweeps is routed around; the audit reads back what the sweep wrote. The
// switches' tables are judged as the model holds them (written through the SMPs), not as the
// SM computed them.
#include <gtest/gtest.h>

#include <set>

#include "fabric/builders.h"
#include "ib_model_subnet.h"
#include "nm/ib_sm.h"

namespace galaxy::nm {
namespace {

IbSmOptions options(const std::string& engine) {
  IbSmOptions o;
  o.routing = engine;
  return o;
}

struct Modelled {
  fabric::Topology topo;
  std::unique_ptr<test::ModelSubnet> model;
  explicit Modelled(const std::string& spec) {
    auto t = fabric::build_topology(spec);
    EXPECT_TRUE(t.ok()) << t.error().to_string();
    topo = std::move(*t);
    model = std::make_unique<test::ModelSubnet>(topo, topo.nic_node(0));
  }
  // Every CA port reaches every other CA port's LID through the switches' tables.
  uint64_t undelivered() const {
    uint64_t bad = 0;
    for (uint32_t a = 0; a < topo.num_nics(); ++a)
      for (uint32_t b = 0; b < topo.num_nics(); ++b) {
        if (a == b) continue;
        const uint32_t x = topo.nic_node(a), y = topo.nic_node(b);
        if (!topo.peer({x, 0}) || !topo.peer({y, 0})) continue;
        auto got = model->deliver(x, 1, model->lid(y, 1));
        if (!got || got->first != y) ++bad;
      }
    return bad;
  }
};

TEST(IbSmOnAModel, SweepBringsTheSubnetUp) {
  for (const char* engine : {"minhop", "updown", "fattree"}) {
    SCOPED_TRACE(engine);
    Modelled m("fattree:k=4,levels=3");
    IbSubnetManager sm(*m.model, options(engine));
    auto r = sm.sweep();
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_TRUE(r->subnet_up);
    EXPECT_EQ(r->switches, m.topo.num_nrcs());
    EXPECT_EQ(r->ca_ports, m.topo.num_nics());
    EXPECT_EQ(r->links, m.topo.num_links());
    EXPECT_EQ(r->ports_not_active, 0u);
    EXPECT_EQ(r->unreachable, 0u);
    EXPECT_TRUE(r->fallback_from.empty()) << r->fallback_reason;
    // Every linked port ACTIVE, every LID unique and held as assigned.
    std::set<uint16_t> lids;
    for (uint32_t n = 0; n < m.topo.num_nodes(); ++n) {
      for (uint8_t p = 0; p < m.topo.num_ports(n); ++p) {
        if (m.topo.peer({n, p})) {
          EXPECT_EQ(m.model->port_state(n, p + 1), uint8_t(wire::IbPortState::kActive));
        }
      }
      const uint16_t lid = m.model->lid(n, 1);
      EXPECT_NE(lid, 0u);
      EXPECT_TRUE(lids.insert(lid).second) << "LID " << lid << " twice";
      if (!m.topo.is_nic(n)) {
        EXPECT_GE(m.model->linear_fdb_top(n), r->lids.max_lid);
      }
    }
    EXPECT_EQ(m.undelivered(), 0u);
  }
}

TEST(IbSmOnAModel, ASecondSweepKeepsTheLidsAndAPulledCableIsRoutedAround) {
  Modelled m("fattree:k=4,levels=2");
  IbSubnetManager sm(*m.model, options("fattree"));
  auto first = sm.sweep();
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->subnet_up);
  std::vector<uint16_t> lids;
  for (uint32_t n = 0; n < m.topo.num_nodes(); ++n) lids.push_back(m.model->lid(n, 1));

  // A leaf's first up-link (topology port 2 on a k=4 leaf: ports 0-1 down to hosts).
  uint32_t leaf = fabric::kNoNode;
  for (uint32_t n = 0; n < m.topo.num_nodes() && leaf == fabric::kNoNode; ++n)
    if (!m.topo.is_nic(n) && m.topo.level(n) == 1) leaf = n;
  ASSERT_NE(leaf, fabric::kNoNode);
  auto up = m.topo.peer({leaf, 2});
  ASSERT_TRUE(up && !m.topo.is_nic(up->node));
  auto quiet = sm.light_sweep();
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(*quiet);  // nothing changed: no heavy sweep due
  m.model->unplug(leaf, 3);
  auto due = sm.light_sweep();
  ASSERT_TRUE(due.ok());
  EXPECT_TRUE(*due);  // the leaf's PortStateChange

  auto second = sm.sweep();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_TRUE(second->subnet_up);
  EXPECT_EQ(second->links, m.topo.num_links() - 1);
  EXPECT_EQ(second->lids.assigned, 0u);
  for (uint32_t n = 0; n < m.topo.num_nodes(); ++n) EXPECT_EQ(m.model->lid(n, 1), lids[n]);
  EXPECT_EQ(m.undelivered(), 0u);
  auto after = sm.light_sweep();  // the heavy sweep cleared PortStateChange
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
  // No route leaves by the pulled cable.
  for (uint32_t b = 0; b < m.topo.num_nics(); ++b)
    EXPECT_NE(m.model->lft(leaf, m.model->lid(m.topo.nic_node(b), 1)), 3);
}

TEST(IbSmOnAModel, TheAuditReadsBackWhatTheSweepWrote) {
  Modelled m("fattree:k=4,levels=2");
  IbSubnetManager sm(*m.model, options("minhop"));
  auto r = sm.sweep();
  ASSERT_TRUE(r.ok());
  const IbRoutes written = sm.routes();
  IbSubnetManager auditor(*m.model, {});
  auto a = auditor.audit();
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->unreachable, 0u);
  ASSERT_EQ(auditor.routes().lft.size(), written.lft.size());
  for (uint32_t n = 0; n < written.lft.size(); ++n)
    for (uint32_t lid = 1; lid < written.lft[n].size(); ++lid)
      EXPECT_EQ(auditor.routes().lft[n][lid], written.lft[n][lid])
          << "node " << n << " LID " << lid;
  // A CA whose cable is pulled is no longer found.
  m.model->unplug(m.topo.nic_node(1), 1);
  auto b = auditor.audit();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ca_ports, m.topo.num_nics() - 1);
}

// IBA 14.4.1 on a subnet with another SM (SMInfo at an IsSM port): a master makes this SM a
// standby that writes nothing; so does a discovering SM that outranks it; a standby that
// outranks it is handed the subnet (SMInfo Set HANDOVER) and this SM stands by; a standby or
// discovering SM it outranks, one that does not answer or one of another SM_Key (ignored, as
// OpenSM ignores it) leave it master.
TEST(IbSmOnAModel, AnotherSmDecidesTheRole) {
  struct Case {
    const char* name;
    std::optional<wire::SmInfo> other;
    bool standby;
  };
  auto info = [](wire::SmState state, uint8_t priority, uint64_t guid) {
    wire::SmInfo i;
    i.guid = guid;
    i.priority = priority;
    i.sm_state = static_cast<uint8_t>(state);
    i.act_count = 7;
    i.sm_key = 1;  // the subnet's key, OpenSM's default and ours
    return std::optional<wire::SmInfo>(i);
  };
  auto keyed = [](std::optional<wire::SmInfo> i, uint64_t key) {
    i->sm_key = key;
    return i;
  };
  using S = wire::SmState;
  // The SM under test has priority 5; its port GUID is the model's SM node GUID + 1.
  const std::vector<Case> cases{
      {"master of lower priority", info(S::kMaster, 1, 0x10), true},
      {"discovering, higher priority", info(S::kDiscovering, 9, ~0ull), true},
      {"discovering, same priority, lower GUID", info(S::kDiscovering, 5, 0x1), true},
      {"discovering, same priority, higher GUID", info(S::kDiscovering, 5, ~0ull), false},
      {"discovering, lower priority", info(S::kDiscovering, 2, 0x1), false},
      {"standby it outranks", info(S::kStandby, 2, 0x1), false},
      {"standby that outranks it: handed over", info(S::kStandby, 9, ~0ull), true},
      {"not answering", std::nullopt, false},
      {"master of another SM_Key", keyed(info(S::kMaster, 15, 0x1), 7), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Modelled m("fattree:k=4,levels=2");
    const uint32_t other = m.topo.nic_node(6);
    m.model->run_sm(other, c.other);
    IbSmOptions o = options("minhop");
    o.priority = 5;
    IbSubnetManager sm(*m.model, o);
    auto r = sm.sweep();
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->sms.size(), 1u);
    EXPECT_EQ(r->sms[0].answered, c.other.has_value());
    EXPECT_EQ(r->role, c.standby ? "standby" : "master");
    if (c.standby) {
      ASSERT_TRUE(r->master.has_value());
      EXPECT_EQ(r->master->info.guid, c.other->guid);
      // A standby writes nothing; a handover is one SMInfo Set (IBA 14.4.1).
      const bool handover = c.other->sm_state == static_cast<uint8_t>(S::kStandby);
      EXPECT_EQ(m.model->sets, handover ? 1u : 0u);
      EXPECT_EQ(r->handed_over_to, handover ? c.other->guid : 0u);
      EXPECT_FALSE(r->subnet_up);
      auto polled = sm.poll(*r->master);
      ASSERT_TRUE(polled.ok()) << polled.error().to_string();
      EXPECT_EQ(polled->sm_state, c.other->sm_state);
      m.model->run_sm(other, std::nullopt);  // the master's process is gone
      EXPECT_FALSE(sm.poll(*r->master).ok());
    } else {
      EXPECT_TRUE(r->subnet_up);
      EXPECT_EQ(m.undelivered(), 0u);
    }
  }
}

// Another SM's requests to this one: SMInfo Get answered with its GUID, key, priority and state;
// a HANDOVER without the subnet's SM_Key refused and counted; DISABLE and STANDBY move a standby
// to NOT ACTIVE and back; a HANDOVER with the key makes the standby master, and its next sweep
// programs the subnet and acknowledges to the old master.
TEST(IbSmOnAModel, AnswersSmInfoAndTakesAHandoverOnlyWithTheKey) {
  Modelled m("fattree:k=4,levels=2");
  const uint32_t other = m.topo.nic_node(6);
  wire::SmInfo master;
  master.guid = 0x42;
  master.sm_key = 1;
  master.priority = 3;
  master.sm_state = static_cast<uint8_t>(wire::SmState::kMaster);
  m.model->run_sm(other, master);
  IbSmOptions o = options("minhop");
  o.priority = 7;
  IbSubnetManager sm(*m.model, o);
  ASSERT_TRUE(sm.serve_sm_info().ok());
  auto first = sm.sweep();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->role, "standby");

  auto ask = [&](wire::MadMethod method, wire::SmControl control, uint64_t key) {
    wire::Smp req;
    req.method = method;
    req.attribute_id = static_cast<uint16_t>(wire::SmpAttr::kSmInfo);
    req.attribute_modifier = method == wire::MadMethod::kSet ? static_cast<uint32_t>(control) : 0;
    wire::SmInfo from = master;
    from.sm_key = key;
    req.data = wire::encode_sm_info(from);
    auto a = m.model->ask_sm(req);
    EXPECT_TRUE(a.has_value());
    return a.value_or(wire::Smp{});
  };
  const wire::Smp got = ask(wire::MadMethod::kGet, wire::SmControl::kHandover, 0);
  EXPECT_EQ(got.status, 0);
  const wire::SmInfo mine = wire::decode_sm_info(got.data);
  EXPECT_EQ(mine.guid, m.model->local().port_guid);
  EXPECT_EQ(mine.sm_key, 1u);
  EXPECT_EQ(mine.priority, 7);
  EXPECT_EQ(mine.sm_state, static_cast<uint8_t>(wire::SmState::kStandby));
  // A PortInfo request is the SMA's, not the SM's: left alone.
  wire::Smp pi;
  pi.attribute_id = static_cast<uint16_t>(wire::SmpAttr::kPortInfo);
  EXPECT_FALSE(m.model->ask_sm(pi).has_value());

  EXPECT_EQ(ask(wire::MadMethod::kSet, wire::SmControl::kHandover, 9).status, 0x1C);
  EXPECT_EQ(sm.refused_sm_info_sets(), 1u);
  EXPECT_FALSE(sm.handover_received());
  // IBA 14.4.1's transitions: a standby is disabled (NOT ACTIVE, as SMInfo then says), takes
  // no handover then, stands by again on STANDBY; a control that is no transition of the state
  // is refused with 0x1C, as OpenSM refuses it.
  EXPECT_EQ(ask(wire::MadMethod::kSet, wire::SmControl::kStandby, 1).status, 0x1C);
  EXPECT_EQ(ask(wire::MadMethod::kSet, wire::SmControl::kDisable, 1).status, 0);
  EXPECT_EQ(sm.state(), wire::SmState::kNotActive);
  EXPECT_EQ(wire::decode_sm_info(ask(wire::MadMethod::kGet, {}, 0).data).sm_state,
            static_cast<uint8_t>(wire::SmState::kNotActive));
  EXPECT_EQ(ask(wire::MadMethod::kSet, wire::SmControl::kHandover, 1).status, 0x1C);
  EXPECT_EQ(ask(wire::MadMethod::kSet, wire::SmControl::kStandby, 1).status, 0);
  EXPECT_EQ(sm.state(), wire::SmState::kStandby);
  EXPECT_EQ(ask(wire::MadMethod::kSet, wire::SmControl::kHandover, 1).status, 0);
  EXPECT_TRUE(sm.handover_received());

  const uint64_t sets_before = m.model->sets;
  auto second = sm.sweep();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(second->role, "master");
  EXPECT_EQ(second->handed_over_by, 0x42u);
  EXPECT_TRUE(second->subnet_up);
  EXPECT_TRUE(second->problems.empty()) << second->problems.front();
  EXPECT_GT(m.model->sets, sets_before + 1);  // the ACKNOWLEDGE and the subnet's programming
  EXPECT_EQ(m.undelivered(), 0u);
  EXPECT_FALSE(sm.handover_received());

  // A Notice trap (a port's state changed): answered with TrapRepress, and the next light sweep
  // says a heavy sweep is due although no switch flags a change.
  auto quiet = sm.light_sweep();
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(*quiet);
  wire::Smp trap;
  trap.directed = false;
  trap.method = wire::MadMethod::kTrap;
  trap.attribute_id = static_cast<uint16_t>(wire::SmpAttr::kNotice);
  trap.data[0] = 0x81;  // a generic notice
  auto repress = m.model->ask_sm(trap);
  ASSERT_TRUE(repress.has_value());
  EXPECT_EQ(repress->method, wire::MadMethod::kTrapRepress);
  EXPECT_EQ(repress->data, trap.data);
  EXPECT_EQ(sm.traps_received(), 1u);
  auto due = sm.light_sweep();
  ASSERT_TRUE(due.ok());
  EXPECT_TRUE(*due);
}

// DISCOVER makes a standby sweep at once (discovering), and the sweep finds the master again.
TEST(IbSmOnAModel, DiscoverMakesAStandbySweep) {
  Modelled m("fattree:k=4,levels=2");
  wire::SmInfo master;
  master.guid = 0x42;
  master.sm_key = 1;
  master.priority = 3;
  master.sm_state = static_cast<uint8_t>(wire::SmState::kMaster);
  m.model->run_sm(m.topo.nic_node(6), master);
  IbSubnetManager sm(*m.model, options("minhop"));
  ASSERT_TRUE(sm.serve_sm_info().ok());
  ASSERT_EQ(sm.sweep()->role, "standby");
  wire::Smp req;
  req.method = wire::MadMethod::kSet;
  req.attribute_id = static_cast<uint16_t>(wire::SmpAttr::kSmInfo);
  req.attribute_modifier = static_cast<uint32_t>(wire::SmControl::kDiscover);
  req.data = wire::encode_sm_info(master);
  auto a = m.model->ask_sm(req);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->status, 0);
  EXPECT_EQ(sm.state(), wire::SmState::kDiscovering);
  auto again = sm.sweep();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->role, "standby");
  EXPECT_EQ(sm.state(), wire::SmState::kStandby);
}

}  // namespace
}  // namespace galaxy::nm
