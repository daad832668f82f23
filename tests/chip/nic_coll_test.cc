// The NIC's collective engine (chip/coll.h): CP counters, CP-triggered descriptors, CPs into the
// MPQ, data replaced and combined, and the errors of each.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "chip/nic.h"
#include "chip/registers.h"

namespace galaxy::chip {
namespace {

constexpr uint8_t kVp = 2;  // a PIO VP: the descriptors sit on the chip

class FlatMemory final : public HostMemory {
 public:
  Status read(uint64_t phys, std::span<uint8_t> out) override {
    if (phys + out.size() > bytes.size()) return make_error(Code::kOutOfRange, 1, "phys");
    std::copy_n(bytes.begin() + static_cast<ptrdiff_t>(phys), out.size(), out.begin());
    return {};
  }
  Status write(uint64_t phys, std::span<const uint8_t> in) override {
    if (phys + in.size() > bytes.size()) return make_error(Code::kOutOfRange, 1, "phys");
    std::copy(in.begin(), in.end(), bytes.begin() + static_cast<ptrdiff_t>(phys));
    return {};
  }
  std::vector<uint8_t> bytes = std::vector<uint8_t>(4 * kAttPageBytes, 0);
};

struct CollNode {
  Nic nic;
  FlatMemory mem;
  uint32_t key = 0;
  explicit CollNode(uint16_t id) {
    nic.set_chip_id(id);
    nic.attach_host_memory(&mem);
    std::vector<uint64_t> frames{0, kAttPageBytes};
    key = nic.att().register_region(0x10000, 2 * kAttPageBytes, kAccessWrite, frames).value();
  }
};

CollDescriptor cp_to(uint16_t node, uint16_t trigger = 0) {
  CollDescriptor d;
  d.kind = CollDescriptor::Kind::kCp;
  d.dest_node = node;
  d.dest_vp = kVp;
  d.trigger = trigger;
  return d;
}

CollDescriptor local(uint16_t trigger, uint32_t key = 0, uint8_t length = 0) {
  CollDescriptor d;
  d.kind = CollDescriptor::Kind::kLocal;
  d.trigger = trigger;
  d.notify = true;
  d.key = key;
  d.address = 0x10000;
  d.length = length;
  return d;
}

// Runs every NIC's startable work and carries CPs between them until nothing moves; the
// engines' part (chip/nic.h NicWork), done at once.
void run(std::map<uint16_t, CollNode*> nodes) {
  for (bool moved = true; moved;) {
    moved = false;
    for (auto& [id, n] : nodes) {
      while (auto w = n->nic.next_work()) {
        moved = true;
        if (w->kind == NicWork::Kind::kRejected) {
          n->nic.complete(w->vp, false, w->error.id);
          continue;
        }
        n->nic.complete(w->vp, true);
        if (w->kind != NicWork::Kind::kMp) continue;
        ASSERT_TRUE(w->packet);
        ASSERT_TRUE(w->packet->head.kind == wire::PacketKind::kCp ||
                    w->packet->head.kind == wire::PacketKind::kMp);
        nodes.at(w->packet->head.dest_node)->nic.receive_packet(w->packet->flits());
      }
    }
  }
}

uint64_t done_events(Nic& n) {
  uint64_t k = 0;
  while (auto e = n.poll_eq(kVp)) k += e->kind == EventKind::kDescriptorDone;
  return k;
}

TEST(NicCollTest, TriggeredDescriptorWaitsForItsCountThenTheCounterDrops) {
  CollNode a(1), b(2);
  // b: a completion after 3 CPs; a sends 2, then 2 more.
  ASSERT_TRUE(b.nic.post_coll(kVp, local(3)).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  run({{1, &a}, {2, &b}});
  EXPECT_EQ(b.nic.cp_counter(kVp), 2u);
  EXPECT_TRUE(b.nic.waits_for_cp(kVp));
  EXPECT_EQ(done_events(b.nic), 0u);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  run({{1, &a}, {2, &b}});
  EXPECT_EQ(done_events(b.nic), 1u);
  EXPECT_EQ(b.nic.cp_counter(kVp), 1u);  // 4 arrived, 3 taken
  EXPECT_EQ(b.nic.read_register(reg::vp_register(kVp, reg::vp::kCpCounter)).value, 1u);
  EXPECT_EQ(b.nic.read_register(reg::vp_register(kVp, reg::vp::kCpReceived)).value, 4u);
  EXPECT_EQ(b.nic.read_register(reg::vp_register(kVp, reg::vp::kTriggered)).value, 1u);
}

TEST(NicCollTest, DescriptorsBehindATriggerFollowItAndTheNextTriggerWaitsAgain) {
  CollNode a(1), b(2), c(3);
  // b forwards to c when a's CP comes: [T=1 cp->c][cp->c][T=1 local]
  ASSERT_TRUE(b.nic.post_coll(kVp, cp_to(3, 1)).ok());
  ASSERT_TRUE(b.nic.post_coll(kVp, cp_to(3)).ok());
  ASSERT_TRUE(b.nic.post_coll(kVp, local(1)).ok());
  ASSERT_TRUE(c.nic.post_coll(kVp, local(2)).ok());
  run({{1, &a}, {2, &b}, {3, &c}});
  EXPECT_EQ(done_events(c.nic), 0u);
  ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  run({{1, &a}, {2, &b}, {3, &c}});
  EXPECT_EQ(done_events(c.nic), 1u);
  EXPECT_EQ(done_events(b.nic), 0u);  // its local waits for a second CP
  ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  run({{1, &a}, {2, &b}, {3, &c}});
  EXPECT_EQ(done_events(b.nic), 1u);
}

TEST(NicCollTest, ReplacingCpDataGoOnThroughTheTreeAndIntoHostMemory) {
  CollNode root(1), mid(2), leaf(3);
  CollDescriptor r = cp_to(2);
  r.cp_flags = kCpFlagReplace;
  r.length = 5;
  std::memcpy(r.data.data(), "hello", 5);
  CollDescriptor fwd = cp_to(3, 1);
  fwd.cp_flags = kCpFlagReplace;
  fwd.data_from = CollData::kCp;
  CollDescriptor mid_local = local(0, mid.key, 5);
  mid_local.data_from = CollData::kCp;
  CollDescriptor leaf_local = local(1, leaf.key, 5);
  leaf_local.data_from = CollData::kCp;
  ASSERT_TRUE(mid.nic.post_coll(kVp, fwd).ok());
  ASSERT_TRUE(mid.nic.post_coll(kVp, mid_local).ok());
  ASSERT_TRUE(leaf.nic.post_coll(kVp, leaf_local).ok());
  ASSERT_TRUE(root.nic.post_coll(kVp, r).ok());
  run({{1, &root}, {2, &mid}, {3, &leaf}});
  EXPECT_EQ(done_events(mid.nic), 1u);
  EXPECT_EQ(done_events(leaf.nic), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(mid.mem.bytes.data()), 5), "hello");
  EXPECT_EQ(std::string(reinterpret_cast<char*>(leaf.mem.bytes.data()), 5), "hello");
}

TEST(NicCollTest, ACpsDataReplaceThoseOfAQueuedMpDescriptor) {
  CollNode a(1), b(2), c(3);
  CollDescriptor mp;
  mp.kind = CollDescriptor::Kind::kMp;
  mp.dest_node = 3;
  mp.dest_vp = kVp;
  mp.trigger = 1;
  mp.data_from = CollData::kCp;
  mp.length = 3;
  std::memcpy(mp.data.data(), "old", 3);
  ASSERT_TRUE(b.nic.post_coll(kVp, mp).ok());
  CollDescriptor r = cp_to(2);
  r.cp_flags = kCpFlagReplace;
  r.length = 4;
  std::memcpy(r.data.data(), "new!", 4);
  ASSERT_TRUE(a.nic.post_coll(kVp, r).ok());
  run({{1, &a}, {2, &b}, {3, &c}});
  auto e = c.nic.poll_mpq(kVp);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, wire::PacketKind::kMp);  // an ordinary MP, its data the CP's
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(e->data.data()), e->length), "new!");
  EXPECT_EQ(e->src_node, 2);
  EXPECT_EQ(c.nic.cp_counter(kVp), 0u);  // an MP counts nothing
  CollDescriptor bad = mp;
  bad.cp_flags = kCpFlagToMpq;
  EXPECT_EQ(b.nic.post_coll(kVp, bad).error().id, 2121);
}

