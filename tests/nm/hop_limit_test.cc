// A routing loop does not keep a packet for ever (chip/forwarding.h, kMaxDataHops): over both
// back ends, an MP into a loop between two NRCs is discarded once it has passed 255 of them,
// counted dirty there, and refused to its sender with E2037, while the other direction delivers.
#include <gtest/gtest.h>

#include "chip/refusal.h"
#include "chip/registers.h"
#include "chip/rt_select.h"
#include "nm/route_load.h"
#include "nm/routing.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

class HopLimit : public ::testing::TestWithParam<const char*> {};

TEST_P(HopLimit, AnMpInARoutingLoopIsRefusedAfter255Nrcs) {
  // Two NRCs in a line, one NIC each: nrc00 port 2 <-> nrc01 port 1, NICs on port 0.
  auto s = testing::Backend::make(GetParam(), "line:n=2");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  FabricMap map = s->oracle();
  Requester req(*s->port, {16, 6, s->wait(kSec), 2});
  auto rs = compute_routes(map, "minhop").value();
  auto load = load_routes(req, map, rs);
  ASSERT_TRUE(load.ok());
  ASSERT_EQ(load->failed, 0u);
  const fabric::Topology& t = map.topology;
  uint32_t nrc1 = 0, nic1 = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (t.name(v) == "nrc01") nrc1 = v;
    if (t.name(v) == "nic01") nic1 = v;
  }
  ASSERT_NE(nrc1, 0u);
  ASSERT_NE(nic1, 0u);
  // nrc01 sends what is for its own NIC back to nrc00, which sends it on to nrc01: a loop.
  Status st;
  for (const chip::RtWrite& w :
       chip::rt_writes(chip::PortSet::first(t.num_ports(nrc1)), map.chip_id[nic1], 1,
                       chip::PortSet::of(1), t.num_ports(nrc1)))
    req.submit(MgmtRequest::write2(map.target[nrc1], chip::reg::kRtSelect, w.select,
                                   chip::reg::kRtData, w.data),
               [&](const MgmtReply& r) { st = r.status; });
  req.run();
  ASSERT_TRUE(st.ok()) << st.to_string();

  testing::AllPairs r = s->all_pairs_mp();
  EXPECT_EQ(r.pairs, 2u);
  EXPECT_EQ(r.sent, 2u);
  EXPECT_EQ(r.delivered, 1u);  // nic01 -> nic00
  EXPECT_EQ(r.refused, 1u);    // nic00 -> nic01, in the loop
  EXPECT_EQ(r.wrong, 0u);
  EXPECT_EQ(r.refusal_id, chip::kErrHopLimit) << r.refusal;
  // The NRC that would have passed it on a 256th time counted it dirty.
  uint64_t dirty = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    req.submit(MgmtRequest::read(map.target[v], chip::reg::kDirtyDiscards),
               [&](const MgmtReply& rr) {
                 if (rr.status.ok()) dirty += rr.response.data.value[0];
               });
  }
  req.run();
  EXPECT_EQ(dirty, 1u);
}

GALAXY_OVER_BACKENDS(HopLimit);

}  // namespace
}  // namespace galaxy::nm
