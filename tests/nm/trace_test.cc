#include "nm/trace.h"

#include <gtest/gtest.h>

#include "chip/registers.h"
#include "nm/discovery.h"
#include "nm/route_load.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

unsigned popcount(const chip::PortSet& s) {
  return static_cast<unsigned>(s.count());
}

chip::PortSet all_inputs(const FabricMap& map, uint32_t node) {
  return chip::PortSet::first(map.topology.num_ports(node));
}

// Over both back ends: the loader's writes and the trace's reads are management requests.
struct BackendFixture {
  explicit BackendFixture(const char* kind)
      : s(testing::Backend::make(kind, "fattree:k=4,levels=3")) {
    if (!s) return;
    map = s->oracle();
    req = std::make_unique<Requester>(*s->port, RequesterOptions{});
    src = map.topology.nic_node(2);
    dst = map.topology.nic_node(map.topology.num_nics() - 1);
  }
  std::unique_ptr<testing::Backend> s;
  FabricMap map;
  std::unique_ptr<Requester> req;
  uint32_t src = 0, dst = 0;
};

class TraceBackends : public ::testing::TestWithParam<const char*> {};

// One route-table entry of NRC `v` through management, as a server would (RT_SELECT, RT_DATA):
// written for every linked input port, or read for one.
Status write_route(Requester& req, const FabricMap& map, uint32_t v, uint32_t dst,
                   chip::PortSet ports) {
  Status st;
  for (const chip::RtWrite& w :
       chip::rt_writes(all_inputs(map, v), map.chip_id[dst], 1, ports, map.topology.num_ports(v)))
    req.submit(MgmtRequest::write2(map.target[v], chip::reg::kRtSelect, w.select,
                                   chip::reg::kRtData, w.data),
               [&](const MgmtReply& r) {
                 if (!r.status.ok()) st = r.status;
               });
  req.run();
  return st;
}

TEST_P(TraceBackends, MinhopLoaderProgramsTheShortestPathSets) {
  BackendFixture f(GetParam());
  ASSERT_TRUE(f.s) << GetParam() << " did not come up";
  ASSERT_TRUE(load_minhop_for(*f.req, f.map, f.dst).ok());
  auto sets = minhop_port_sets(f.map, f.dst);
  unsigned programmed = 0;
  for (uint32_t v = 0; v < f.map.num_nodes(); ++v) {
    if (f.map.topology.is_nic(v)) continue;
    for (uint8_t p = 0; p < f.map.topology.num_ports(v); ++p)
      EXPECT_EQ(testing::read_route(*f.req, f.map, v, p, f.dst), sets[v]) << v << ":" << p;
    programmed += sets[v] != 0;
  }
  EXPECT_EQ(programmed, f.map.topology.num_nrcs());
}

TEST_P(TraceBackends, FindsTheMinhopPathWithItsAlternatives) {
  BackendFixture bf(GetParam());
  ASSERT_TRUE(bf.s) << GetParam() << " did not come up";
  struct {
    FabricMap& map;
    Requester& req;
    uint32_t src, dst;
  } f{bf.map, *bf.req, bf.src, bf.dst};
  ASSERT_TRUE(load_minhop_for(f.req, f.map, f.dst).ok());
  auto tr = trace(f.req, f.map, f.src, f.dst);
  ASSERT_TRUE(tr.ok()) << tr.error().to_string();
  EXPECT_TRUE(tr->reachable) << tr->reason;
  EXPECT_EQ(tr->failure, TraceFailure::kNone);
  // NRCs on a shortest path between NICs of different pods: edge, agg, core, agg, edge.
  const uint32_t nrcs = f.map.topology.bfs_distances(f.src)[f.dst];
  EXPECT_EQ(nrcs, 5u);
  ASSERT_EQ(tr->hops.size(), nrcs);
  EXPECT_EQ(tr->hops[0].node, f.map.topology.peer({f.src, 0})->node);
  EXPECT_EQ(tr->hops[0].in_port, f.map.topology.peer({f.src, 0})->port);
  // Going up, a k=4 fat tree offers k/2 = 2 ports; coming down, one.
  EXPECT_EQ(popcount(tr->hops[0].allowed), 2u);
  EXPECT_EQ(popcount(tr->hops[1].allowed), 2u);
  EXPECT_EQ(popcount(tr->hops[3].allowed), 1u);
  EXPECT_EQ(popcount(tr->hops[4].allowed), 1u);
  EXPECT_EQ(f.map.topology.peer({tr->hops[4].node, static_cast<uint8_t>(tr->hops[4].chosen)})->node,
            f.dst);
  uint64_t requests = 0;
  for (size_t k = 0; k < tr->hops.size(); ++k) {
    const TraceHop& h = tr->hops[k];
    EXPECT_TRUE(h.in_link.up()) << k;
    EXPECT_EQ(h.usable, h.allowed) << k;
    EXPECT_EQ(h.chosen, h.allowed.lowest()) << k;
    ASSERT_EQ(h.out_links.size(), popcount(h.allowed));
    for (const auto& l : h.out_links) EXPECT_EQ(l.lanes(), 8u);
    if (k + 1 < tr->hops.size()) {
      EXPECT_EQ(tr->hops[k + 1].node,
                f.map.topology.peer({h.node, static_cast<uint8_t>(h.chosen)})->node);
    }
    requests += 2 + (1 + popcount(h.allowed) + 1) / 2;
  }
  EXPECT_EQ(tr->requests, requests);
  if (bf.s->kind == "sim") {  // simulated time; a live trace takes what the machine takes
    EXPECT_GT(tr->elapsed, requests * 7 * kUs);
  }
}

