#include "engine/live/segment.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "engine/live/daemon.h"
#include "engine/live/forward.h"

namespace galaxy::live {
namespace {

struct Cell {
  std::atomic<uint16_t> seq;
  uint32_t value;
};

TEST(MpscRing, FifoFullAndSixteenBitTurnsWrap) {
  auto* ring = new MpscRing<Cell, 8>();
  ring->init();
  uint64_t pos;
  // 70,000 items through an 8-cell ring: the 16-bit turn numbers wrap many times.
  uint32_t next_in = 0, next_out = 0;
  while (next_out < 70000) {
    while (Cell* c = ring->claim(&pos)) {
      c->value = next_in++;
      ring->publish(c, pos);
    }
    EXPECT_EQ(ring->size(), 8u);
    EXPECT_EQ(ring->claim(&pos), nullptr) << "full";
    while (Cell* c = ring->peek()) {
      ASSERT_EQ(c->value, next_out++);
      ring->pop();
    }
  }
  EXPECT_EQ(ring->peek(), nullptr);
  delete ring;
}

// The MPQ: each cell is a wire MP whose header word, written last, carries the ring's lap; a
// cell of the previous lap is never taken for a new one, and the header reads back as written.
TEST(MpscRing, MpqCellsCarryTheWireHeaderAndTheLap) {
  auto* ring = new MpqRing();
  ring->init();
  EXPECT_EQ(ring->peek(), nullptr);
  uint64_t pos;
  uint32_t next_in = 0, next_out = 0;
  while (next_out < 20 * kMpqDepth) {  // 20 laps: the 3-bit lap count wraps twice
    for (uint32_t k = 0; k < 100; ++k) {
      MpqCell* c = ring->claim(&pos);
      if (!c) break;
      std::memcpy(c->data, &next_in, sizeof next_in);
      const uint8_t len = static_cast<uint8_t>(4 + next_in % 117);
      ring->publish(c, pos,
                    wire::mp_word::make(wire::MpKind::kUser, next_in & 0xF, 5, 7,
                                        static_cast<uint16_t>(next_in), len, 0));
      ++next_in;
    }
    for (uint32_t k = 0; k < 60; ++k) {
      MpqCell* c = ring->peek();
      if (!c) break;
      const uint64_t w = c->header.load();
      uint32_t v;
      std::memcpy(&v, c->data, sizeof v);
      ASSERT_EQ(v, next_out);
      EXPECT_EQ(wire::mp_word::src_node(w), static_cast<uint16_t>(next_out));
      EXPECT_EQ(wire::mp_word::length(w), 4 + next_out % 117);
      EXPECT_EQ(wire::mp_word::flags(w), next_out & 0xF);
      EXPECT_EQ(wire::mp_word::target_vp(w), 5);
      EXPECT_EQ(wire::mp_word::src_vp(w), 7);
      EXPECT_NE(wire::mp_word::lap(w), 0);
      ring->pop();
      ++next_out;
    }
  }
  EXPECT_EQ(ring->size(), next_in - next_out);
  delete ring;
}

TEST(MpscRing, ManyProducersDeliverEachItemOnceInProducerOrder) {
  auto* ring = new MpscRing<Cell, 64>();
  ring->init();
  constexpr uint32_t kProducers = 3, kEach = 20000;
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p)
    producers.emplace_back([ring, p] {
      for (uint32_t i = 0; i < kEach; ++i) {
        uint64_t pos;
        Cell* c;
        while (!(c = ring->claim(&pos))) std::this_thread::yield();
        c->value = p << 24 | i;
        ring->publish(c, pos);
      }
    });
  std::vector<uint32_t> next(kProducers, 0);
  for (uint32_t got = 0; got < kProducers * kEach;) {
    Cell* c = ring->wait(1000, monotonic_ns() + 5'000'000'000);
    ASSERT_NE(c, nullptr);
    const uint32_t p = c->value >> 24, i = c->value & 0xFFFFFF;
    ASSERT_LT(p, kProducers);
    ASSERT_EQ(i, next[p]++) << "producer " << p;
    ring->pop();
    ++got;
  }
  for (auto& t : producers) t.join();
  delete ring;
}

TEST(MpscRing, WaitTimesOutAndWakesOnPublish) {
  auto* ring = new MpscRing<Cell, 8>();
  ring->init();
  const uint64_t t0 = monotonic_ns();
  EXPECT_EQ(ring->wait(1000, t0 + 20'000'000), nullptr);
  EXPECT_GE(monotonic_ns() - t0, 20'000'000u);
  std::thread producer([ring] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    uint64_t pos = 0;
    Cell* c = ring->claim(&pos);
    c->value = 7;
    ring->publish(c, pos);
  });
  Cell* c = ring->wait(1000, UINT64_MAX);  // sleeps on the futex, woken by the publish
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->value, 7u);
  producer.join();
  delete ring;
}

class SegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = parse_live_fabric("live:fattree:k=4,levels=2,name=segtest" + std::to_string(getpid()) +
                           ",hosts=h1:127.0.0.1")
             .value();
    seg_ = std::move(Segment::create(f_, 0).value());
  }
  LiveFabric f_;
  std::unique_ptr<Segment> seg_;
};

TEST_F(SegmentTest, CreateDescribesTheFabricAndAttachSeesIt) {
  auto other = Segment::attach(f_.name, "h1");
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  EXPECT_EQ((*other)->num_chips(), 14u);
  EXPECT_EQ((*other)->header().num_local_nics, 8u);
  EXPECT_EQ((*other)->header().daemon_pid.load(), getpid());
  const uint32_t nic = f_.topology.nic_node(0);
  auto peer = f_.topology.peer({nic, 0}).value();
  EXPECT_EQ((*other)->peer(nic, 0).chip, peer.node);
  EXPECT_EQ((*other)->peer(nic, 0).port, peer.port);
  EXPECT_EQ((*other)->peer(nic, 0).up.load(), 1) << "links inside a host are up";
  EXPECT_NE((*other)->nic_of(nic), nullptr);
  EXPECT_EQ((*other)->nic_of(peer.node), nullptr) << "an NRC has no NIC slot";
  // Another live process owns the segment: a second daemon is refused.
  seg_->header().daemon_pid.store(getppid());
  auto twice = Segment::create(f_, 0);
  ASSERT_FALSE(twice.ok()) << "a live daemon's segment is not replaced";
  EXPECT_EQ(twice.error().id, 4712);
  seg_->header().daemon_pid.store(getpid());
  auto none = Segment::attach("nosuchfabric", "h1");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().id, 4716);
}

// What `galaxy fabric up` waits for: the links from this host's chips to the hosts it names,
// and how many of them are up at this end.
TEST(SegmentLinks, LinksToOtherHostsAreCountedByHostAndUpAtThisEnd) {
  const LiveFabric f =
      parse_live_fabric("live:fattree:k=4,levels=2,name=seglinks" + std::to_string(getpid()) +
                        ",hosts=h1:127.0.0.1:1,h2:127.0.0.1:2")
          .value();
  auto seg = Segment::create(f, 0);
  ASSERT_TRUE(seg.ok()) << seg.error().to_string();
  std::vector<fabric::PortRef> crossing;
  for (uint32_t n = 0; n < f.topology.num_nodes(); ++n)
    for (uint32_t p = 0; p < f.topology.num_ports(n); ++p)
      if (f.host_of[n] == 0 && f.crosses_hosts({n, static_cast<uint8_t>(p)}))
        crossing.push_back({n, static_cast<uint8_t>(p)});
  ASSERT_FALSE(crossing.empty());
  for (const fabric::PortRef& e : crossing) (*seg)->peer(e.node, e.port).up.store(0);
  Segment::LinkTally t = (*seg)->links_to({false, true});
  EXPECT_EQ(t.total, crossing.size());
  EXPECT_EQ(t.up, 0u);
  EXPECT_FALSE((*seg)->cross_host_links_up());
  (*seg)->peer(crossing[0].node, crossing[0].port).up.store(1);
  EXPECT_EQ((*seg)->links_to({false, true}).up, 1u);
  for (const fabric::PortRef& e : crossing) (*seg)->peer(e.node, e.port).up.store(1);
  t = (*seg)->links_to({false, true});
  EXPECT_EQ(t.up, t.total);
  EXPECT_TRUE((*seg)->cross_host_links_up());
  // Hosts not named are not counted; nor is a list shorter than the fabric's hosts.
  EXPECT_EQ((*seg)->links_to({false, false}).total, 0u);
  EXPECT_EQ((*seg)->links_to({false}).total, 0u);
}