TEST(NicCollTest, CombiningCpsReduceInTheNic) {
  CollNode a(1), b(2), root(3);
  auto contribution = [](int64_t x, double y) {
    CollDescriptor d = cp_to(3);
    d.cp_op = CombineOp::kSumI64;
    d.length = 16;
    std::memcpy(d.data.data(), &x, 8);
    std::memcpy(d.data.data() + 8, &y, 8);  // summed as int64 bits: only element 0 is read
    return d;
  };
  ASSERT_TRUE(a.nic.post_coll(kVp, contribution(5, 0)).ok());
  ASSERT_TRUE(b.nic.post_coll(kVp, contribution(-12, 0)).ok());
  CollDescriptor mine = local(2, root.key, 16);
  mine.data_from = CollData::kCombined;
  mine.op = CombineOp::kSumI64;
  const int64_t own = 100;
  std::memcpy(mine.data.data(), &own, 8);
  ASSERT_TRUE(root.nic.post_coll(kVp, mine).ok());
  run({{1, &a}, {2, &b}, {3, &root}});
  EXPECT_EQ(done_events(root.nic), 1u);
  int64_t sum = 0;
  std::memcpy(&sum, root.mem.bytes.data(), 8);
  EXPECT_EQ(sum, 93);
}

TEST(NicCollTest, CombineOperationsOverInt64AndDouble) {
  std::array<uint8_t, 16> acc{}, in{};
  auto put = [](std::array<uint8_t, 16>& b, auto x, auto y) {
    std::memcpy(b.data(), &x, 8);
    std::memcpy(b.data() + 8, &y, 8);
  };
  auto get_d = [](const std::array<uint8_t, 16>& b, int i) {
    double v;
    std::memcpy(&v, b.data() + 8 * i, 8);
    return v;
  };
  put(acc, 1.5, -2.0);
  put(in, 0.25, 7.0);
  combine(CombineOp::kMaxF64, acc, in);
  EXPECT_EQ(get_d(acc, 0), 1.5);
  EXPECT_EQ(get_d(acc, 1), 7.0);
  combine(CombineOp::kMinF64, acc, in);
  EXPECT_EQ(get_d(acc, 0), 0.25);
  combine(CombineOp::kSumF64, acc, in);
  EXPECT_EQ(get_d(acc, 0), 0.5);
  EXPECT_EQ(get_d(acc, 1), 14.0);
  put(acc, INT64_MAX, int64_t{-3});
  put(in, int64_t{1}, int64_t{-4});
  combine(CombineOp::kSumI64, acc, in);  // wraps, no undefined behaviour
  int64_t x;
  std::memcpy(&x, acc.data(), 8);
  EXPECT_EQ(x, INT64_MIN);
  combine(CombineOp::kMinI64, acc, in);
  std::memcpy(&x, acc.data() + 8, 8);
  EXPECT_EQ(x, -7);
}

