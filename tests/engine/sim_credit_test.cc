// Virtual channels, DAMQ buffers and credits in the simulated engine at packet level
// (chip/damq.h): a 2-level fat tree at 90% offered uniform load loses nothing and never puts a
// packet where the receiver has no room, and a management request's latency rises only by the
// residual service of the data packet on the wire at each output it passes.
#include <gtest/gtest.h>

#include <random>

#include "engine/sim/mgmt_probe.h"
#include "engine/sim/sim_fabric.h"
#include "sim_test_util.h"

namespace galaxy::sim {
namespace {

constexpr uint64_t kSrc = 0x100000;
constexpr uint64_t kDst = 0x200000;
constexpr uint8_t kVp = chip::kPioVps;  // a DMA VP
constexpr uint32_t kPutBytes = 1024;
constexpr const char* kFabric = "fattree:k=8,levels=2";  // 32 NICs, 8 leaves, 4 spines

// Open-loop puts: every NIC but `quiet` offers `load` of its link, to NICs drawn at random.
struct UniformLoad {
  SimFabric* f = nullptr;
  double load = 0.9;
  Time end = 0;
  uint32_t quiet = UINT32_MAX;
  std::vector<uint32_t> src_key, dst_key;
  std::mt19937_64 rng{11};
  Time mean_gap = 0;
  uint64_t posted = 0;
  uint64_t refused = 0;
  bool gets_too = false;          // every other transfer a get (read requests VC0, responses VC1)
  uint32_t hotspot = UINT32_MAX;  // every NIC sends to this one instead

  void start(Time duration) {
    const auto& t = f->topology();
    const uint32_t n = t.num_nics();
    for (uint32_t i = 0; i < n; ++i) {
      src_key.push_back(
          f->register_memory(t.nic_node(i), kSrc, kPutBytes, chip::kAccessRead).value());
      dst_key.push_back(
          f->register_memory(t.nic_node(i), kDst, kPutBytes, chip::kAccessWrite).value());
    }
    const auto flits = wire::transfer_traffic(kDst, kPutBytes).flits;
    mean_gap = static_cast<Time>(
        static_cast<double>(f->timing().serialisation(static_cast<unsigned>(flits))) / load);
    end = f->sim().now() + duration;
    for (uint32_t i = 0; i < n; ++i)
      if (i != quiet) next(i);
  }
  void next(uint32_t i) {
    std::exponential_distribution<double> gap(1.0 / static_cast<double>(mean_gap));
    const Time t = f->sim().now() + 1 + static_cast<Time>(gap(rng));
    if (t < end) f->sim().schedule_fn_at(t, [this, i] { fire(i); });
  }
  void fire(uint32_t i) {
    const auto& t = f->topology();
    const auto n = t.num_nics();
    uint32_t d = static_cast<uint32_t>(rng() % (n - 1));
    if (d >= i) ++d;
    if (hotspot != UINT32_MAX) d = hotspot;
    wire::RdmaDescriptor r;
    r.op = wire::RdmaOp::kWrite;
    r.remote_node = static_cast<uint16_t>(f->chip(t.nic_node(d)).chip_id());
    r.remote_vp = kVp;
    r.length = kPutBytes;
    r.local_address = kSrc;
    r.local_key = src_key[i];
    r.remote_address = kDst;
    r.remote_key = dst_key[d];
    r.local_cq = true;
    if (gets_too && (posted + refused) % 2 == 1) {  // the target's source into our destination
      r.op = wire::RdmaOp::kRead;
      r.local_address = kDst;
      r.local_key = dst_key[i];
      r.remote_address = kSrc;
      r.remote_key = src_key[d];
    }
    if (f->post_rdma(t.nic_node(i), kVp, r).ok())
      ++posted;
    else
      ++refused;  // the SDQ is full: the NIC cannot take more
    next(i);
  }
};

// Every link, both directions: the sender's credits never promise room the receiver's buffer
// does not have (its mirror holds at least what the buffer holds, per VC), and no buffer holds
// more than its flits.
unsigned check_credits(SimFabric& f) {
  const auto& t = f.topology();
  unsigned links = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, p});
      if (!q) continue;
      const chip::Damq& mirror = f.chip(v).port(p).vc.credits;
      const chip::Damq& held = f.chip(q->node).port(q->port).vc.buffered;
      EXPECT_LE(held.total(), chip::kDamqFlits);
      EXPECT_LE(mirror.total(), chip::kDamqFlits);
      for (uint8_t vc = 0; vc < chip::kNumVcs; ++vc)
        EXPECT_GE(mirror.used(vc), held.used(vc))
            << "node " << v << " port " << int{p} << " vc " << int{vc};
      ++links;
    }
  return links;
}

