// Datelines at work, packet by packet (and a dragonfly's global links as datelines, below): a
// simulated 4x4 torus brought up as the management server does it (discovery, `dor`, the tables and
// the ports' VC rules loaded over management), then every NIC streams puts to the NIC two hops on
// along its x ring, so every ring link is oversubscribed and its buffers fill. With the datelines
// every put completes and every buffer drains; without them (`dor:datelines=0`, one class) the
// rings' buffers wait on each other in a cycle and traffic stops for good — the deadlock the
// channel-dependency check predicts.
#include <gtest/gtest.h>

#include <functional>

#include "chip/data_vc.h"
#include "engine/sim/sim_fabric.h"
#include "nm/route_load.h"
#include "nm/routing.h"
#include "nmd/session.h"

namespace galaxy::nmd {
namespace {

constexpr uint8_t kVp = chip::kPioVps;  // a DMA VP
constexpr uint64_t kSrc = 0x100000;
constexpr uint64_t kDst = 0x400000;
constexpr uint32_t kPutBytes = 64 * 1024;
constexpr int kPutsPerNic = 8;

struct Outcome {
  uint64_t posted = 0;
  uint64_t completed = 0;
  uint64_t flits_left = 0;      // in input buffers once the simulation has nothing more to do
  uint64_t class1_packets = 0;  // sent on VC4 or VC5
  bool deadlock_free = false;   // as verify_routes says
  uint64_t vc_rule_packets = 0;
};

// Each NIC's target, from the fabric's plan.
using Pattern = std::function<uint32_t(const fabric::Topology&, uint32_t nic)>;

Outcome stream(const std::string& fabric, const std::string& engine, const Pattern& target) {
  Outcome out;
  SessionOptions so;
  so.fabric = fabric;
  auto s = open_discovered_session(so);
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  if (!s.ok()) return out;
  const nm::FabricMap& map = s->discovery.map;
  auto routes = nm::compute_routes(map, engine);
  EXPECT_TRUE(routes.ok()) << routes.error().to_string();
  if (!routes.ok()) return out;
  out.deadlock_free = nm::verify_routes(map, *routes).deadlock_free;
  auto load = nm::load_routes(*s->requester, map, *routes);
  EXPECT_TRUE(load.ok() && load->failed == 0);
  if (!load.ok()) return out;
  out.vc_rule_packets = load->vc_rule_packets;

  sim::SimFabric& f = *s->fabric;
  const fabric::Topology& t = f.topology();
  std::vector<uint32_t> src_key, dst_key;
  for (uint32_t i = 0; i < t.num_nics(); ++i) {
    src_key.push_back(f.register_memory(t.nic_node(i), kSrc, kPutBytes, chip::kAccessRead).value());
    dst_key.push_back(
        f.register_memory(t.nic_node(i), kDst, kPutBytes, chip::kAccessWrite).value());
  }
  std::vector<uint32_t> index(t.num_nodes(), 0);
  for (uint32_t i = 0; i < t.num_nics(); ++i) index[t.nic_node(i)] = i;
  for (uint32_t i = 0; i < t.num_nics(); ++i) {
    const uint32_t d = target(t, t.nic_node(i));
    for (int k = 0; k < kPutsPerNic; ++k) {
      wire::RdmaDescriptor r;
      r.op = wire::RdmaOp::kWrite;
      r.remote_node = static_cast<uint16_t>(f.chip(d).chip_id());
      r.remote_vp = kVp;
      r.length = kPutBytes;
      r.local_address = kSrc;
      r.local_key = src_key[i];
      r.remote_address = kDst;
      r.remote_key = dst_key[index[d]];
      r.local_cq = true;
      EXPECT_TRUE(f.post_rdma(t.nic_node(i), kVp, r).ok());
      ++out.posted;
    }
  }
  f.sim().run();  // until nothing more can happen
  for (uint32_t i = 0; i < t.num_nics(); ++i)
    while (auto e = f.nic(t.nic_node(i)).poll_eq(kVp)) {
      EXPECT_EQ(e->kind, chip::EventKind::kDescriptorDone);
      ++out.completed;
    }
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      out.flits_left += f.chip(v).port(p).vc.buffered.total();
      out.class1_packets += f.chip(v).port(p).vc.tx_packets[4] + f.chip(v).port(p).vc.tx_packets[5];
    }
  EXPECT_EQ(f.stats().packets_dropped, 0u);
  EXPECT_EQ(f.stats().credit_violations, 0u);
  return out;
}

// The NIC two hops on in +x: NICs on port 0, then -x, +x, -y, +y (docs/topologies.md).
uint32_t two_on_in_x(const fabric::Topology& t, uint32_t nic) {
  uint32_t nrc = t.peer({nic, 0})->node;
  for (int i = 0; i < 2; ++i) nrc = t.peer({nrc, 2})->node;
  return t.peer({nrc, 0})->node;
}

TEST(SimTorusDeadlock, DatelinesKeepASaturatedTorusMovingAndOneClassDeadlocks) {
  const Outcome with = stream("sim:torus:4x4", "dor", two_on_in_x);
  EXPECT_TRUE(with.deadlock_free);
  EXPECT_GT(with.vc_rule_packets, 0u);
  EXPECT_EQ(with.completed, with.posted) << "every put completes";
  EXPECT_EQ(with.flits_left, 0u) << "every buffer drains";
  EXPECT_GT(with.class1_packets, 0u) << "packets crossed the datelines on class 1";

  const Outcome without = stream("sim:torus:4x4", "dor:datelines=0", two_on_in_x);
  EXPECT_FALSE(without.deadlock_free);
  EXPECT_EQ(without.vc_rule_packets, 0u);
  EXPECT_EQ(without.class1_packets, 0u);
  EXPECT_LT(without.completed, without.posted) << "traffic stopped for good";
  EXPECT_GT(without.flits_left, 0u) << "packets stuck in the rings' buffers";
  std::printf(
      "4x4 torus, %llu puts of %u KiB two hops along x: with datelines %llu completed; "
      "without %llu completed, %llu flits stuck\n",
      static_cast<unsigned long long>(with.posted), kPutBytes / 1024,
      static_cast<unsigned long long>(with.completed),
      static_cast<unsigned long long>(without.completed),
      static_cast<unsigned long long>(without.flits_left));
}

// The dragonfly's adversarial pattern: every NIC of group g sends to the NIC in the same place of
// group g + 1, so all of a group's traffic crosses its one global link to the next group and the
// local links on both sides. With the `dragonfly` engine (global links as datelines) every put
// completes and the fabric drains; packets beyond a global link ran on class 1.
TEST(SimDragonflyGroupShift, TheDragonflyEngineDrainsASaturatingGroupShift) {
  auto next_group = [](const fabric::Topology& t, uint32_t nic) {
    // dragonfly:a=4,p=2,h=2: 9 groups of 4 routers with 2 NICs each, NICs in group order.
    const uint32_t per_group = 4 * 2, n = t.num_nics();
    uint32_t index = 0;
    while (t.nic_node(index) != nic) ++index;
    return t.nic_node((index + per_group) % n);
  };
  // With the non-minimal ways too (two global links in a row, both in class 1): the same.
  for (const char* engine : {"dragonfly", "dragonfly:nonminimal=1"}) {
    SCOPED_TRACE(engine);
    const Outcome o = stream("sim:dragonfly:a=4,p=2,h=2", engine, next_group);
    EXPECT_TRUE(o.deadlock_free);
    EXPECT_GT(o.vc_rule_packets, 0u);
    EXPECT_EQ(o.completed, o.posted);
    EXPECT_EQ(o.flits_left, 0u);
    EXPECT_GT(o.class1_packets, 0u);
  }
}

}  // namespace
}  // namespace galaxy::nmd
