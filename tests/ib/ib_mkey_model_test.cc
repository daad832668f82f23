// M_Keys on InfiniBand (IBA 14.2.4), judged by the modelled SMAs (ib_model_subnet.h; ibsim
// keeps no M_Key): the master places its key, protect bits and lease in every port and sweeps on
// with it; an SM without the key is refused (no answer, M_KeyViolations counted, trap 256 to the
// master, which forwards it to subscribers), and Gets read the key as 0 at protect bits 2; once
// the master has said nothing for a lease after the refusals, a successor takes the subnet over
// and places its own key.
#include <gtest/gtest.h>

#include <thread>

#include "fabric/builders.h"
#include "ib_model_subnet.h"
#include "nm/ib_sm.h"

namespace galaxy::nm {
namespace {

constexpr uint64_t kKey = 0x00C0FFEE12345678ull;

// A LID-routed SMP (class 0x01), as a tool at any port sends one.
wire::Smp lid_routed(wire::MadMethod method, const wire::SmpData& data) {
  wire::Smp smp;
  smp.directed = false;
  smp.method = method;
  smp.attribute_id = static_cast<uint16_t>(wire::SmpAttr::kPortInfo);
  smp.data = data;
  return smp;
}

struct Subnet {
  fabric::Topology topo;
  std::unique_ptr<test::ModelSubnet> model;
  Subnet() {
    topo = fabric::build_topology("fattree:k=4,levels=2").value();
    model = std::make_unique<test::ModelSubnet>(topo, topo.nic_node(0));
  }
  uint32_t a_switch() const {
    uint32_t sw = 0;
    while (topo.is_nic(sw)) ++sw;
    return sw;
  }
};

IbSmOptions keyed(uint64_t key, uint8_t protect, uint16_t lease_s) {
  IbSmOptions o;
  o.m_key = key;
  o.m_key_protect = protect;
  o.m_key_lease_s = lease_s;
  o.requests.retries = 0;
  return o;
}

TEST(IbMKeyOnAModel, MasterPlacesItsKeyAndSweepsOnWithIt) {
  Subnet s;
  IbSubnetManager sm(*s.model, keyed(kKey, 3, 60));
  auto r = sm.sweep();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_TRUE(r->subnet_up);
  for (uint32_t n = 0; n < s.topo.num_nodes(); ++n) {
    const wire::PortInfo& pi = s.model->port_info(n, s.topo.is_nic(n) ? 1 : 0);
    EXPECT_EQ(pi.m_key(), kKey) << s.topo.name(n);
    EXPECT_EQ(pi.m_key_protect_bits(), 3);
    EXPECT_EQ(pi.m_key_lease_period(), 60);
  }
  // Protect bits 3: every Get needs the key; the master's second sweep has it.
  auto again = sm.sweep();
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_TRUE(again->subnet_up);
  EXPECT_EQ(again->mkey_violations, 0u);
  EXPECT_EQ(s.model->bad_mkey_traps, 0u);
}

TEST(IbMKeyOnAModel, WrongKeySetIsRefusedAndCountedGetsHideTheKey) {
  Subnet s;
  IbSubnetManager sm(*s.model, keyed(kKey, 2, 60));
  ASSERT_TRUE(sm.serve_sm_info().ok());
  ASSERT_TRUE(sm.sweep().ok());
  const uint32_t sw = s.a_switch();
  const uint16_t lid = s.model->lid(sw, 0);
  ASSERT_EQ(s.model->port_info(sw, 0).m_key(), kKey);
  ASSERT_EQ(s.model->port_info(sw, 0).m_key_protect_bits(), 2);
  // A LID-routed Set of the switch's PortInfo with another key: never answered.
  wire::PortInfo pi = s.model->port_info(sw, 0).for_set();
  pi.set_lid(0x0777);
  wire::Smp set = lid_routed(wire::MadMethod::kSet, pi.raw);
  set.m_key = 0xBAD;
  set.transaction_id = 0x77;
  ASSERT_TRUE(s.model->send(set, lid).ok());
  auto c = s.model->receive(0);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->status.ok());
  EXPECT_EQ(s.model->lid(sw, 0), lid);  // nothing changed
  EXPECT_EQ(s.model->port_info(sw, 0).m_key_violations(), 1);
  EXPECT_EQ(s.model->bad_mkey_traps, 1u);
  // The master answered the trap and its SA counted it.
  EXPECT_EQ(sm.sa().stats().traps, 1u);
  // A Get without the key is answered, but shows no key.
  wire::Smp get = lid_routed(wire::MadMethod::kGet, {});
  get.transaction_id = 0x78;
  ASSERT_TRUE(s.model->send(get, lid).ok());
  c = s.model->receive(0);
  ASSERT_TRUE(c.ok() && c->status.ok());
  wire::PortInfo got;
  got.raw = c->smp.data;
  EXPECT_EQ(got.m_key(), 0u);
  EXPECT_EQ(got.m_key_violations(), 1);
  // The master's next sweep reads the violation.
  auto r = sm.sweep();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mkey_violations, 1u);
}

TEST(IbMKeyOnAModel, LeaseExpiryLetsASuccessorIn) {
  Subnet s;
  {
    IbSubnetManager master(*s.model, keyed(kKey, 3, 1));
    auto r = master.sweep();
    ASSERT_TRUE(r.ok() && r->subnet_up);
  }  // the master dies
  // A successor without the key: refused at once.
  IbSubnetManager successor(*s.model, keyed(0x5EC0, 3, 1));
  auto refused = successor.sweep();
  EXPECT_TRUE(!refused.ok() || !refused->subnet_up);
  EXPECT_GE(s.model->port_info(s.topo.nic_node(0), 1).m_key_violations(), 1);
  // Each lease after the refusals it reaches one port further, until the subnet is its.
  bool up = false;
  for (int round = 0; round < 10 && !up; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1050));
    auto r = successor.sweep();
    up = r.ok() && r->subnet_up && r->ports_not_active == 0;
  }
  ASSERT_TRUE(up) << "the successor never took the subnet over";
  for (uint32_t n = 0; n < s.topo.num_nodes(); ++n)
    EXPECT_EQ(s.model->port_info(n, s.topo.is_nic(n) ? 1 : 0).m_key(), 0x5EC0u) << s.topo.name(n);
}

}  // namespace
}  // namespace galaxy::nm
