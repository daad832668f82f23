#include "nm/scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "chip/registers.h"
#include "nm/discovery.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

using testing::SimServer;

constexpr uint8_t kPeerIdent = 0, kLinkState = 1, kRetransmissions = 3, kRetransRate = 4,
                  kCrcErrors = 5;

// Ten status registers a port, two a request, and each chip's TEMPERATURE and VOLTAGE in one.
uint64_t expected_requests(const FabricMap& map, bool nics) {
  uint64_t n = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (v != map.server_node && (nics || !map.topology.is_nic(v)))
      n += (10 * map.topology.num_ports(v) + 1) / 2 + 1;
  return n;
}

class ScanBackends : public ::testing::TestWithParam<const char*> {};

TEST_P(ScanBackends, PipelinedScanReadsEveryPortOfEveryNrc) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  Requester req(*s->port, {256, 6, kSec, 2});
  Scanner scanner(req, map);
  auto r = scanner.scan_once({});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->chips.size(), map.topology.num_nrcs());
  EXPECT_EQ(r->requests, expected_requests(map, false));
  EXPECT_EQ(r->responses, r->requests);
  EXPECT_TRUE(r->non_responding.empty());
  for (const auto& c : r->chips) {
    EXPECT_TRUE(c.environment_read) << c.node;
    EXPECT_GT(c.temperature_mc, 25'000) << "above the machine room's air: it is powered";
    EXPECT_LT(c.temperature_mc, 85'000);
    EXPECT_GT(c.voltage_mv, 800u);
    ASSERT_EQ(c.ports.size(), map.topology.num_ports(c.node));
    for (size_t p = 0; p < c.ports.size(); ++p) {
      EXPECT_EQ(c.ports[p].read_mask, 0x3FF) << c.node << ":" << p;
      auto peer = map.topology.peer({c.node, static_cast<uint8_t>(p)});
      // PEER_IDENT [23:8] is the peer's chip id, LINK_STATE [1:0] = 2 when up.
      if (peer) {
        EXPECT_EQ((c.ports[p].value[kPeerIdent] >> 8) & 0xFFFF, map.chip_id[peer->node]);
        EXPECT_EQ(c.ports[p].value[kLinkState] & 3, 2u);
      }
    }
  }
  EXPECT_GT(r->management_gbps(), 0);
  EXPECT_NEAR(r->link_share_percent(), 100 * r->management_gbps() / 224, 1e-12);
  EXPECT_DOUBLE_EQ(r->management_bits(), 2.0 * r->requests * 4 * 198);
}

// The management daemon scans in batches (scan_batch_end) and lets other requests in between:
// the batches merged are the whole scan, every chip once, in node order.
TEST_P(ScanBackends, BatchesMergedAreTheWholeScan) {
  auto s = testing::Backend::make(GetParam(), "fattree:k=4,levels=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  Requester req(*s->port, {256, 6, kSec, 2});
  Scanner scanner(req, map);
  auto whole = scanner.scan_once({});
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();

  ScanOptions o;
  std::optional<ScanResult> merged;
  unsigned batches = 0;
  for (uint32_t first = 0; first < map.num_nodes();) {
    o.first_node = first;
    o.end_node = scan_batch_end(map, o, first, 3);
    ASSERT_GT(o.end_node, first) << "a batch moves on";
    first = o.end_node;
    auto r = scanner.scan_once(o);
    if (!r.ok() && r.error().id == 5300) continue;  // NICs alone after the last switch
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ++batches;
    EXPECT_LE(r->chips.size(), 3u);
    if (batches < (map.topology.num_nrcs() + 2) / 3) {
      EXPECT_EQ(r->chips.size(), 3u) << "NICs are not counted";
    }
    if (!merged)
      merged = std::move(*r);
    else
      merge_scan(*merged, std::move(*r));
  }
  ASSERT_TRUE(merged);
  EXPECT_EQ(scan_chip_count(map, {}), map.topology.num_nrcs());
  EXPECT_EQ(scan_chip_count(map, {.include_nics = true}), map.num_nodes() - 1) << "not its own";
  EXPECT_EQ(batches, (map.topology.num_nrcs() + 2) / 3);
  ASSERT_EQ(merged->chips.size(), whole->chips.size());
  for (size_t i = 0; i < whole->chips.size(); ++i) {
    EXPECT_EQ(merged->chips[i].node, whole->chips[i].node);
    for (size_t p = 0; p < whole->chips[i].ports.size(); ++p)
      EXPECT_EQ(merged->chips[i].ports[p].read_mask, whole->chips[i].ports[p].read_mask);
  }
  EXPECT_EQ(merged->requests, whole->requests);
  EXPECT_DOUBLE_EQ(merged->paper_model_us, whole->paper_model_us);
  EXPECT_EQ(scan_batch_end(map, o, map.num_nodes(), 3), map.num_nodes()) << "nothing left";
}

TEST_P(ScanBackends, NicsAreScannedOnRequest) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  Requester req(*s->port, {});
  Scanner scanner(req, map);
  auto r = scanner.scan_once({.include_nics = true});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->chips.size(), map.num_nodes() - 1);  // all but the server's own NIC
  EXPECT_EQ(r->requests, expected_requests(map, true));
  EXPECT_TRUE(r->non_responding.empty());
}