// Every buffer and every sender's credits are back to zero once the fabric is empty.
void expect_drained(SimFabric& f) {
  for (uint32_t v = 0; v < f.topology().num_nodes(); ++v)
    for (uint8_t p = 0; p < f.topology().num_ports(v); ++p) {
      EXPECT_EQ(f.chip(v).port(p).vc.buffered.total(), 0u) << "node " << v << " port " << int{p};
      EXPECT_EQ(f.chip(v).port(p).vc.credits.total(), 0u) << "node " << v << " port " << int{p};
    }
}

// Polls every NIC's completions: each a success; returns how many.
uint64_t completions(SimFabric& f) {
  uint64_t done = 0;
  for (uint32_t i = 0; i < f.topology().num_nics(); ++i)
    while (auto e = f.nic(f.topology().nic_node(i)).poll_eq(kVp)) {
      EXPECT_EQ(e->kind, chip::EventKind::kDescriptorDone);
      ++done;
    }
  return done;
}

// A routed fabric of kFabric.
std::unique_ptr<SimFabric> routed() {
  auto f = testing::make(kFabric);
  testing::program_minimal_routes(*f);
  return f;
}

TEST(SimCredits, NinetyPercentUniformLoadLosesNothingAndNeverOverrunsABuffer) {
  auto f = routed();
  UniformLoad load;
  load.f = f.get();
  const Time duration = 30 * kMicrosecond;
  load.start(duration);
  // The invariant, every 200 ns of the loaded period.
  unsigned checks = 0;
  std::function<void()> check = [&] {
    if (check_credits(*f) > 0) ++checks;
    if (f->sim().now() + 200 * kNanosecond < load.end)
      f->sim().schedule_fn_in(200 * kNanosecond, [&] { check(); });
  };
  f->sim().schedule_fn_in(200 * kNanosecond, [&] { check(); });
  f->sim().run();
  EXPECT_GE(checks, 100u);
  ASSERT_GT(load.posted, 1000u);

  const SimStats& s = f->stats();
  EXPECT_EQ(s.credit_violations, 0u);
  EXPECT_EQ(s.packets_dropped, 0u);
  EXPECT_EQ(s.data_discarded, 0u);
  // The buffers filled: senders waited for credits (hot destinations back up into the fabric).
  EXPECT_GT(s.credit_stalls, 0u);
  // Every credit came home: the fabric is empty again and every buffer with it.
  expect_drained(*f);
  // Every put the NICs took completed, successfully, exactly once.
  EXPECT_EQ(completions(*f), load.posted);
  // Per-VC counters: write data on VC0, acks on VC2, nothing else from data.
  uint64_t vc0 = 0, vc2 = 0, other = 0;
  for (uint32_t v = 0; v < f->topology().num_nodes(); ++v)
    for (uint8_t p = 0; p < f->topology().num_ports(v); ++p) {
      const auto& tx = f->chip(v).port(p).vc.tx_packets;
      vc0 += tx[0];
      vc2 += tx[2];
      other += tx[1] + tx[4] + tx[5];
    }
  EXPECT_EQ(vc0 + vc2, s.data_packets_sent);
  EXPECT_EQ(other, 0u);
  EXPECT_GT(vc2, 0u);
}

TEST(SimCredits, ManagementWaitsOnlyForTheDataPacketOnTheWireAtEachOutput) {
  const uint32_t server = 0;  // NIC index; it sends no data, so its SDQs serve management alone
  ProbeSpec spec;
  spec.count = 4;
  auto idle = routed();
  const auto& topo = idle->topology();
  spec.server_nic = topo.nic_node(server);
  // A spine: the server's leaf, then the spine; back through the leaf.
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    if (!topo.is_nic(v) && topo.bfs_distances(spec.server_nic)[v] == 2) spec.target = v;
  auto quiet = run_probe(*idle, spec);
  ASSERT_TRUE(quiet.ok()) << quiet.error().to_string();
  EXPECT_DOUBLE_EQ(quiet->min_us, quiet->max_us);  // deterministic without traffic

  auto busy = routed();
  UniformLoad load;
  load.f = busy.get();
  load.quiet = server;
  load.start(60 * kMicrosecond);
  spec.count = 5;  // about 8 us each: all while the load runs
  auto loaded = run_probe(*busy, spec);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(busy->stats().credit_violations, 0u);
  EXPECT_GT(busy->stats().credit_stalls, 0u);
  // Outputs a request and its response pass: the server NIC's, each NRC's on the way there
  // (the target absorbs it), the target's and each NRC's on the way back.
  const unsigned outputs = 2 + 2 * loaded->hops;
  const double per_output_us = to_us(busy->timing().serialisation(wire::kMaxDataPacketFlits));
  EXPECT_GT(loaded->max_us, quiet->max_us);  // it did meet data on the wire
  EXPECT_LE(loaded->max_us, quiet->max_us + outputs * per_output_us + 1e-6)
      << "outputs " << outputs << ", a data packet's wire time " << per_output_us << " us";
  EXPECT_GE(loaded->min_us, quiet->min_us - 1e-6);
}

