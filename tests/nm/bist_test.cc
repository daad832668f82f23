#include "nm/bist.h"

#include <gtest/gtest.h>

#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

using testing::SimServer;

TEST(BistTest, AllLinksCoverEveryLinkOnce) {
  auto s = SimServer::make("fattree:k=4,levels=2");
  auto map = s.oracle();
  auto all = bist_all_links(map);
  EXPECT_EQ(all.size(), map.topology.num_links());
  for (const auto& b : all) EXPECT_FALSE(map.topology.is_nic(b.node));
  uint32_t nrc = map.topology.peer({map.server_node, 0})->node;
  EXPECT_EQ(bist_ports_of(map, nrc).size(), map.topology.num_ports(nrc));
}

TEST(BistTest, FindsErrorsOnANoisyLinkAndNoneOnACleanOne) {
  auto s = SimServer::make("fattree:k=4,levels=2");
  auto map = s.oracle();
  // Two NRC-NRC links: the first noisy in both directions.
  std::vector<BistPort> ports;
  for (const auto& b : bist_all_links(map))
    if (!map.topology.is_nic(map.topology.peer({b.node, b.port})->node) && ports.size() < 2)
      ports.push_back(b);
  ASSERT_EQ(ports.size(), 2u);
  fabric::PortRef noisy{ports[0].node, ports[0].port};
  s.fabric->set_flit_error_rate(noisy, 1e-3);
  s.fabric->set_flit_error_rate(*map.topology.peer(noisy), 1e-3);

  Requester req(*s.port, {64, 4, kSec, 2});
  Bist bist(req, map);
  BistOptions o;
  o.duration_us = 1000;
  o.intensity_percent = 50;
  const Picoseconds t0 = s.port->now();
  auto r = bist.run(ports, o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_GE(s.port->now() - t0, 1000 * kUs);
  ASSERT_EQ(r->links.size(), 2u);
  const auto& bad = r->links[0];
  const auto& good = r->links[1];
  for (const auto& l : r->links) {
    EXPECT_TRUE(l.started);
    EXPECT_TRUE(l.done);
    EXPECT_FALSE(l.running);
    EXPECT_GT(l.flits, 100000u);  // 1 ms at half of a 112 Gbit/s link, 198-bit flits
  }
  EXPECT_GT(bad.errors, 0u);
  EXPECT_FALSE(bad.pass);
  // About 141 errors expected: a binomial draw, within 4 standard deviations (12 errors each).
  EXPECT_NEAR(bad.bit_error_ratio, 1e-3 / 198, 0.35e-3 / 198);
  EXPECT_EQ(good.errors, 0u);
  EXPECT_TRUE(good.pass) << good.problem;
  EXPECT_DOUBLE_EQ(good.ber_upper_95, 3.0 / (static_cast<double>(good.flits) * 198));
  EXPECT_EQ(r->passed, 1u);
  EXPECT_EQ(r->failed, 1u);
  EXPECT_EQ(r->requests, 4u);  // a start and a two-register read per port
}

TEST(BistTest, HigherIntensityTestsMoreFlits) {
  auto s = SimServer::make("line:n=3");
  auto map = s.oracle();
  Requester req(*s.port, {});
  auto ports = bist_all_links(map);
  ports.resize(1);
  BistOptions o;
  o.intensity_percent = 25;
  auto low = Bist(req, map).run(ports, o);
  o.intensity_percent = 100;
  auto high = Bist(req, map).run(ports, o);
  ASSERT_TRUE(low.ok() && high.ok());
  EXPECT_NEAR(static_cast<double>(high->links[0].flits), 4.0 * low->links[0].flits,
              4.0 + 0.001 * high->links[0].flits);
}

TEST(BistTest, StopEndsARunningTest) {
  auto s = SimServer::make("line:n=3");
  auto map = s.oracle();
  Requester req(*s.port, {});
  Bist bist(req, map);
  auto ports = bist_all_links(map);
  BistOptions o;
  o.duration_us = 10000;
  ASSERT_TRUE(bist.start(ports, o).ok());
  auto running = bist.read();
  for (const auto& l : running.links) {
    EXPECT_TRUE(l.running);
    EXPECT_FALSE(l.pass);
    EXPECT_EQ(l.problem, "not finished");
  }
  ASSERT_TRUE(bist.stop().ok());
  req.drain_faults(20 * kMs);  // past the duration: a stopped test must not complete
  auto stopped = bist.read();
  for (const auto& l : stopped.links) {
    EXPECT_FALSE(l.running);
    EXPECT_FALSE(l.done);
    EXPECT_EQ(l.problem, "stopped before it finished");
  }
  EXPECT_EQ(s.fabric->stats().bists_completed, 0u);
}

// On a live fabric: the patterns cross the cables between hosts through the link layer; a link
// whose ends are on one host has no wire and says so; on a cable that corrupts frames the far
// end's discards are the errors.
TEST(BistTest, LiveCablesAreTestedThroughTheLinkLayer) {
  for (const char* impair : {"", "corrupt=0.05"}) {
    live::DaemonOptions o;
    if (*impair) {
      o.impaired = true;
      o.impairment = live::parse_impairment(impair).value();
    }
    auto s = testing::Backend::make("live", "fattree:k=4,levels=2", o);
    ASSERT_TRUE(s) << "the live fabric did not come up";
    Requester req(*s->port, {});
    auto found = discover(req, {});
    ASSERT_TRUE(found.ok()) << found.error().to_string();
    BistOptions bo;
    bo.duration_us = 20000;
    auto r = Bist(req, found->map).run(bist_all_links(found->map), bo);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    unsigned cables = 0;
    uint64_t errors = 0;
    for (const BistLinkResult& l : r->links) {
      EXPECT_TRUE(l.done) << impair << " chip " << l.chip_id << " port " << int{l.at.port} << ": "
                          << l.problem;
      if (l.no_wire) {
        EXPECT_EQ(l.flits, 0u);
        EXPECT_FALSE(l.pass);
        continue;
      }
      ++cables;
      EXPECT_GT(l.flits, 1000u) << "patterns crossed the cable";
      errors += l.errors;
      if (!*impair) {
        EXPECT_TRUE(l.pass) << l.problem;
      }
    }
    EXPECT_EQ(cables, 4u) << "fattree:k=4,levels=2 on two hosts has 4 cables between them";
    EXPECT_EQ(r->untested, r->links.size() - cables);
    if (*impair) {
      EXPECT_GT(errors, 0u) << "5% of the frames corrupted and not one error found";
    } else {
      EXPECT_EQ(r->passed, cables);
    }
  }
}

TEST(BistTest, RejectsBadOptionsAndPorts) {
  auto s = SimServer::make("line:n=3");
  auto map = s.oracle();
  Requester req(*s.port, {});
  Bist bist(req, map);
  auto ports = bist_all_links(map);
  EXPECT_FALSE(bist.start(ports, {.duration_us = 0}).ok());
  EXPECT_FALSE(bist.start(ports, {.duration_us = 70000}).ok());
  EXPECT_FALSE(bist.start(ports, {.intensity_percent = 101}).ok());
  EXPECT_FALSE(bist.start({{map.server_node, 0}}, {}).ok());
}

}  // namespace
}  // namespace galaxy::nm