TEST(ScanTest, SerialScanMatchesThePaperModel) {
  auto s = SimServer::make("line:n=8");
  auto map = s.oracle();
  Requester req(*s.port, {});
  Scanner scanner(req, map);
  auto r = scanner.scan_once({.environment = false});  // the paper's scan: port registers only
  ASSERT_TRUE(r.ok());
  // The paper's model (docs/system.md 2.8) charges a two-register request like a one-register one;
  // the calibrated NMA charges the second read too ("more than 1, less than 2 single reads").
  const double second_read_us =
      static_cast<double>(sim::default_timing().value().nma_register_read) / kUs;
  double paper = 0, calibrated = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (map.topology.is_nic(v)) continue;
    paper += 15 * (7.40 + (map.hops[v] + 1) * 0.88);  // 3 ports: 15 requests
    calibrated += 15 * (7.40 + second_read_us + (map.hops[v] + 1) * 0.8762);
  }
  EXPECT_NEAR(r->paper_model_us, paper, 1e-6);
  double us = static_cast<double>(r->elapsed) / kUs;
  EXPECT_NEAR(us, calibrated, 0.01 * calibrated);
  EXPECT_NEAR(us, paper, 0.10 * paper);
}

TEST(ScanTest, PipelinedScanIsMuchFasterThanSerial) {
  auto serial_s = SimServer::make("fattree:k=4,levels=3");
  auto pipe_s = SimServer::make("fattree:k=4,levels=3");
  auto map = serial_s.oracle();
  Requester serial(*serial_s.port, {});
  Requester pipelined(*pipe_s.port, {256, 6, kSec, 2});
  auto a = Scanner(serial, map).scan_once({});
  auto b = Scanner(pipelined, map).scan_once({});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->requests, b->requests);
  EXPECT_LT(b->elapsed * 4, a->elapsed);
}

TEST_P(ScanBackends, ChipBehindACutLinkIsReportedAndTheScanGoesOn) {
  auto s = testing::Backend::make(GetParam(), "line:n=4");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  // Cut the link into the NRC two hops away: it and the NRC behind it stop answering.
  uint32_t cut = UINT32_MAX;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && map.hops[v] == 2) cut = v;
  ASSERT_NE(cut, UINT32_MAX);
  auto up = map.topology.peer({cut, map.target[cut].backward.hops[0]});
  Requester req(*s->port, {256, 6, s->wait(20 * kUs), 2});
  ASSERT_TRUE(testing::force_link_down(req, map, *up).ok());
  auto r = Scanner(req, map).scan_once({});
  ASSERT_TRUE(r.ok());
  std::vector<uint32_t> dead;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && map.hops[v] >= 2) dead.push_back(v);
  EXPECT_EQ(r->non_responding, dead);
  EXPECT_GT(r->skipped, 0u);  // the rest of a dead chip's reads were not sent
  for (const auto& c : r->chips) {
    bool is_dead = std::count(dead.begin(), dead.end(), c.node) != 0;
    EXPECT_EQ(c.responding, !is_dead);
    if (is_dead) continue;
    for (const auto& p : c.ports) EXPECT_EQ(p.read_mask, 0x3FF);
  }
  EXPECT_GT(req.stats().retries, 0u);
}

