// Counters scan of an InfiniBand subnet (nm/ib_scan.h) over scripted performance management
// agents: every linked switch port and every CA port with a LID is read once, LID-routed to its
// node; a port whose agent refuses, or that has no LID, is reported with the reason.
#include "nm/ib_scan.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>

#include "ib_test_subnet.h"
#include "nm/ib_routes.h"

namespace galaxy::nm {
namespace {

// PortCounters answered with PortRcvErrors = LID x 100 + the port asked for; LIDs in `refused`
// answer with a non-zero status.
class ScriptedPmas final : public ib::SmpPort {
 public:
  const ib::LocalPort& local() const override { return local_; }
  Status send(const wire::Smp&, uint16_t) override {
    return make_error(Code::kUnsupported, 1, "no SMPs here");
  }
  Status send_gmp(const wire::Mad& mad, uint16_t dlid) override {
    asked.insert({dlid, mad.data[wire::kPerfDataAt + 1]});
    pending_.push_back({mad, dlid});
    return {};
  }
  Result<ib::SmpCompletion> receive(int) override {
    if (pending_.empty()) return make_error(Code::kTimeout, 1, "nothing in flight");
    auto [m, dlid] = pending_.front();
    pending_.pop_front();
    ib::SmpCompletion c;
    c.tid = static_cast<uint32_t>(m.transaction_id);
    wire::PortCounters pc;
    pc.port_select = m.data[wire::kPerfDataAt + 1];
    pc.rcv_errors = static_cast<uint16_t>(dlid * 100 + pc.port_select);
    m.method = wire::MadMethod::kGetResp;
    m.status = refused.count(dlid) ? 0x0c : 0;
    wire::encode_port_counters(pc, m);
    c.gmp = m;
    return c;
  }
  std::set<uint16_t> refused;
  std::set<std::pair<uint16_t, uint8_t>> asked;

 private:
  ib::LocalPort local_;
  std::deque<std::pair<wire::Mad, uint16_t>> pending_;
};

TEST(IbScan, ReadsEveryLinkedPortFromItsNodesAgent) {
  Builder b = two_level();
  ASSERT_TRUE(assign_lids(b.net).ok());
  for (auto& node : b.net.nodes)
    for (auto& port : node.ports) port.info.set_lid(port.lid);
  const uint16_t leaf1 = b.net.nodes[3].ports[0].lid;
  ScriptedPmas pmas;
  pmas.refused = {leaf1};
  IbRequester rq(pmas, {});
  auto scan = scan_ib(rq, b.net);
  ASSERT_TRUE(scan.ok()) << scan.error().to_string();
  // Both ends of the 9 links (4 leaf-spine, 5 CA): 18 ports, each asked once.
  ASSERT_EQ(scan->ports.size(), 18u);
  EXPECT_EQ(pmas.asked.size(), 18u);
  EXPECT_EQ(scan->requests, 18u);
  uint64_t read = 0;
  for (const IbPortScan& p : scan->ports) {
    const bool on_leaf1 = p.port.node == 3;
    EXPECT_EQ(p.read, !on_leaf1);
    if (p.read) {
      EXPECT_EQ(p.counters.rcv_errors, p.lid * 100 + p.port.port);
      EXPECT_EQ(p.errors(), p.counters.rcv_errors);
      read += 1;
    } else {
      EXPECT_NE(p.error.find("status"), std::string::npos) << p.error;
    }
  }
  EXPECT_EQ(scan->read, read);
  EXPECT_EQ(scan->failed, 18u - read);
  EXPECT_EQ(scan->failed, 5u);  // leaf 1: two up-links, host2, host3, the dual CA
}

TEST(IbScan, APortWithoutALidIsNotAsked) {
  Builder b = two_level();
  ASSERT_TRUE(assign_lids(b.net).ok());  // assigned, not yet held: no SM has set them
  ScriptedPmas pmas;
  IbRequester rq(pmas, {});
  auto scan = scan_ib(rq, b.net);
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->read, 0u);
  EXPECT_EQ(scan->failed, scan->ports.size());
  EXPECT_TRUE(pmas.asked.empty());
  EXPECT_NE(scan->ports[0].error.find("no LID"), std::string::npos);
}

}  // namespace
}  // namespace galaxy::nm
