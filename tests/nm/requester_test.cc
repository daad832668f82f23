#include <gtest/gtest.h>

#include "chip/registers.h"
#include "nm/cooperative_port.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

using testing::SimServer;

// docs/system.md 2.8: a whole request including software, descriptor to response, is DP = 7.40 us
// plus (h + 1) x 0.8762 us; the Requester, glex and the chip models together give exactly that.
TEST(RequesterTest, SerialRequestsCostDpPlusHops) {
  auto s = SimServer::make("line:n=6");
  auto map = s.oracle();
  Requester req(*s.port, {});
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (map.topology.is_nic(v)) continue;
    Picoseconds before = s.port->now();
    MgmtReply got;
    req.submit(MgmtRequest::read(map.target[v], chip::reg::kChipId),
               [&](const MgmtReply& r) { got = r; });
    req.run();
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_EQ(got.response.data.value[0] & 0xFFFF, v);
    double us = static_cast<double>(s.port->now() - before) / kUs;
    EXPECT_NEAR(us, 7.40 + (map.hops[v] + 1) * 0.8762, 0.001) << "node " << v;
  }
}

TEST(RequesterTest, PipelinedWindowsOverlapRequests) {
  auto s = SimServer::make("fattree:k=4,levels=3");
  auto map = s.oracle();
  Requester req(*s.port, {64, 4, kSec, 2});
  int done = 0;
  Picoseconds start = s.port->now();
  for (int rep = 0; rep < 6; ++rep)
    for (uint32_t v = 0; v < map.num_nodes(); ++v)
      if (!map.topology.is_nic(v))
        req.submit(
            MgmtRequest::read2(map.target[v], chip::reg::kPeerSummary, chip::reg::kPeerSummary + 1),
            [&](const MgmtReply& r) { done += r.status.ok(); });
  req.run();
  EXPECT_EQ(done, 6 * 20);
  double us = static_cast<double>(s.port->now() - start) / kUs;
  EXPECT_LT(us, 120 * 7.40 / 4);  // far less than serial
  EXPECT_EQ(req.stats().retries, 0u);
}

// A port that fails (its server stopped: nm/cooperative_port.h) fails every request in flight,
// parked and queued at once with its error, instead of waiting out their timeouts; later
// requests fail as they are sent.
TEST(RequesterTest, APortThatFailsFailsEveryRequestAtOnce) {
  auto s = SimServer::make("fattree:k=4,levels=3");
  auto map = s.oracle();
  std::unique_ptr<CooperativePort> port;
  port = std::make_unique<CooperativePort>(*s.port, kUs, [&] { port->stop(); });
  Requester req(*port, {4, 1, kSec, 2});
  int ok = 0, failed = 0;
  for (int rep = 0; rep < 2; ++rep)
    for (uint32_t v = 0; v < map.num_nodes(); ++v)
      if (!map.topology.is_nic(v))
        req.submit(MgmtRequest::read(map.target[v], chip::reg::kChipId), [&](const MgmtReply& r) {
          ok += r.status.ok();
          failed += !r.status.ok() && r.status.error().code == Code::kIoError;
        });
  const Picoseconds t0 = s.port->now();
  req.run();
  EXPECT_EQ(ok + failed, 40);
  EXPECT_GE(failed, 36) << "at most the first window answered before the port stopped";
  EXPECT_LT(s.port->now() - t0, kMs) << "no request waited for its timeout";
  MgmtReply later;
  req.submit(MgmtRequest::read(map.target[map.server_node], chip::reg::kChipId),
             [&](const MgmtReply& r) { later = r; });
  req.run();
  EXPECT_EQ(later.status.error().id, 5474);
}

class RequesterBackends : public ::testing::TestWithParam<const char*> {};

TEST_P(RequesterBackends, LostRequestsTimeOutRetryThenFail) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  // Take the link behind the first NRC down: requests to NRC 2 are dropped on the way.
  uint32_t far = UINT32_MAX;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && map.hops[v] == 1) far = v;
  ASSERT_NE(far, UINT32_MAX);
  auto up = map.topology.peer({far, map.target[far].backward.hops[0]});
  Requester req(*s->port, {1, 1, s->wait(10 * kUs), 2});
  ASSERT_TRUE(testing::force_link_down(req, map, *up).ok());
  MgmtReply got;
  req.submit(MgmtRequest::read(map.target[far], chip::reg::kScratch),
             [&](const MgmtReply& r) { got = r; });
  req.run();
  EXPECT_EQ(got.status.error().code, Code::kTimeout);
  EXPECT_EQ(got.attempts, 3u);
  EXPECT_EQ(req.stats().retries, 2u);
}

TEST_P(RequesterBackends, ErrorResponsesAreReportedWithTheReason) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  uint32_t nrc = s->topology().peer({s->server_node, 0})->node;
  Requester req(*s->port, {});
  MgmtReply got;
  req.submit(MgmtRequest::write(map.target[nrc], chip::reg::kTemperature, 1),
             [&](const MgmtReply& r) { got = r; });
  req.run();
  ASSERT_FALSE(got.status.ok());
  EXPECT_NE(got.status.error().message.find("read only"), std::string::npos)
      << got.status.to_string();
}

TEST_P(RequesterBackends, TransactionIdsWrapWithoutConfusion) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  uint32_t nrc = s->topology().peer({s->server_node, 0})->node;
  Requester req(*s->port, {8, 8, kSec, 0});
  int ok = 0;
  for (int i = 0; i < 70000; ++i)
    req.submit(MgmtRequest::read(map.target[nrc], chip::reg::kScratch),
               [&](const MgmtReply& r) { ok += r.status.ok(); });
  req.run();
  EXPECT_EQ(ok, 70000);
  EXPECT_EQ(req.stats().stale, 0u);
}

GALAXY_OVER_BACKENDS(RequesterBackends);

}  // namespace
}  // namespace galaxy::nm