TEST(NicCollTest, CpWrittenIntoTheMpq) {
  CollNode a(1), b(2);
  CollDescriptor d = cp_to(2);
  d.cp_flags = kCpFlagToMpq;
  d.length = 3;
  d.data = {7, 8, 9};
  ASSERT_TRUE(a.nic.post_coll(kVp, d).ok());
  run({{1, &a}, {2, &b}});
  auto e = b.nic.poll_mpq(kVp);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, wire::PacketKind::kCp);
  EXPECT_EQ(e->length, 3);
  EXPECT_EQ(e->data[2], 9);
  EXPECT_EQ(e->src_node, 1);
  EXPECT_EQ(b.nic.cp_counter(kVp), 1u);
}

TEST(NicCollTest, MembersThatDisagreeOnTheLengthGetAnError) {
  CollNode root(1), leaf(2);
  CollDescriptor r = cp_to(2);
  r.cp_flags = kCpFlagReplace;
  r.length = 8;
  CollDescriptor l = local(1, leaf.key, 4);
  l.data_from = CollData::kCp;
  ASSERT_TRUE(leaf.nic.post_coll(kVp, l).ok());
  ASSERT_TRUE(root.nic.post_coll(kVp, r).ok());
  run({{1, &root}, {2, &leaf}});
  auto e = leaf.nic.poll_eq(kVp);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, EventKind::kDescriptorError);
  EXPECT_EQ(e->error_id, 2119);
  EXPECT_EQ(e->op, DescriptorOp::kLocal);
}

TEST(NicCollTest, BadDescriptorsAreRefusedNamingTheField) {
  Nic n;
  CollDescriptor d = cp_to(2);
  d.increment = 0;
  auto s = n.post_coll(kVp, d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("increment = 0"), std::string::npos);
  d = cp_to(2);
  d.length = 121;
  EXPECT_EQ(n.post_coll(kVp, d).error().id, 2103);
  d = cp_to(2);
  d.cp_op = CombineOp::kSumF64;
  d.length = 12;
  EXPECT_EQ(n.post_coll(kVp, d).error().id, 2104);
  d = local(0);
  d.data_from = CollData::kCombined;
  EXPECT_EQ(n.post_coll(kVp, d).error().id, 2105);
  d = cp_to(2);
  d.cp_flags = 0x4;  // the data packets' in-transfer bit
  EXPECT_EQ(n.post_coll(kVp, d).error().id, 2107);
  EXPECT_EQ(n.post_coll(40, cp_to(2)).error().id, 2040);
  EXPECT_EQ(n.next_sequence(kVp), 0u);  // nothing was queued
}

