// Path trace on an InfiniBand subnet (nm/ib_trace.h) over SMAs scripted from a hand-built subnet
// and its forwarding tables: a route is followed to its destination, and a route that would be
// lost (no entry, a port not ACTIVE, a loop, a table that sends it to the wrong port) stops at
// the hop where it is lost, with the reason. Ports are named as infiniband-diags users name them.
#include "nm/ib_trace.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "ib_test_subnet.h"
#include "nm/ib_routes.h"

namespace galaxy::nm {
namespace {

// Answers directed-route Gets as the subnet's SMAs would: the SMP walks the initial path from
// the SM's node across the subnet's cables; LinearForwardingTable blocks come from `lft`,
// PortInfo says ACTIVE unless the port is in `down`.
class SubnetSmas final : public ib::SmpPort {
 public:
  SubnetSmas(const IbSubnet& net, std::vector<std::vector<uint8_t>>& lft) : net_(net), lft_(lft) {}
  const ib::LocalPort& local() const override { return local_; }
  Status send(const wire::Smp& smp, uint16_t) override {
    pending_.push_back(smp);
    return {};
  }
  Result<ib::SmpCompletion> receive(int) override {
    if (pending_.empty()) return make_error(Code::kTimeout, 1, "nothing in flight");
    wire::Smp r = pending_.front();
    pending_.pop_front();
    ib::SmpCompletion c;
    c.tid = static_cast<uint32_t>(r.transaction_id);
    r.method = wire::MadMethod::kGetResp;
    r.data = {};
    uint32_t n = net_.sm_node;
    for (unsigned h = 1; h <= r.hop_count; ++h) {
      const IbNode& node = net_.nodes[n];
      const uint8_t out = r.initial_path[h];
      if (out >= node.ports.size() || !node.ports[out].linked()) {
        r.status = 0x1c;
        c.smp = r;
        return c;
      }
      n = node.ports[out].peer_node;
    }
    const IbNode& node = net_.nodes[n];
    const uint32_t m = r.attribute_modifier;
    if (r.attribute_id == static_cast<uint16_t>(wire::SmpAttr::kLinearForwardingTable)) {
      for (uint32_t k = 0; k < wire::kLftBlockLids; ++k) {
        const uint32_t lid = m * wire::kLftBlockLids + k;
        r.data[k] = lid < lft_[n].size() ? lft_[n][lid] : wire::kLftNoPort;
      }
    } else if (r.attribute_id == static_cast<uint16_t>(wire::SmpAttr::kPortInfo) &&
               m < node.ports.size()) {
      wire::PortInfo pi = node.ports[m].info;
      pi.set_port_state(down.count({n, m}) ? wire::IbPortState::kDown : wire::IbPortState::kActive);
      r.data = pi.raw;
    } else {
      r.status = 0x0c;
    }
    c.smp = r;
    return c;
  }
  std::set<std::pair<uint32_t, uint32_t>> down;

