// Several management servers on one Galaxy fabric (nm/galaxy_sm.h), in both engines: SMInfo
// between their NICs, one master and the others standby, the master named by the chips, a
// handover to a standby that outranks the master, the named successor taking over when the
// master falls silent, the other standby following the new master, and Sets without the SM_Key
// refused. Each server is a requester on a NIC of its own; while one waits for an answer, the
// others answer what reached them (as their own threads would: a server that is not served
// is a dead one).
#include "nm/galaxy_sm.h"

#include <gtest/gtest.h>

#include "nm/cooperative_port.h"
#include "nm/discovery.h"
#include "nm/faults.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

struct Server {
  std::unique_ptr<glex_device> device;
  std::unique_ptr<GlexMgmtPort> port;
  std::unique_ptr<CooperativePort> group;
  std::unique_ptr<Requester> requester;
  std::unique_ptr<GalaxySm> sm;
  FabricMap map;
  bool alive = true;
};

class GalaxySmBackends : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    backend_ = testing::Backend::make(GetParam(), "fattree:k=4,levels=2");
    ASSERT_TRUE(backend_) << GetParam() << " did not come up";
  }

  // A server at NIC index `nic` with `priority`; it discovers the fabric.
  Server& add(uint32_t nic, uint8_t priority, uint64_t sm_key = 1) {
    auto s = std::make_unique<Server>();
    const fabric::Topology& plan = backend_->topology();
    if (nic == 0) {  // the backend's own server endpoint
      s->device = std::move(backend_->device);
      s->port = std::move(backend_->port);
    } else {
      s->device = backend_->open_nic(plan.nic_node(nic));
      EXPECT_TRUE(s->device);
      s->port = std::move(GlexMgmtPort::open(s->device.get()).value());
    }
    const bool live = backend_->live_fabric();
    s->group =
        std::make_unique<CooperativePort>(*s->port, live ? kMs : 2 * kUs, [this] { serve(); });
    s->requester = std::make_unique<Requester>(
        *s->group, RequesterOptions{64, 6, backend_->wait(200 * kUs), 1});
    GalaxySmOptions o;
    o.priority = priority;
    o.sm_key = sm_key;
    o.poll_retries = 2;
    o.poll_interval = backend_->wait(kMs);
    s->sm = std::make_unique<GalaxySm>(*s->requester, o);
    DiscoveryOptions d;
    d.pipelined = true;
    auto found = discover(*s->requester, d);
    EXPECT_TRUE(found.ok());
    if (found.ok()) s->map = found->map;
    servers_.push_back(std::move(s));
    return *servers_.back();
  }

  // Every live server answers what reached it.
  void serve() {
    for (auto& s : servers_)
      if (s->alive) s->requester->poll();
  }

  // A master's work: the chips report to it (and so name it), then it is master.
  void take_fabric(Server& s) {
    auto setup = enable_fault_reporting(*s.requester, s.map);
    ASSERT_TRUE(setup.ok());
    EXPECT_EQ(setup->failed, 0u);
    s.sm->became_master();
  }

  unsigned masters() const {
    unsigned n = 0;
    for (const auto& s : servers_) n += s->alive && s->sm->state() == wire::SmState::kMaster;
    return n;
  }

  std::unique_ptr<testing::Backend> backend_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_P(GalaxySmBackends, OneMasterHandoverFailoverAndTheSmKey) {
  const uint32_t nics = backend_->topology().num_nics();
  Server& a = add(0, 0);
  Server& b = add(nics - 1, 5);
  Server& c = add(nics / 2, 1);

  // A fresh fabric names no master: the first server to elect is master once it wrote the
  // chips; the others find it through them and stand by.
  auto ra = a.sm->elect(a.map);
  ASSERT_TRUE(ra.ok()) << ra.error().to_string();
  EXPECT_EQ(*ra, wire::SmState::kDiscovering);
  take_fabric(a);
  EXPECT_EQ(a.sm->state(), wire::SmState::kMaster);
  for (Server* s : {&b, &c}) {
    auto r = s->sm->elect(s->map);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(*r, wire::SmState::kStandby);
    ASSERT_TRUE(s->sm->master());
    EXPECT_EQ(s->sm->master()->info.guid, a.sm->guid());
  }
  EXPECT_EQ(masters(), 1u);

  // The standbys poll; the master knows them and names the highest-ranked (b) its successor.
  for (Server* s : {&b, &c}) {
    auto p = s->sm->poll(s->map);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, SmPollOutcome::kMasterAnswered);
  }
  ASSERT_EQ(a.sm->standbys().size(), 2u);
  EXPECT_EQ(a.sm->standbys().front().info.guid, b.sm->guid());
  auto pc = c.sm->poll(c.map);
  ASSERT_TRUE(pc.ok());
  ASSERT_TRUE(c.sm->successor());
  EXPECT_EQ(c.sm->successor()->chip, b.port->server_chip_id());

  // b outranks the master: the master hands over (IBA 14.4.1), b does a master's work and
  // acknowledges; the chips name b; at no step two masters.
  auto check = a.sm->check(a.map);
  ASSERT_TRUE(check.ok()) << check.error().to_string();
  EXPECT_EQ(*check, SmCheckOutcome::kHandedOver);
  EXPECT_EQ(a.sm->state(), wire::SmState::kStandby);
  EXPECT_TRUE(b.sm->handover_received());
  EXPECT_EQ(b.sm->counters().handovers_received, 1u);
  b.alive = false;  // not yet serving as master: the count below must not see two
  EXPECT_LE(masters(), 1u);
  b.alive = true;
  take_fabric(b);
  EXPECT_TRUE(b.sm->acknowledge_handover().ok());
  EXPECT_FALSE(b.sm->handover_received());
  EXPECT_EQ(masters(), 1u);
  auto kb = b.sm->check(b.map);
  ASSERT_TRUE(kb.ok());
  EXPECT_EQ(*kb, SmCheckOutcome::kMaster);

  // c still polls a, which no longer says master; the chips name b, which answers: c follows.
  auto pc2 = c.sm->poll(c.map);
  ASSERT_TRUE(pc2.ok());
  EXPECT_EQ(*pc2, SmPollOutcome::kNewMaster);
  EXPECT_EQ(c.sm->master()->info.guid, b.sm->guid());
  for (Server* s : {&a, &c}) {
    auto p = s->sm->poll(s->map);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, SmPollOutcome::kMasterAnswered) << s->sm->guid();
  }
  // b names c (priority 1 over a's 0) its successor.
  auto pa = a.sm->poll(a.map);
  ASSERT_TRUE(pa.ok());
  ASSERT_TRUE(a.sm->successor());
  EXPECT_EQ(a.sm->successor()->chip, c.port->server_chip_id());

  // A server of another SM_Key cannot make b stand down: its Set is refused and counted.
  Server& d = add(1, 15, 99);
  auto rd = d.sm->elect(d.map);
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ(*rd, wire::SmState::kDiscovering) << "b's answer without the key does not count";
  const uint64_t refused = b.sm->counters().refused_sets;
  const uint32_t bn = d.map.node_of.at(b.port->server_chip_id());
  MgmtRequest set = MgmtRequest::sm_info(wire::NmpType::kSmInfoSet, b.port->server_chip_id(),
                                         b.port->server_vp(), d.map.target[bn].forward,
                                         d.map.target[bn].backward, 99, d.sm->sm_info());
  set.data.sm.control = static_cast<uint8_t>(wire::SmControl::kDisable);
  MgmtReply r = call(*d.requester, set);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.response.nmp_type, wire::NmpType::kSmInfoResponse);
  EXPECT_EQ(r.response.m_key, 0u) << "the SM_Key is shown only to one that showed it";
  EXPECT_EQ(r.response.data.sm.state, static_cast<uint8_t>(wire::SmState::kMaster));
  EXPECT_EQ(b.sm->counters().refused_sets, refused + 1);
  EXPECT_EQ(b.sm->state(), wire::SmState::kMaster);
  d.alive = false;

  // The master falls silent. Its successor c takes over after poll_retries missed polls; a waits
  // longer and then finds c through the chips. One master at every step.
  b.alive = false;
  bool c_took = false;
  for (int round = 0; round < 6 && !c_took; ++round) {
    auto p = c.sm->poll(c.map);
    ASSERT_TRUE(p.ok());
    EXPECT_LE(masters(), 1u);
    if (*p == SmPollOutcome::kTakeOver) {
      take_fabric(c);
      c_took = true;
    }
    auto q = a.sm->poll(a.map);
    ASSERT_TRUE(q.ok());
    EXPECT_NE(*q, SmPollOutcome::kTakeOver) << "a is not the named successor";
  }
  ASSERT_TRUE(c_took);
  EXPECT_EQ(c.sm->counters().takeovers, 1u);
  EXPECT_EQ(masters(), 1u);
  auto qa = a.sm->poll(a.map);
  ASSERT_TRUE(qa.ok());
  EXPECT_TRUE(*qa == SmPollOutcome::kNewMaster || *qa == SmPollOutcome::kMasterAnswered);
  EXPECT_EQ(a.sm->master()->info.guid, c.sm->guid());
  EXPECT_EQ(a.sm->state(), wire::SmState::kStandby);
}