// Gets beside puts: read requests on VC0, read responses on VC1, acks on VC2, every VC with
// its own share of every buffer; at 90% load every transfer completes.
TEST(SimCredits, GetsAndPutsUnderLoadCompleteOnTheirOwnVcs) {
  auto f = routed();
  UniformLoad load;
  load.f = f.get();
  load.gets_too = true;
  load.start(20 * kMicrosecond);
  f->sim().run();
  ASSERT_GT(load.posted, 1000u);
  EXPECT_EQ(f->stats().credit_violations, 0u);
  EXPECT_EQ(f->stats().packets_dropped, 0u);
  EXPECT_EQ(completions(*f), load.posted);
  std::array<uint64_t, chip::kNumVcs> per_vc{};
  for (uint32_t v = 0; v < f->topology().num_nodes(); ++v)
    for (uint8_t p = 0; p < f->topology().num_ports(v); ++p)
      for (uint8_t vc = 0; vc < chip::kNumVcs; ++vc)
        per_vc[vc] += f->chip(v).port(p).vc.tx_packets[vc];
  EXPECT_GT(per_vc[0], 0u);
  EXPECT_GT(per_vc[1], 0u);  // read responses
  EXPECT_GT(per_vc[2], 0u);  // acks
  expect_drained(*f);
}

// Every NIC sends to one: the hotspot's link limits them all, its buffers and then the ones
// before them fill back to the senders (tree saturation), and each output waits for credits
// that come only as the one after it moves. When the senders stop, all of it drains.
TEST(SimCredits, AHotspotBacksUpToTheSendersAndDrains) {
  auto f = routed();
  UniformLoad load;
  load.f = f.get();
  load.hotspot = 0;
  load.quiet = 0;
  load.start(10 * kMicrosecond);
  f->sim().run();
  ASSERT_GT(load.posted, 100u);
  EXPECT_GT(f->stats().credit_stalls, 100u);
  EXPECT_EQ(f->stats().credit_violations, 0u);
  EXPECT_EQ(f->stats().packets_dropped, 0u);
  EXPECT_EQ(completions(*f), load.posted);
  expect_drained(*f);
}

// A link cut and mended under load: what was on it is lost with it, the credits start over at
// each training, and no stale credit is counted; traffic goes round it meanwhile and over it
// again afterwards; every buffer and credit ends at zero.
TEST(SimCredits, ALinkCutAndMendedUnderLoadStartsItsCreditsOver) {
  auto f = routed();
  const auto& t = f->topology();
  const auto dist = t.bfs_distances(t.nic_node(0));
  fabric::PortRef up{fabric::kNoNode, 0};  // NIC 0's leaf's link to a spine
  for (uint32_t v = 0; v < t.num_nodes() && up.node == fabric::kNoNode; ++v) {
    if (t.is_nic(v) || dist[v] != 1) continue;
    for (uint8_t p = 0; p < t.num_ports(v); ++p)
      if (auto q = t.peer({v, p}); q && !t.is_nic(q->node)) up = {v, p};
  }
  ASSERT_NE(up.node, fabric::kNoNode);
  UniformLoad load;
  load.f = f.get();
  load.start(30 * kMicrosecond);
  const Time t0 = f->sim().now();
  uint64_t sent_before_cut = 0;
  f->sim().schedule_fn_at(t0 + 10 * kMicrosecond, [&] {
    sent_before_cut = f->chip(up.node).port(up.port).vc.tx_packets[0];
    EXPECT_TRUE(f->set_link(up, false).ok());
  });
  f->sim().schedule_fn_at(t0 + 15 * kMicrosecond, [&] { EXPECT_TRUE(f->set_link(up, true).ok()); });
  f->sim().run();
  EXPECT_GT(sent_before_cut, 0u);
  EXPECT_GT(f->chip(up.node).port(up.port).vc.tx_packets[0], sent_before_cut);  // used again
  EXPECT_EQ(f->stats().credit_violations, 0u);
  expect_drained(*f);
}

}  // namespace
}  // namespace galaxy::sim
