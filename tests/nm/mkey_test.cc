// M_Keys on a Galaxy fabric (nm/mkey.h), in both engines: the server places a key per chip with
// a lease and reads on with it; a second server on another NIC without the key is refused, and
// the chips count it; once the first server is silent for a lease after the refusals, the
// successor takes the fabric over hop by hop and places its own keys, and the first server is
// then the one refused.
#include "nm/mkey.h"

#include <gtest/gtest.h>

#include "chip/registers.h"
#include "nm/discovery.h"
#include "nm/requester.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

class MKeyBackends : public ::testing::TestWithParam<const char*> {};

MgmtReply read1(Requester& req, const MgmtTarget& t, uint16_t addr) {
  return call(req, MgmtRequest::read(t, addr));
}

TEST_P(MKeyBackends, KeysRefuseAnotherServerUntilTheLeaseEnds) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=2");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  const Picoseconds timeout = s->wait(100 * kUs);
  Requester owner(*s->port, {64, 6, timeout, 2});
  DiscoveryOptions d;
  d.pipelined = true;
  auto found = discover(owner, d);
  ASSERT_TRUE(found.ok());
  const FabricMap map = found->map;
  const uint32_t remote = map.num_nodes() - 1;

  MKeyPolicy p;
  p.key = 0xC0FFEE;
  p.per_chip = true;
  p.level = 2;
  p.lease_s = 1;
  owner.set_m_key(p);
  auto placed = place_mkeys(owner, map, p);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->chips, remote) << placed->first.to_string();
  EXPECT_EQ(placed->failed, 0u);
  EXPECT_EQ(placed->requests, 3u * remote);
  // Every chip its own key.
  EXPECT_NE(mkey_of(p, map.chip_id[1]), mkey_of(p, map.chip_id[2]));
  // The owner discovers again with its keys.
  auto again = discover(owner, d);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->map.num_nodes(), map.num_nodes());
  EXPECT_EQ(again->failed_requests, 0u);

  // A second server at the last NIC, without the key: its first chip refuses it.
  const fabric::Topology& plan = s->topology();
  auto dev = s->open_nic(plan.nic_node(plan.num_nics() - 1));
  ASSERT_TRUE(dev);
  auto port = GlexMgmtPort::open(dev.get());
  ASSERT_TRUE(port.ok());
  Requester stranger(**port, {64, 6, timeout, 0});
  auto refused = discover(stranger, d);
  EXPECT_TRUE(!refused.ok() || refused->map.num_nodes() < map.num_nodes());
  uint64_t violations = 0;
  for (uint32_t v = 1; v < map.num_nodes(); ++v) {
    MgmtReply r = read1(owner, map.target[v], chip::reg::kMKeyViolations);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    violations += r.response.data.value[0];
  }
  EXPECT_GE(violations, 1u);
  // A write of the stranger's is refused too, with the NMA's wrong-key error.
  MgmtReply w = call(stranger, MgmtRequest::write(map.target[1], chip::reg::kScratch, 1));
  EXPECT_FALSE(w.status.ok());

  // The owner falls silent. The stranger tries again after each lease: each round its refusals
  // start the leases of the chips one hop further, until the whole fabric is its.
  std::optional<DiscoveryResult> taken;
  for (int round = 0; round < 8 && !taken; ++round) {
    stranger.drain_faults(1100 * kMs);
    auto r = discover(stranger, d);
    if (r.ok() && r->map.num_nodes() == map.num_nodes() && r->failed_requests == 0)
      taken = std::move(*r);
  }
  ASSERT_TRUE(taken.has_value()) << "the successor never found the whole fabric";
  // Its keys: the chips it has not been refused by yet (the NICs, which discovery does not read)
  // refuse it first, and take its key a lease later.
  MKeyPolicy q = p;
  q.key = 0xBEEF;
  stranger.set_m_key(q);
  auto mine = place_mkeys(stranger, taken->map, q);
  ASSERT_TRUE(mine.ok());
  for (int round = 0; round < 3 && mine.ok() && mine->failed != 0; ++round) {
    stranger.drain_faults(1100 * kMs);
    mine = place_mkeys(stranger, taken->map, q);
  }
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->failed, 0u) << mine->first.to_string();
  EXPECT_EQ(mine->chips, remote);
  // Now the first server is the stranger.
  MgmtReply old = read1(owner, map.target[1], chip::reg::kScratch);
  EXPECT_FALSE(old.status.ok());
}

TEST(MKey, PolicyChecks) {
  MKeyPolicy p;
  EXPECT_EQ(mkey_of(p, 3), 0u);  // no key: none stamped
  p.key = 42;
  EXPECT_EQ(mkey_of(p, 3), 42u);
  p.per_chip = true;
  EXPECT_NE(mkey_of(p, 3), 42u);
  EXPECT_NE(mkey_of(p, 3), mkey_of(p, 4));
  EXPECT_EQ(mkey_of(p, 3), mkey_of(p, 3));
  auto s = testing::SimServer::make("line:n=2");
  Requester req(*s.port, {});
  FabricMap map;
  p.level = 3;
  EXPECT_FALSE(place_mkeys(req, map, p).ok());
  p.level = 2;
  p.key = 0;
  EXPECT_FALSE(place_mkeys(req, map, p).ok());
}

GALAXY_OVER_BACKENDS(MKeyBackends);

}  // namespace
}  // namespace galaxy::nm