 private:
  const IbSubnet& net_;
  std::vector<std::vector<uint8_t>>& lft_;
  ib::LocalPort local_;
  std::deque<wire::Smp> pending_;
};

// two_level() (ib_test_subnet.h): spines 0-1, leaves 2-3, host0-3 = nodes 4-7 (host0/1 on leaf
// 0 ports 1/2, host2/3 on leaf 1), the dual-port CA 8 on leaf 1 port 5. LIDs as assigned, the
// ports holding them as an SM's Sets leave them, minimum-hop tables.
struct Routed {
  Builder b = two_level();
  IbRoutes routes;
  Routed() {
    b.set_paths();
    EXPECT_TRUE(assign_lids(b.net).ok());
    for (auto& node : b.net.nodes)
      for (auto& port : node.ports) port.info.set_lid(port.lid);
    auto r = route_ib(b.net, "minhop");
    EXPECT_TRUE(r.ok());
    routes = std::move(*r);
  }
  uint16_t lid(uint32_t node, uint8_t port) const { return b.net.nodes[node].ports[port].lid; }
};

TEST(IbTrace, FollowsTheTablesToTheDestination) {
  Routed s;
  SubnetSmas smas(s.b.net, s.routes.lft);
  IbRequester rq(smas, {});
  auto tr = trace_ib(rq, s.b.net, {4, 1}, {7, 1});  // host0 -> host3
  ASSERT_TRUE(tr.ok()) << tr.error().to_string();
  EXPECT_TRUE(tr->reachable) << tr->reason;
  EXPECT_EQ(tr->dlid, s.lid(7, 1));
  ASSERT_EQ(tr->hops.size(), 3u);  // leaf0, a spine, leaf1
  EXPECT_EQ(tr->hops[0].node, 2u);
  EXPECT_EQ(tr->hops[0].in_port, 1);
  EXPECT_TRUE(tr->hops[1].node == 0u || tr->hops[1].node == 1u);
  EXPECT_EQ(tr->hops[1].in_port, 1);  // every spine's port 1 goes to leaf 0
  EXPECT_EQ(tr->hops[2].node, 3u);
  EXPECT_EQ(tr->hops[2].out_port, 2);  // host3's cable
  EXPECT_EQ(tr->hops[2].out_state, static_cast<uint8_t>(wire::IbPortState::kActive));
  EXPECT_EQ(tr->requests, 6u);  // a forwarding table block and a PortInfo per switch

  // To a switch: its own LID ends at port 0. From a switch: the walk starts there.
  auto to_spine = trace_ib(rq, s.b.net, {5, 1}, {1, 0});
  ASSERT_TRUE(to_spine.ok());
  EXPECT_TRUE(to_spine->reachable) << to_spine->reason;
  EXPECT_EQ(to_spine->hops.back().out_port, 0);
  auto from_leaf = trace_ib(rq, s.b.net, {3, 0}, {8, 2});
  ASSERT_TRUE(from_leaf.ok());
  EXPECT_TRUE(from_leaf->reachable);
  ASSERT_EQ(from_leaf->hops.size(), 1u);
  EXPECT_EQ(from_leaf->hops[0].out_port, 5);
}

TEST(IbTrace, StopsWhereAPacketWouldBeLost) {
  Routed s;
  const uint16_t host3 = s.lid(7, 1);
  auto run = [&](std::vector<std::vector<uint8_t>> lft,
                 std::set<std::pair<uint32_t, uint32_t>> down = {}) {
    SubnetSmas smas(s.b.net, lft);
    smas.down = std::move(down);
    IbRequester rq(smas, {});
    auto tr = trace_ib(rq, s.b.net, {4, 1}, {7, 1});
    EXPECT_TRUE(tr.ok());
    EXPECT_FALSE(tr->reachable);
    return *tr;
  };
  auto lft = s.routes.lft;
  lft[2][host3] = wire::kLftNoPort;
  IbTrace t = run(lft);
  EXPECT_EQ(t.failure, TraceFailure::kNoRoute);
  EXPECT_EQ(t.failed_hop, 0);

  const uint8_t up = s.routes.lft[2][host3];
  t = run(s.routes.lft, {{2u, up}});
  EXPECT_EQ(t.failure, TraceFailure::kLinkDown);
  EXPECT_EQ(t.failed_hop, 0);
  EXPECT_NE(t.reason.find("is Down"), std::string::npos) << t.reason;

  lft = s.routes.lft;
  lft[0][host3] = 1;  // spine0 sends it back down to leaf0, which sends it up again
  lft[1][host3] = 1;
  lft[2][host3] = 7;
  t = run(lft);
  EXPECT_EQ(t.failure, TraceFailure::kLoop);
  EXPECT_EQ(t.hops.size(), 3u);  // leaf0, spine0, leaf0 again

  lft = s.routes.lft;
  lft[3][host3] = 1;  // leaf1 delivers it to host2
  t = run(lft);
  EXPECT_EQ(t.failure, TraceFailure::kMisrouted);
  EXPECT_NE(t.reason.find("host2"), std::string::npos) << t.reason;

  lft = s.routes.lft;
  lft[2][host3] = 9;  // leaf0 has 8 ports
  t = run(lft);
  EXPECT_EQ(t.failure, TraceFailure::kNoRoute);
}

TEST(IbTrace, BadEndpointsAreErrors) {
  Routed s;
  SubnetSmas smas(s.b.net, s.routes.lft);
  IbRequester rq(smas, {});
  EXPECT_FALSE(trace_ib(rq, s.b.net, {4, 1}, {4, 1}).ok());
  EXPECT_FALSE(trace_ib(rq, s.b.net, {8, 1}, {4, 1}).ok());  // the dual CA's port 1: no cable
  s.b.net.nodes[7].ports[1].info.set_lid(0);
  auto no_lid = trace_ib(rq, s.b.net, {4, 1}, {7, 1});
  ASSERT_FALSE(no_lid.ok());
  EXPECT_NE(no_lid.error().message.find("no LID"), std::string::npos);
  EXPECT_EQ(rq.stats().sent, 0u);  // nothing was sent for them
}

TEST(IbSubnetFind, NamesAsInfinibandDiagsUsersGiveThem) {
  Routed s;
  const IbSubnet& net = s.b.net;
  const uint16_t host3 = s.lid(7, 1), leaf1 = s.lid(3, 0);
  auto is = [&](const std::string& text, IbEndpoint want) {
    auto e = net.find(text);
    ASSERT_TRUE(e.ok()) << text << ": " << e.error().to_string();
    EXPECT_EQ(*e, want) << text;
  };
  is(std::to_string(host3), {7, 1});
  is("lid:" + std::to_string(leaf1), {3, 0});
  is(fmt::format("{:#x}", net.nodes[7].info.node_guid), {7, 1});
  is(fmt::format("H-{:016x}", net.nodes[7].info.node_guid), {7, 1});
  is(fmt::format("S-{:016x}", net.nodes[3].info.node_guid), {3, 0});
  is("host3 HCA-1", {7, 1});
  is("dual HCA-1", {8, 2});  // the port it was entered by
  is("leaf1", {3, 0});
  s.b.net.nodes[8].ports[2].guid = 0xabcdef;
  is("0xabcdef", {8, 2});  // a port GUID
  for (const char* bad : {"99999", "lid:0", "0x77", "nosuch", ""}) {
    auto e = net.find(bad);
    EXPECT_FALSE(e.ok()) << bad;
    if (!e.ok()) {
      EXPECT_EQ(e.error().code, Code::kNotFound) << bad;
    }
  }
  s.b.net.nodes[6].description = "host3 HCA-1";
  auto twice = net.find("host3 HCA-1");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("2 nodes"), std::string::npos);
  // A long name is quoted short.
  auto longer = net.find(std::string(5000, 'x'));
  ASSERT_FALSE(longer.ok());
  EXPECT_LT(longer.error().message.size(), 200u);
}

}  // namespace
}  // namespace galaxy::nm