// A cable cut before discovery: the map then lacks the chips behind it. Against the plan, they
// are unreached and the cut link is down at the end discovery reached; a scan given the plan
// counts the unreached chips of the kinds it scans as not responding, as a host gone would be.
TEST(ScanTest, ChipsOfThePlanThatDiscoveryDidNotReachAreNotResponding) {
  auto s = SimServer::make("line:n=4");
  const FabricMap full = s.oracle();
  const fabric::Topology& plan = s.fabric->topology();
  uint32_t cut = UINT32_MAX;
  for (uint32_t v = 0; v < full.num_nodes(); ++v)
    if (!full.topology.is_nic(v) && full.hops[v] == 2) cut = v;
  ASSERT_NE(cut, UINT32_MAX);
  const fabric::PortRef cut_in{cut, full.target[cut].backward.hops[0]};
  const fabric::PortRef near = *full.topology.peer(cut_in);
  Requester req(*s.port, {});
  ASSERT_TRUE(testing::force_link_down(req, full, near).ok());
  auto found = discover(req, {});
  ASSERT_TRUE(found.ok()) << found.error().to_string();

  // The chips discovery no longer finds: the NRC cut off and what lies behind it.
  std::vector<wire::ChipId> gone, gone_nrcs;
  for (uint32_t c = 0; c < plan.num_nodes(); ++c)
    if (!found->map.node_of.contains(static_cast<uint16_t>(c)))
      gone.push_back(static_cast<wire::ChipId>(c));
  ASSERT_TRUE(std::count(gone.begin(), gone.end(), full.chip_id[cut]) == 1);
  ASSERT_GT(gone.size(), 1u);
  EXPECT_EQ(found->map.num_nodes() + gone.size(), plan.num_nodes());
  for (wire::ChipId c : gone)
    if (!plan.is_nic(c)) gone_nrcs.push_back(c);

  const Shortfall sf = shortfall(found->map, plan);
  EXPECT_EQ(sf.unreached, gone);
  ASSERT_EQ(sf.links_down.size(), 1u);
  EXPECT_EQ(sf.links_down[0].end.node, full.chip_id[near.node]);
  EXPECT_EQ(sf.links_down[0].end.port, near.port);
  EXPECT_EQ(sf.links_down[0].peer.node, full.chip_id[cut_in.node]);
  EXPECT_EQ(sf.links_down[0].peer.port, cut_in.port);

  Scanner scanner(req, found->map);
  ScanOptions o;
  o.plan = &plan;
  auto r = scanner.scan_once(o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->non_responding.empty());  // every chip asked answered
  EXPECT_EQ(r->unreached, gone_nrcs);
  EXPECT_EQ(r->not_responding(), gone_nrcs.size());
  o.include_nics = true;
  r = scanner.scan_once(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->unreached, gone);
  // Without the plan, what discovery did not reach goes unseen.
  r = scanner.scan_once({});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->not_responding(), 0u);
}

TEST(ScanTest, CompareShowsRetransmissionsOnNoisyLinks) {
  auto s = SimServer::make("line:n=3");
  auto map = s.oracle();
  uint32_t nrc = map.topology.peer({map.server_node, 0})->node;
  uint8_t nrc_port = map.topology.peer({map.server_node, 0})->port;
  // The scans' own packets cross the server's link, which now corrupts flits both ways.
  s.fabric->set_flit_error_rate({nrc, nrc_port}, 0.05);
  s.fabric->set_flit_error_rate({map.server_node, 0}, 0.05);
  Requester req(*s.port, {256, 6, kSec, 2});
  std::vector<ScanDiff> diffs;
  Status st = Scanner(req, map).scan_loop(
      {}, kMs, 3, [&](const ScanResult* prev, const ScanResult& cur) -> Status {
        EXPECT_TRUE(cur.non_responding.empty());
        if (prev) diffs.push_back(diff(*prev, cur));
        return {};
      });
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(diffs.size(), 2u);
  for (const auto& d : diffs) {
    EXPECT_NEAR(d.interval_s, 1e-3, 1e-6);  // the scans start one interval apart
    EXPECT_GT(d.total_delta[kRetransmissions], 0u);
    EXPECT_GT(d.total_delta[kCrcErrors], 0u);
    bool found = false;
    for (const auto& c : d.changes) {
      if (c.node == nrc && c.port == nrc_port && c.reg == kRetransmissions) {
        found = true;
        EXPECT_EQ(c.delta, c.new_value - c.old_value);
        EXPECT_NEAR(c.rate_per_s, c.delta / d.interval_s, 1e-6);
      }
      // The only state register that moves is the retransmission rate of the noisy link.
      if (!status_registers()[c.reg].counter) {
        EXPECT_EQ(c.reg, kRetransRate);
        EXPECT_EQ(c.node, nrc);
      }
    }
    EXPECT_TRUE(found);
  }
  EXPECT_EQ(req.stats().failed, 0u);
}