TEST_P(TraceBackends, CutUplinkLeavesTheAlternativeAndCutDownlinkFails) {
  BackendFixture f(GetParam());
  ASSERT_TRUE(f.s) << GetParam() << " did not come up";
  ASSERT_TRUE(load_minhop_for(*f.req, f.map, f.dst).ok());
  auto before = trace(*f.req, f.map, f.src, f.dst);
  ASSERT_TRUE(before.ok() && before->reachable);
  const TraceHop& h0 = before->hops[0];
  ASSERT_TRUE(
      testing::force_link_down(*f.req, f.map, {h0.node, static_cast<uint8_t>(h0.chosen)}).ok());
  // The link may carry the oracle's source routes: rediscover to route around it (map nodes are
  // then discovery order; chip id = plan node).
  auto found = discover(*f.req, {});
  ASSERT_TRUE(found.ok());
  const FabricMap& m = found->map;
  auto up_cut = trace(*f.req, m, m.node_of.at(static_cast<uint16_t>(f.src)),
                      m.node_of.at(static_cast<uint16_t>(f.dst)));
  ASSERT_TRUE(up_cut.ok());
  EXPECT_TRUE(up_cut->reachable) << up_cut->reason;
  EXPECT_EQ(popcount(up_cut->hops[0].usable), 1u);
  EXPECT_NE(up_cut->hops[0].chosen, h0.chosen);
  EXPECT_EQ(up_cut->hops[0].out_links[0].link_state & 3, 0u);

  // The last NRC's only way to the destination NIC.
  const fabric::PortRef nrc_end = *f.map.topology.peer({f.dst, 0});
  ASSERT_TRUE(testing::force_link_down(
                  *f.req, m, {m.node_of.at(static_cast<uint16_t>(nrc_end.node)), nrc_end.port})
                  .ok());
  auto down_cut = trace(*f.req, m, m.node_of.at(static_cast<uint16_t>(f.src)),
                        m.node_of.at(static_cast<uint16_t>(f.dst)));
  ASSERT_TRUE(down_cut.ok());
  EXPECT_FALSE(down_cut->reachable);
  EXPECT_EQ(down_cut->failure, TraceFailure::kLinkDown);
  EXPECT_EQ(down_cut->failed_hop, 4);
  EXPECT_NE(down_cut->reason.find(fmt::format("link down on port {}", nrc_end.port)),
            std::string::npos)
      << down_cut->reason;
}

TEST_P(TraceBackends, MissingRouteIsReportedAtItsHop) {
  BackendFixture f(GetParam());
  ASSERT_TRUE(f.s) << GetParam() << " did not come up";
  // Without any table the first NRC already has nothing.
  auto none = trace(*f.req, f.map, f.src, f.dst);
  ASSERT_TRUE(none.ok()) << none.error().to_string();
  EXPECT_EQ(none->failure, TraceFailure::kNoRoute);
  EXPECT_EQ(none->failed_hop, 0);

  ASSERT_TRUE(load_minhop_for(*f.req, f.map, f.dst).ok());
  auto good = trace(*f.req, f.map, f.src, f.dst);
  ASSERT_TRUE(good.ok() && good->reachable);
  const uint32_t core = good->hops[2].node;
  ASSERT_TRUE(write_route(*f.req, f.map, core, f.dst, 0).ok());
  auto tr = trace(*f.req, f.map, f.src, f.dst);
  ASSERT_TRUE(tr.ok());
  EXPECT_FALSE(tr->reachable);
  EXPECT_EQ(tr->failure, TraceFailure::kNoRoute);
  EXPECT_EQ(tr->failed_hop, 2);
  EXPECT_EQ(tr->hops.size(), 3u);
  EXPECT_NE(tr->reason.find(fmt::format("no route to chip {} at hop 2", f.map.chip_id[f.dst])),
            std::string::npos)
      << tr->reason;
}

TEST_P(TraceBackends, RouteBackToAVisitedChipIsALoop) {
  BackendFixture f(GetParam());
  ASSERT_TRUE(f.s) << GetParam() << " did not come up";
  ASSERT_TRUE(load_minhop_for(*f.req, f.map, f.dst).ok());
  auto good = trace(*f.req, f.map, f.src, f.dst);
  ASSERT_TRUE(good.ok() && good->reachable);
  const TraceHop& h1 = good->hops[1];
  ASSERT_TRUE(write_route(*f.req, f.map, h1.node, f.dst, 1u << h1.in_port).ok());
  auto tr = trace(*f.req, f.map, f.src, f.dst);
  ASSERT_TRUE(tr.ok());
  EXPECT_EQ(tr->failure, TraceFailure::kLoop);
  EXPECT_EQ(tr->failed_hop, 1);
  EXPECT_NE(tr->reason.find("revisited"), std::string::npos);
}

TEST_P(TraceBackends, RejectsEndpointsThatAreNotTwoNics) {
  BackendFixture f(GetParam());
  ASSERT_TRUE(f.s) << GetParam() << " did not come up";
  uint32_t nrc = f.map.topology.peer({f.src, 0})->node;
  EXPECT_FALSE(trace(*f.req, f.map, f.src, nrc).ok());
  EXPECT_FALSE(trace(*f.req, f.map, f.src, f.src).ok());
  EXPECT_FALSE(load_minhop_for(*f.req, f.map, nrc).ok());
}

GALAXY_OVER_BACKENDS(TraceBackends);

}  // namespace
}  // namespace galaxy::nm