TEST_F(SegmentTest, ForwardFollowsRouteTablesAndCountsEveryPort) {
  const fabric::Topology& t = f_.topology;
  const uint32_t a = t.nic_node(0), b = t.nic_node(1);
  auto up = t.peer({a, 0}).value();  // a's leaf NRC
  EXPECT_EQ(forward(*seg_, a, 0, b, wire::packet_traffic(128)).kind, Forwarded::Kind::kNoRoute)
      << "no tables yet";
  // The leaf received that packet and discarded it.
  EXPECT_EQ(seg_->counters(seg_->chip(up.node).local, up.port).rx.discards.load(), 1u);
  // b hangs on the same leaf: route b out of the leaf's port towards it.
  auto down = t.peer({b, 0}).value();
  ASSERT_EQ(down.node, up.node);
  seg_->route_row(seg_->chip(up.node).local, up.port)[b].store(chip::PortSet::of(down.port));
  Forwarded f = forward(*seg_, a, 0, b, wire::transfer_traffic(0, 300));
  ASSERT_EQ(f.kind, Forwarded::Kind::kDelivered);
  EXPECT_EQ(f.chip, b);
  const PortCounters& at_leaf_in = seg_->counters(seg_->chip(up.node).local, up.port);
  const PortCounters& at_leaf_out = seg_->counters(seg_->chip(up.node).local, down.port);
  EXPECT_EQ(at_leaf_in.rx.packets.load(), 1u + 3u);  // the discarded one and these
  EXPECT_EQ(at_leaf_out.tx.packets.load(), 3u);
  EXPECT_EQ(at_leaf_out.tx.bytes.load(), 300u);
  // 128 + 128 + 44 bytes: a head and an extension flit each and 24-byte flit payloads
  // (6 + 6 + 2).
  EXPECT_EQ(at_leaf_out.tx.flits.load(), 8u + 8u + 4u);
  EXPECT_EQ(seg_->counters(seg_->chip(b).local, 0).rx.packets.load(), 3u);
  // Recording instead of counting (a sender's path cache).
  std::vector<CounterLine*> lines;
  EXPECT_EQ(forward(*seg_, a, 0, b, {}, &lines).kind, Forwarded::Kind::kDelivered);
  EXPECT_EQ(lines.size(), 4u);  // NIC tx, leaf rx, leaf tx, NIC rx
  EXPECT_EQ(at_leaf_out.tx.packets.load(), 3u);
  // A link that goes down stops the packet where it is.
  seg_->peer(up.node, down.port).up.store(0);
  EXPECT_EQ(forward(*seg_, a, 0, b, wire::packet_traffic(1)).kind, Forwarded::Kind::kLinkDown);
}

TEST_F(SegmentTest, AttChecksKeyRangeAndRights) {
  NicSlot& nic = *seg_->nic_of(f_.topology.nic_node(0));
  AttEntry& e = nic.att[5];
  e.key = 0xabcd;
  e.base = 0x10000;
  e.length = 0x1000;
  e.pid = getpid();
  e.access = kAccessWrite;
  e.state.store(2);
  const uint64_t mh = (uint64_t{5} << 32) | 0xabcd;
  AttEntry got{};
  const char* why = "";
  EXPECT_EQ(check_att(nic, mh, 0x10000, 0x1000, kAccessWrite, &got, &why), OpStatus::kSuccess);
  EXPECT_EQ(got.base, 0x10000u);
  EXPECT_EQ(check_att(nic, mh ^ 1, 0x10000, 8, kAccessWrite, &got, &why), OpStatus::kAccessError);
  EXPECT_STREQ(why, "wrong memory key");
  EXPECT_EQ(check_att(nic, mh, 0x10ff9, 8, kAccessWrite, &got, &why), OpStatus::kAccessError);
  EXPECT_STREQ(why, "outside the registered range");
  EXPECT_EQ(check_att(nic, mh, 0xfff8, 16, kAccessWrite, &got, &why), OpStatus::kAccessError);
  EXPECT_EQ(check_att(nic, mh, UINT64_MAX - 4, 8, kAccessWrite, &got, &why),
            OpStatus::kAccessError);
  EXPECT_EQ(check_att(nic, mh, 0x10000, 8, kAccessRead, &got, &why), OpStatus::kAccessError);
  EXPECT_STREQ(why, "memory not registered for read");
  EXPECT_EQ(check_att(nic, uint64_t{300} << 32, 0, 1, kAccessRead, &got, &why),
            OpStatus::kAccessError);
  e.state.store(0);
  EXPECT_EQ(check_att(nic, mh, 0x10000, 8, kAccessWrite, &got, &why), OpStatus::kAccessError);
}

}  // namespace
}  // namespace galaxy::live