// Galaxy's SM and the InfiniBand SM apply one set of rules (nm/sm_election.h).
TEST(SmElection, RulesOfIba1441) {
  using wire::SmState;
  const SmPeerView seen[] = {{10, 3, SmState::kStandby, true},
                             {11, 9, SmState::kDiscovering, true},
                             {12, 15, SmState::kStandby, false},
                             {13, 4, SmState::kStandby, true}};
  // Nothing is master: the discovering SM that outranks this one (priority 9 > 5).
  EXPECT_EQ(sm_defer_to(seen, 5, 50), std::optional<size_t>(1));
  EXPECT_FALSE(sm_defer_to(seen, 9, 5)) << "same priority, lower GUID: this one";
  // The highest-ranked standby that counts (12 has another key).
  EXPECT_EQ(sm_outranking_standby(seen, 2, 50), std::optional<size_t>(3));
  EXPECT_FALSE(sm_outranking_standby(seen, 4, 1));
  EXPECT_EQ(sm_control_transition(SmState::kStandby, wire::SmControl::kHandover), SmState::kMaster);
  EXPECT_FALSE(sm_control_transition(SmState::kMaster, wire::SmControl::kHandover));
  EXPECT_EQ(sm_control_transition(SmState::kNotActive, wire::SmControl::kDiscover),
            SmState::kDiscovering);
  EXPECT_EQ(sm_control_transition(SmState::kMaster, wire::SmControl::kAcknowledge),
            SmState::kMaster);
  EXPECT_NE(default_sm_guid(3, 9), default_sm_guid(9, 3));
}

GALAXY_OVER_BACKENDS(GalaxySmBackends);

}  // namespace
}  // namespace galaxy::nm