TEST(NicCollTest, MalformedCpPacketsAreDiscardedAndChangeNothing) {
  Nic n;
  n.set_chip_id(2);
  wire::DataPacket p;
  p.head.kind = wire::PacketKind::kCp;
  p.head.dest_node = 2;
  p.head.dest_vp = kVp;
  p.head.src_node = 1;
  p.head.tag = 0;  // increment 0
  p.head.vc = data_vc(p.head.kind);
  auto flits = wire::encode_data_packet(p).value();
  EXPECT_EQ(n.receive_packet(flits), NicRx::kDiscarded);
  p.head.tag = 1;
  p.ext.key = 99;  // no such combining operation
  flits = wire::encode_data_packet(p).value();
  EXPECT_EQ(n.receive_packet(flits), NicRx::kDiscarded);
  EXPECT_EQ(n.error_buffer().error_id, 2111);
  EXPECT_EQ(n.cp_counter(kVp), 0u);
  p.ext.key = 0;
  flits = wire::encode_data_packet(p).value();
  EXPECT_EQ(n.receive_packet(flits), NicRx::kDelivered);
  EXPECT_EQ(n.cp_counter(kVp), 1u);
}

TEST(NicCollTest, DataThatFindNoRoomAreDiscardedAndCounted) {
  CollNode a(1), b(2);
  CollDescriptor d = cp_to(2);
  d.cp_flags = kCpFlagReplace;
  d.length = 1;
  for (size_t i = 0; i <= kCpLatchDepth; ++i) ASSERT_TRUE(a.nic.post_coll(kVp, d).ok());
  run({{1, &a}, {2, &b}});
  EXPECT_EQ(b.nic.cp_counter(kVp), kCpLatchDepth);
  EXPECT_EQ(b.nic.read_register(reg::vp_register(kVp, reg::vp::kCpDiscarded)).value, 1u);
  EXPECT_EQ(b.nic.error_buffer().error_id, 2118);
}

TEST(NicCollTest, TriggeredRdmaTakesItsCountFromTheDescriptor) {
  CollNode a(1), b(2);
  wire::RdmaDescriptor d;
  d.op = wire::RdmaOp::kImmediate;
  d.remote_node = 1;
  d.remote_vp = kVp;
  d.length = 4;
  d.remote_address = 0x10000;
  d.remote_key = a.key;
  d.cp_count = 2;
  d.immediate_data = {0xC0, 0xFF, 0xEE, 0x01};
  ASSERT_TRUE(b.nic.post_rdma(kVp, wire::encode_rdma_descriptor(d).value()).ok());
  EXPECT_FALSE(b.nic.next_work());
  EXPECT_TRUE(b.nic.waits_for_cp(kVp));
  ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  run({{1, &a}, {2, &b}});
  EXPECT_FALSE(b.nic.next_work());  // one CP of two
  ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  // The second CP reaches b by hand, so that the RDMA's start is seen here.
  auto w = a.nic.next_work();
  ASSERT_TRUE(w && w->packet);
  a.nic.complete(kVp, true);
  EXPECT_EQ(b.nic.receive_packet(w->packet->flits()), NicRx::kDelivered);
  auto started = b.nic.next_work();
  ASSERT_TRUE(started);
  EXPECT_EQ(started->kind, NicWork::Kind::kRdma);
  EXPECT_EQ(b.nic.cp_counter(kVp), 0u);
  auto packet = b.nic.next_packet(DmaEngine::kLocalRead);
  ASSERT_TRUE(packet);
  a.nic.receive_packet(packet->flits());
  EXPECT_EQ(a.mem.bytes[0], 0xC0);
  EXPECT_EQ(a.mem.bytes[3], 0x01);
}

TEST(NicCollTest, ResetDropsWhatACollectiveLeftBehind) {
  CollNode a(1), b(2);
  ASSERT_TRUE(b.nic.post_coll(kVp, local(5)).ok());
  ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  run({{1, &a}, {2, &b}});
  EXPECT_EQ(b.nic.cp_counter(kVp), 1u);
  b.nic.reset_coll(kVp);
  EXPECT_EQ(b.nic.cp_counter(kVp), 0u);
  EXPECT_EQ(b.nic.outstanding(kVp), 0u);
  EXPECT_FALSE(b.nic.waits_for_cp(kVp));
  ASSERT_TRUE(b.nic.post_coll(kVp, local(1)).ok());
  ASSERT_TRUE(a.nic.post_coll(kVp, cp_to(2)).ok());
  run({{1, &a}, {2, &b}});
  EXPECT_EQ(done_events(b.nic), 1u);
}

}  // namespace
}  // namespace galaxy::chip