TEST_P(ScanBackends, PortsTheChipDoesNotHaveAreRefusedOnceAndSkipped) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  Requester req(*s->port, {});
  auto found = discover(req, {});
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  // Discovery learns each NRC's radix (3 here) from its neighbour: nothing is absent.
  auto exact = Scanner(req, found->map).scan_once({});
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->absent_ports, 0u);
  EXPECT_EQ(exact->error_responses, 0u);
  // A map that claims the TH-2 NRC's 24 ports (a stale plan, say): the chips refuse the
  // registers of ports they lack, once per port, and the scan skips the rest of that port.
  FabricMap map = found->map;
  fabric::Topology wide;
  const auto& t = found->map.topology;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    (void)wide.add_node(t.kind(v), t.is_nic(v) ? t.num_ports(v) : 24, t.name(v));
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint8_t p = 0; p < t.num_ports(v); ++p)
      if (auto peer = t.peer({v, p});
          peer && (peer->node > v || (peer->node == v && peer->port > p)))
        (void)wide.connect({v, p}, *peer);
  map.topology = std::move(wide);
  auto r = Scanner(req, map).scan_once({});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->non_responding.empty());
  EXPECT_EQ(r->absent_ports, 3u * 21);
  EXPECT_EQ(r->error_responses, r->absent_ports);  // serial: one refusal per absent port
  EXPECT_EQ(r->requests + r->skipped, expected_requests(map, false));
  for (const auto& c : r->chips)
    for (size_t p = 0; p < c.ports.size(); ++p) {
      EXPECT_EQ(c.ports[p].absent, p >= 3);
      EXPECT_EQ(c.ports[p].read_mask, p >= 3 ? 0 : 0x3FF);
    }
}

TEST(ScanTest, CounterDeltaHandlesWrapAround) {
  EXPECT_EQ(counter_delta(10, 25, 64), 15u);
  EXPECT_EQ(counter_delta(0xFFFFFFFFFFFFFFF0ull, 0x10, 64), 0x20u);
  EXPECT_EQ(counter_delta(0xFFFFFFF0u, 0x10, 32), 0x20u);
  EXPECT_EQ(counter_delta(5, 5, 32), 0u);
  EXPECT_EQ(counter_delta(0xFFFF, 0x0001, 16), 2u);
}

TEST(ScanTest, DiffListsStateChangesFirstThenCountersByDelta) {
  ScanResult a, b;
  ChipStatus c;
  c.node = 7;
  c.chip_id = 7;
  c.ports.resize(2);
  for (auto& p : c.ports) p.read_mask = 0x3FF;
  a.chips.push_back(c);
  a.started = 0;
  c.ports[0].value[kRetransmissions] = 3;
  c.ports[1].value[kCrcErrors] = 5;
  c.ports[1].value[kLinkState] = 2;
  b.chips.push_back(c);
  b.started = 2 * kSec;
  a.chips[0].ports[1].value[kCrcErrors] = 0xFFFFFFFFFFFFFFFEull;  // wraps to 5: delta 7
  ScanDiff d = diff(a, b);
  EXPECT_DOUBLE_EQ(d.interval_s, 2.0);
  ASSERT_EQ(d.changes.size(), 3u);
  EXPECT_EQ(d.changes[0].reg, kLinkState);
  EXPECT_EQ(d.changes[0].new_value, 2u);
  EXPECT_EQ(d.changes[1].reg, kCrcErrors);
  EXPECT_EQ(d.changes[1].delta, 7u);
  EXPECT_DOUBLE_EQ(d.changes[1].rate_per_s, 3.5);
  EXPECT_EQ(d.changes[2].reg, kRetransmissions);
  EXPECT_EQ(d.total_delta[kRetransmissions], 3u);
  // A register not read in one scan is not compared.
  b.chips[0].ports[0].read_mask = 0;
  EXPECT_EQ(diff(a, b).changes.size(), 2u);
  b.chips[0].responding = false;
  EXPECT_EQ(diff(a, b).stopped_answering, std::vector<uint32_t>{7});
}

GALAXY_OVER_BACKENDS(ScanBackends);

}  // namespace
}  // namespace galaxy::nm
