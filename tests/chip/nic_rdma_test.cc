// The NIC's RDMA engine between two NICs whose packets a test pump carries, in order or
// shuffled: real descriptors in, encoded flits between, bytes in modelled host memory out.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "chip/nic.h"
#include "chip/rdma_rules.h"

namespace galaxy::chip {
namespace {

using wire::Completion;
using wire::RdmaDescriptor;
using wire::RdmaOp;

// Host memory with physical frames handed out in reverse order, so that a region's virtually
// contiguous pages are physically scattered and every access is translated page by page.
class Memory final : public HostMemory {
 public:
  static constexpr uint64_t kPages = 64;
  Memory() : bytes_(kPages * kAttPageBytes, 0) {}
  Status read(uint64_t phys, std::span<uint8_t> out) override {
    if (phys + out.size() > bytes_.size()) return make_error(Code::kOutOfRange, 1, "phys");
    std::copy_n(bytes_.begin() + static_cast<ptrdiff_t>(phys), out.size(), out.begin());
    ++reads;
    return {};
  }
  Status write(uint64_t phys, std::span<const uint8_t> in) override {
    if (phys + in.size() > bytes_.size()) return make_error(Code::kOutOfRange, 1, "phys");
    std::copy(in.begin(), in.end(), bytes_.begin() + static_cast<ptrdiff_t>(phys));
    ++writes;
    ++unflushed;
    return {};
  }
  Status flush() override {
    ++flushes;
    unflushed = 0;
    return {};
  }
  // Virtual address `va` of a region that starts at virtual page `first_vpage`.
  std::vector<uint64_t> frames(uint64_t vaddr, uint64_t length) {
    std::vector<uint64_t> f;
    for (uint64_t i = 0; i < att_pages(vaddr, length); ++i)
      f.push_back((kPages - 1 - (vaddr / kAttPageBytes + i)) * kAttPageBytes);
    return f;
  }
  uint8_t& at(uint64_t va) {
    return bytes_[(kPages - 1 - va / kAttPageBytes) * kAttPageBytes + va % kAttPageBytes];
  }
  uint64_t reads = 0, writes = 0, flushes = 0;
  uint64_t unflushed = 0;  // writes since the last flush

 private:
  std::vector<uint8_t> bytes_;
};

struct Node {
  Nic nic;
  Memory mem;
  explicit Node(uint16_t id) {
    nic.set_chip_id(id);
    nic.attach_host_memory(&mem);
  }
  uint32_t reg(uint64_t va, uint64_t len, uint32_t access) {
    auto fr = mem.frames(va, len);
    return nic.att().register_region(va, len, access, fr).value();
  }
  void fill(uint64_t va, uint64_t len, uint8_t seed) {
    for (uint64_t i = 0; i < len; ++i) mem.at(va + i) = static_cast<uint8_t>(seed + i * 7);
  }
};

// Starts every queued descriptor (a rejected one completes with its error at once).
void start_all(Node& n) {
  while (auto w = n.nic.next_work())
    if (w->kind == NicWork::Kind::kRejected) n.nic.complete(w->vp, false, w->error.id);
}

// Carries packets between two NICs until both are idle, logging each one put on the network.
// With a seed, the packets in flight arrive in a random order (an adaptive network reorders).
void carry(Node& a, Node& b, std::optional<uint64_t> shuffle_seed = std::nullopt,
           std::vector<NicPacket>* log = nullptr) {
  std::mt19937_64 rng(shuffle_seed.value_or(0));
  for (int round = 0; round < 100000; ++round) {
    start_all(a);
    start_all(b);
    std::vector<NicPacket> flight;
    for (Node* n : {&a, &b})
      for (uint8_t e = 0; e < kDmaEngines; ++e)
        while (auto p = n->nic.next_packet(static_cast<DmaEngine>(e))) flight.push_back(*p);
    if (flight.empty()) return;
    if (shuffle_seed) std::shuffle(flight.begin(), flight.end(), rng);
    for (NicPacket& p : flight) {
      if (log) log->push_back(p);
      Node& to = p.head.dest_node == a.nic.chip_id() ? a : b;
      to.nic.receive_packet(p.flits());
    }
  }
  FAIL() << "the NICs never went idle";
}

class RdmaTest : public ::testing::Test {
 protected:
  Node a{1}, b{2};
  std::vector<NicPacket> wire_log;  // every packet put on the network, in order

  Status post(Node& n, uint8_t vp, const RdmaDescriptor& d) {
    auto bytes = wire::encode_rdma_descriptor(d);
    if (!bytes.ok()) return bytes.error();
    return n.nic.post_rdma(vp, *bytes);
  }
  void start(Node& n) { start_all(n); }
  void pump(std::optional<uint64_t> shuffle_seed = std::nullopt) {
    carry(a, b, shuffle_seed, &wire_log);
  }
  std::vector<EqEntry> events(Node& n, uint8_t vp) {
    std::vector<EqEntry> out;
    while (auto e = n.nic.poll_eq(vp)) out.push_back(*e);
    return out;
  }
};

RdmaDescriptor put(uint64_t from, uint32_t lkey, uint64_t to, uint32_t rkey, uint32_t len) {
  RdmaDescriptor d;
  d.op = RdmaOp::kWrite;
  d.remote_node = 2;
  d.remote_vp = 9;
  d.local_address = from;
  d.local_key = lkey;
  d.remote_address = to;
  d.remote_key = rkey;
  d.length = len;
  d.local_cq = true;
  return d;
}

TEST_F(RdmaTest, PutAnyAlignmentCutAtDestinationBoundaries) {
  const uint32_t lk = a.reg(0x1000, 3 * kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, 3 * kAttPageBytes, kAccessWrite);
  uint64_t written = 0;
  for (uint64_t src_off : {0u, 3u, 127u})
    for (uint64_t dst_off : {0u, 1u, 125u, 4095u})
      for (uint32_t len : {1u, 127u, 128u, 129u, 1000u, 5000u}) {
        a.fill(0x1000 + src_off, len, static_cast<uint8_t>(len));
        for (uint64_t i = 0; i < len + 2; ++i) b.mem.at(0x8000 + dst_off + i) = 0xEE;
        wire_log.clear();
        ASSERT_TRUE(post(a, 8, put(0x1000 + src_off, lk, 0x8000 + dst_off + 1, rk, len)).ok());
        pump();
        for (uint64_t i = 0; i < len; ++i)
          ASSERT_EQ(b.mem.at(0x8001 + dst_off + i), a.mem.at(0x1000 + src_off + i))
              << src_off << "/" << dst_off << "/" << len << " byte " << i;
        EXPECT_EQ(b.mem.at(0x8000 + dst_off), 0xEE);  // nothing before or after
        EXPECT_EQ(b.mem.at(0x8001 + dst_off + len), 0xEE);
        EXPECT_EQ(b.nic.rdma_bytes_written(), written += len);
        size_t data = 0;
        for (const NicPacket& p : wire_log) {
          if (p.head.kind != wire::PacketKind::kRdmaWrite) continue;
          ++data;
          EXPECT_LE(p.head.bytes, wire::kDataPacketBytes);
          EXPECT_EQ(p.head.vc, data_vc(wire::PacketKind::kRdmaWrite));
        }
        EXPECT_EQ(data, wire::packets_for(0x8001 + dst_off, len));
        auto ev = events(a, 8);
        ASSERT_EQ(ev.size(), 1u);
        EXPECT_EQ(ev[0].kind, EventKind::kDescriptorDone);
        EXPECT_EQ(ev[0].op, DescriptorOp::kPut);
        EXPECT_EQ(ev[0].bytes, len);
      }
}

TEST_F(RdmaTest, EveryWriteIsFlushedBeforeTheAckOrTheCompletionTellsOfIt) {
  const uint32_t lk = a.reg(0x1000, 2 * kAttPageBytes, kAccessWrite);
  const uint32_t rk = b.reg(0x8000, 2 * kAttPageBytes, kAccessRead | kAccessWrite);
  const uint32_t ek = b.reg(0xF000, kAttPageBytes, kAccessWrite);
  RdmaDescriptor d = put(0x1000, lk, 0x8000, rk, 3000);
  d.completion = Completion::kEvent;
  d.notify_address = 0xF000;
  d.notify_key = ek;
  d.notify_data[8] = 1;
  ASSERT_TRUE(post(a, 8, d).ok());
  start(a);
  // Carry the packets by hand: when the target's ack comes out, nothing it wrote is pending.
  for (int round = 0; round < 1000; ++round) {
    bool any = false;
    for (Node* n : {&a, &b})
      for (uint8_t e = 0; e < kDmaEngines; ++e)
        while (auto p = n->nic.next_packet(static_cast<DmaEngine>(e))) {
          any = true;
          if (p->head.kind == wire::PacketKind::kAck) {
            EXPECT_EQ(b.mem.unflushed, 0u);
          }
          (p->head.dest_node == 1 ? a : b).nic.receive_packet(p->flits());
        }
    if (!any) break;
  }
  EXPECT_GE(b.mem.flushes, 3u);  // the data, then each word of the event
  ASSERT_EQ(events(a, 8).size(), 1u);
  // A get: the initiator's writes are flushed before its completion enters the EQ.
  RdmaDescriptor g = put(0x1000, lk, 0x8000, rk, 2000);
  g.op = RdmaOp::kRead;
  const uint64_t flushes = a.mem.flushes;
  ASSERT_TRUE(post(a, 8, g).ok());
  pump();
  EXPECT_GT(a.mem.flushes, flushes);
  EXPECT_EQ(a.mem.unflushed, 0u);
  auto ev = events(a, 8);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kDescriptorDone);
}

TEST_F(RdmaTest, AnAbortedTransferCompletesWithTheErrorAndItsLateAckIsDiscarded) {
  const uint32_t lk = a.reg(0x1000, kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, kAttPageBytes, kAccessWrite);
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk, 300)).ok());
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk, 300)).ok());
  start(a);
  // The first transfer's packets are lost; the engine gives up on it.
  std::vector<NicPacket> first;
  while (auto p = a.nic.next_packet(DmaEngine::kLocalRead)) first.push_back(*p);
  ASSERT_EQ(first.size(), 6u);                     // two transfers of three packets
  EXPECT_FALSE(a.nic.abort_transfer(8, 7, 4752));  // no such submission
  EXPECT_TRUE(a.nic.abort_transfer(8, 0, 4752));
  EXPECT_FALSE(a.nic.abort_transfer(8, 0, 4752));  // once
  auto ev = events(a, 8);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kDescriptorError);
  EXPECT_EQ(ev[0].sequence, 0u);
  EXPECT_EQ(ev[0].error_id, 4752);
  // Both transfers' packets then arrive; the first one's ack names a transfer that is gone.
  for (const NicPacket& p : first) b.nic.receive_packet(p.flits());
  std::vector<NicPacket> acks;
  while (auto p = b.nic.next_packet(DmaEngine::kWrite)) acks.push_back(*p);
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(a.nic.receive_packet(acks[0].flits()), NicRx::kDiscarded);
  EXPECT_EQ(a.nic.receive_packet(acks[1].flits()), NicRx::kDelivered);
  ev = events(a, 8);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kDescriptorDone);
  EXPECT_EQ(ev[0].sequence, 1u);
  EXPECT_EQ(a.nic.outstanding(8), 0u);
  // By tag: a transfer whose packets could not leave the source.
  ASSERT_TRUE(post(a, 9, put(0x1000, lk, 0x8000, rk, 100)).ok());
  start(a);
  auto p = a.nic.next_packet(DmaEngine::kLocalRead);
  ASSERT_TRUE(p);
  EXPECT_TRUE(a.nic.abort_transfer_tag(p->head.tag, 4741));
  EXPECT_FALSE(a.nic.next_packet(DmaEngine::kLocalRead));  // nothing more of it goes out
  ev = events(a, 9);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].error_id, 4741);
}

// What an engine's timeout reads: nothing while a transfer is queued or sending, then the
// answers from its target, which the answers to the transfers before it move on.
TEST_F(RdmaTest, AwaitedAnswersCountTheTargetsAnswersOnceATransferWaitsForThem) {
  const uint32_t lk = a.reg(0x1000, 2 * kAttPageBytes, kAccessRead);
  const uint32_t rk = b.reg(0x8000, 2 * kAttPageBytes, kAccessWrite | kAccessRead);
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk, 300)).ok());  // 3 packets
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk, 300)).ok());
  RdmaDescriptor g = put(0x1000, lk, 0x8000, rk, 300);
  g.op = RdmaOp::kRead;
  ASSERT_TRUE(post(a, 8, g).ok());
  EXPECT_FALSE(a.nic.awaited_answers(8, 0)) << "queued, not started";
  start(a);
  EXPECT_FALSE(a.nic.awaited_answers(8, 0)) << "started, nothing sent";
  std::vector<NicPacket> out;
  for (int i = 0; i < 2; ++i) out.push_back(*a.nic.next_packet(DmaEngine::kLocalRead));
  EXPECT_FALSE(a.nic.awaited_answers(8, 0)) << "still sending";
  out.push_back(*a.nic.next_packet(DmaEngine::kLocalRead));
  EXPECT_EQ(a.nic.awaited_answers(8, 0), 0u) << "every packet out: waits for the target";
  EXPECT_FALSE(a.nic.awaited_answers(8, 1)) << "behind the first, not yet sending";
  while (auto p = a.nic.next_packet(DmaEngine::kLocalRead)) out.push_back(*p);
  EXPECT_EQ(a.nic.awaited_answers(8, 1), 0u);
  EXPECT_EQ(a.nic.awaited_answers(8, 2), 0u) << "the get's request is out";
  for (const NicPacket& p : out) b.nic.receive_packet(p.flits());
  // The first put's ack moves the others' count: the target is answering.
  auto ack = b.nic.next_packet(DmaEngine::kWrite);
  ASSERT_TRUE(ack);
  ASSERT_EQ(a.nic.receive_packet(ack->flits()), NicRx::kDelivered);
  EXPECT_FALSE(a.nic.awaited_answers(8, 0)) << "complete";
  EXPECT_EQ(a.nic.awaited_answers(8, 1), 1u);
  EXPECT_EQ(a.nic.awaited_answers(8, 2), 1u);
  // Every read response counts too.
  auto response = b.nic.next_packet(DmaEngine::kRemoteRead);
  ASSERT_TRUE(response);
  ASSERT_EQ(a.nic.receive_packet(response->flits()), NicRx::kDelivered);
  EXPECT_EQ(a.nic.awaited_answers(8, 2), 2u);
  // A discarded answer (one for no transfer) does not.
  EXPECT_EQ(a.nic.receive_packet(ack->flits()), NicRx::kDiscarded);
  EXPECT_EQ(a.nic.awaited_answers(8, 2), 2u);
  EXPECT_FALSE(a.nic.awaited_answers(9, 2)) << "another VP";
}

TEST_F(RdmaTest, PacketsAsLinkBytesAreDecodedAndBadBytesAreDirty) {
  const uint32_t lk = a.reg(0x1000, kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, kAttPageBytes, kAccessWrite);
  a.fill(0x1000, 100, 9);
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk, 100)).ok());
  start(a);
  auto p = a.nic.next_packet(DmaEngine::kLocalRead);
  ASSERT_TRUE(p);
  std::vector<uint8_t> bytes;
  for (const wire::Flit& f : p->flits()) {
    const wire::FlitBytes fb = wire::encode_flit(f);
    bytes.insert(bytes.end(), fb.begin(), fb.end());
  }
  const uint64_t writes = b.mem.writes;
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 3);  // not whole flits
  EXPECT_EQ(b.nic.receive_packet_bytes(cut), NicRx::kDiscarded);
  EXPECT_EQ(b.nic.error_buffer().error_id, 2078);
  std::vector<uint8_t> bad_vc = bytes;
  bad_vc[wire::kFlitBytes] |= 0x1C;  // VC 7 in the second flit: no flit has it
  EXPECT_EQ(b.nic.receive_packet_bytes(bad_vc), NicRx::kDiscarded);
  EXPECT_EQ(b.nic.dirty_packets(wire::DataDefect::kDataError), 2u);  // both: corrupt bytes
  EXPECT_EQ(b.nic.receive_packet_bytes({}), NicRx::kDiscarded);
  EXPECT_EQ(b.mem.writes, writes);
  EXPECT_EQ(b.nic.receive_packet_bytes(bytes), NicRx::kDelivered);
  EXPECT_EQ(b.mem.at(0x8000), a.mem.at(0x1000));
}

// An engine's own ATT (the live engine's lives in its shared segment): the NIC translates and
// checks through it, and the range rule is check_region either way.
class OneRegionTable final : public AttTable {
 public:
  Status check(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access) const override {
    if (key != 77) return unknown_key(key);
    return check_region(key, 0x8000, 256, kAccessWrite, vaddr, length, access);
  }
  Status translate_pieces(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access,
                          const PieceFn& fn) const override {
    GALAXY_TRY(check(key, vaddr, length, access));
    ++calls;
    return fn(vaddr - 0x8000 + 5 * kAttPageBytes, 0, length);
  }
  mutable int calls = 0;
};

TEST_F(RdmaTest, AnEngineSuppliedAttTableIsTheOneTheNicUses) {
  OneRegionTable table;
  b.nic.attach_att(&table);
  const uint32_t lk = a.reg(0x1000, kAttPageBytes, kAccessNone);
  a.fill(0x1000, 200, 3);
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8010, 77, 100)).ok());
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8010, 77, 300)).ok());  // beyond its 256 bytes
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8010, 78, 10)).ok());   // no such key
  pump();
  EXPECT_GT(table.calls, 0);
  auto ev = events(a, 8);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, EventKind::kDescriptorDone);
  EXPECT_EQ(ev[1].error_id, 2068);
  EXPECT_EQ(ev[2].error_id, 2067);
  EXPECT_EQ(failure_of(ev[1].error_id), Failure::kAccess);
  EXPECT_EQ(failure_of(2056), Failure::kUnreachable);
  EXPECT_EQ(failure_of(2071), Failure::kDescriptor);
  b.nic.attach_att(nullptr);  // back to its own table
  EXPECT_TRUE(b.nic.att().regions() == 0);
}

TEST(AttRoom, ALengthTheTableCannotHoldIsRefusedBeforeAnyPageIsWalked) {
  Att att(16);
  EXPECT_TRUE(att.check_room(0x1000, 16 * kAttPageBytes).ok());
  EXPECT_EQ(att.check_room(0x1000, 16 * kAttPageBytes + 1).error().id, 2065);  // 17 pages
  EXPECT_EQ(att.check_room(0x1000, uint64_t{1} << 60).error().id, 2065);
  EXPECT_EQ(att.check_room(0x1000, 0).error().id, 2060);
  EXPECT_EQ(att.check_room(UINT64_MAX - 10, 100).error().id, 2061);
  // register_region asks the same.
  std::vector<uint64_t> frames(17, 0);
  EXPECT_EQ(att.register_region(0x1000, 16 * kAttPageBytes + 1, kAccessRead, frames).error().id,
            2065);
  EXPECT_EQ(att.regions(), 0u);
}

TEST_F(RdmaTest, ReadResponsesTakeAnotherVcThanWriteData) {
  EXPECT_NE(data_vc(wire::PacketKind::kRdmaWrite), data_vc(wire::PacketKind::kRdmaReadResponse));
  EXPECT_NE(data_vc(wire::PacketKind::kAck), data_vc(wire::PacketKind::kRdmaReadResponse));
}

TEST_F(RdmaTest, GetAnyAlignmentWithEventAtTheTarget) {
  const uint32_t lk = a.reg(0x1000, 4 * kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, 4 * kAttPageBytes, kAccessRead | kAccessWrite);
  b.fill(0x8000, 4 * kAttPageBytes, 5);
  RdmaDescriptor d;
  d.op = RdmaOp::kRead;
  d.remote_node = 2;
  d.remote_vp = 9;
  d.local_address = 0x1003;
  d.local_key = lk;
  d.remote_address = 0x8077;
  d.remote_key = rk;
  d.length = 9000;
  d.completion = Completion::kEvent;
  d.notify_address = 0x8000 + 3 * kAttPageBytes;
  d.notify_key = rk;
  d.notify_data[0] = 0x11;
  d.notify_data[15] = 0x22;
  d.local_cq = true;
  for (uint64_t i = 0; i < 16; ++i) b.mem.at(d.notify_address + i) = 0;
  ASSERT_TRUE(post(a, 8, d).ok());
  pump(7);
  for (uint64_t i = 0; i < d.length; ++i)
    ASSERT_EQ(a.mem.at(0x1003 + i), b.mem.at(0x8077 + i)) << "byte " << i;
  EXPECT_EQ(b.mem.at(d.notify_address), 0x11);
  EXPECT_EQ(b.mem.at(d.notify_address + 15), 0x22);
  EXPECT_EQ(a.nic.rdma_bytes_written(), d.length);  // the responses; the event is not counted
  EXPECT_EQ(b.nic.rdma_bytes_written(), 0u);
  auto ev = events(a, 8);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kDescriptorDone);
  EXPECT_EQ(ev[0].op, DescriptorOp::kGet);
  // The response data: destination-aligned packets on the read-response VC.
  size_t responses = 0;
  for (const NicPacket& p : wire_log)
    if (p.head.kind == wire::PacketKind::kRdmaReadResponse) {
      ++responses;
      EXPECT_EQ(p.engine, DmaEngine::kRemoteRead);
    }
  EXPECT_EQ(responses, wire::packets_for(0x1003, 9000));
}

// An adaptive network may deliver the notice before the data: the target applies the event
// only once every data packet is written.
TEST_F(RdmaTest, EventIsWrittenAfterAllDataWhateverTheArrivalOrder) {
  const uint32_t lk = a.reg(0x1000, 2 * kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, 2 * kAttPageBytes, kAccessWrite);
  a.fill(0x1000, 2000, 9);
  RdmaDescriptor d = put(0x1000, lk, 0x8000, rk, 2000);
  d.completion = Completion::kEvent;
  d.notify_address = 0x8000 + kAttPageBytes;
  d.notify_key = rk;
  d.notify_data[8] = 0x5A;
  ASSERT_TRUE(post(a, 8, d).ok());
  start(a);
  std::vector<NicPacket> pkts;
  while (auto p = a.nic.next_packet(DmaEngine::kLocalRead)) pkts.push_back(*p);
  ASSERT_EQ(pkts.size(), wire::packets_for(0x8000, 2000) + 1);
  EXPECT_EQ(pkts.back().head.kind, wire::PacketKind::kEvent);
  std::rotate(pkts.begin(), pkts.end() - 1, pkts.end());  // the event first
  for (size_t i = 0; i < pkts.size(); ++i) {
    EXPECT_EQ(b.nic.receive_packet(pkts[i].flits()), NicRx::kDelivered);
    const bool all = i + 1 == pkts.size();
    EXPECT_EQ(b.mem.at(d.notify_address + 8), all ? 0x5A : 0) << "after packet " << i;
  }
  pump();
  auto ev = events(a, 8);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kDescriptorDone);
}

TEST_F(RdmaTest, ImmediateWithEachNotice) {
  const uint32_t rk = b.reg(0x8000, kAttPageBytes, kAccessWrite);
  uint64_t written = 0;
  for (Completion c : {Completion::kNone, Completion::kEvent, Completion::kTrailingMp,
                       Completion::kTrailingImmediate})
    for (uint32_t len : {1u, 64u, 100u, 128u}) {
      RdmaDescriptor d;
      d.op = RdmaOp::kImmediate;
      d.remote_node = 2;
      d.remote_vp = 9;
      d.remote_address = 0x8050;
      d.remote_key = rk;
      d.length = len;
      d.completion = c;
      for (uint32_t i = 0; i < len; ++i) d.immediate_data[i] = static_cast<uint8_t>(i ^ len);
      if (c == Completion::kEvent || c == Completion::kTrailingImmediate) {
        d.notify_address = 0x8800;
        d.notify_key = rk;
      }
      d.notify_data.fill(static_cast<uint8_t>(0x40 + len));
      const uint64_t reads = a.mem.reads;
      ASSERT_TRUE(post(a, 3, d).ok());  // a PIO VP
      pump(len);
      EXPECT_EQ(a.mem.reads, reads);  // the data came with the descriptor, no DMA read
      for (uint32_t i = 0; i < len; ++i) ASSERT_EQ(b.mem.at(0x8050 + i), d.immediate_data[i]);
      written += len + (c == Completion::kTrailingImmediate ? wire::kNotifyDataBytes : 0);
      EXPECT_EQ(b.nic.rdma_bytes_written(), written);
      if (c == Completion::kEvent || c == Completion::kTrailingImmediate) {
        EXPECT_EQ(b.mem.at(0x8800 + 15), 0x40 + len);
      }
      if (c == Completion::kTrailingMp) {
        auto mp = b.nic.poll_mpq(9);
        ASSERT_TRUE(mp);
        EXPECT_EQ(mp->length, wire::kNotifyDataBytes);
        EXPECT_EQ(mp->data[0], 0x40 + len);
        EXPECT_EQ(mp->src_node, 1);
      }
      EXPECT_TRUE(events(a, 3).empty());  // no local CQ asked for, and no error
    }
}

TEST_F(RdmaTest, RefusedAccessWritesNothingAndFailsTheDescriptor) {
  const uint32_t lk = a.reg(0x1000, kAttPageBytes, kAccessNone);
  const uint32_t rk_w = b.reg(0x8000, kAttPageBytes, kAccessWrite);
  const uint32_t rk_r = b.reg(0xA000, kAttPageBytes, kAccessRead);
  a.fill(0x1000, kAttPageBytes, 1);
  for (uint64_t i = 0; i < kAttPageBytes; ++i) b.mem.at(0x8000 + i) = 0xEE;
  struct Case {
    RdmaDescriptor d;
    uint16_t id;
  };
  RdmaDescriptor over = put(0x1000, lk, 0x8000 + 100, rk_w, kAttPageBytes);  // past the end
  RdmaDescriptor wrong_key = put(0x1000, lk, 0x8000, rk_w ^ 0x100000, 64);   // stale key
  RdmaDescriptor read_only = put(0x1000, lk, 0xA000, rk_r, 64);              // no write right
  RdmaDescriptor get_wo = put(0x1000, lk, 0x8000, rk_w, 64);                 // no read right
  get_wo.op = RdmaOp::kRead;
  for (const Case& c :
       {Case{over, 2068}, Case{wrong_key, 2067}, Case{read_only, 2069}, Case{get_wo, 2069}}) {
    const uint64_t writes = b.mem.writes;
    ASSERT_TRUE(post(a, 8, c.d).ok());
    pump(c.id);
    EXPECT_EQ(b.mem.writes, writes) << c.id;
    auto ev = events(a, 8);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].kind, EventKind::kDescriptorError);
    EXPECT_EQ(ev[0].error_id, c.id);
  }
  EXPECT_EQ(b.mem.at(0x8000), 0xEE);
  EXPECT_EQ(b.nic.rdma_bytes_written(), 0u);
  // The local side is checked before anything leaves.
  wire_log.clear();
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk_w, kAttPageBytes + 1)).ok());
  pump();
  EXPECT_TRUE(wire_log.empty());
  auto ev = events(a, 8);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].error_id, 2068);
}

TEST_F(RdmaTest, FencedDescriptorStartsAfterEarlierTransfersComplete) {
  const uint32_t lk = a.reg(0x1000, kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, kAttPageBytes, kAccessWrite);
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk, 500)).ok());
  RdmaDescriptor second = put(0x1000, lk, 0x8400, rk, 10);
  second.fen = true;
  ASSERT_TRUE(post(a, 8, second).ok());
  auto w = a.nic.next_work();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, NicWork::Kind::kRdma);
  EXPECT_FALSE(a.nic.next_work());  // fenced behind the first, which awaits its ack
  pump();
  EXPECT_EQ(events(a, 8).size(), 2u);
}

TEST_F(RdmaTest, DescriptorsWaitWhenEveryTagIsInFlight) {
  const uint32_t lk = a.reg(0x1000, kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, kAttPageBytes, kAccessWrite);
  const size_t n = kMaxTransfers + 100;
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(post(a, static_cast<uint8_t>(8 + i % 32), put(0x1000, lk, 0x8000, rk, 8)).ok());
  size_t started = 0;
  while (a.nic.next_work()) ++started;
  EXPECT_EQ(started, kMaxTransfers);
  pump();
  size_t done = 0;
  for (uint8_t vp = 8; vp < kNumVps; ++vp) done += events(a, vp).size();
  EXPECT_EQ(done, n);
}

TEST_F(RdmaTest, MalformedOrUnsupportedDescriptorsCompleteWithAnError) {
  std::vector<uint8_t> bad(64, 0);
  bad[0] = 0x02;  // immediate with length 0
  EXPECT_FALSE(a.nic.post_rdma(8, bad).ok());
  RdmaDescriptor d = put(0, 0, 0, 0, 1);
  d.remote_vp = 50;
  ASSERT_TRUE(post(a, 8, d).ok());
  d.remote_vp = 9;
  d.op = RdmaOp::kRead;
  d.completion = Completion::kTrailingMp;
  ASSERT_TRUE(post(a, 8, d).ok());
  pump();
  std::vector<uint16_t> ids;
  for (const EqEntry& e : events(a, 8)) ids.push_back(e.error_id);
  EXPECT_EQ(ids, (std::vector<uint16_t>{2056, 2057}));
}

// docs/system.md 1.1: every dirty packet is discarded before anything reaches host memory, kept in
// the error buffer and counted by kind.
TEST_F(RdmaTest, DirtyPacketsAreDiscardedIntoTheErrorBuffer) {
  const uint32_t lk = a.reg(0x1000, kAttPageBytes, kAccessNone);
  const uint32_t rk = b.reg(0x8000, kAttPageBytes, kAccessWrite);
  ASSERT_TRUE(post(a, 8, put(0x1000, lk, 0x8000, rk, 100)).ok());
  start(a);
  auto p = a.nic.next_packet(DmaEngine::kLocalRead);
  ASSERT_TRUE(p);
  const std::vector<wire::Flit> good = p->flits();
  using wire::DataDefect;
  struct Case {
    DataDefect defect;
    std::vector<wire::Flit> flits;
  };
  std::vector<Case> cases;
  cases.push_back({DataDefect::kMissingHead, {good.begin() + 1, good.end()}});
  cases.push_back({DataDefect::kMissingTail, {good.begin(), good.end() - 1}});
  std::vector<wire::Flit> longer = good;
  longer.insert(longer.end() - 1, good[2]);
  cases.push_back({DataDefect::kTooLong, longer});
  std::vector<wire::Flit> corrupt = good;
  corrupt[3].payload[0] ^= 0x80;
  cases.push_back({DataDefect::kDataError, corrupt});
  // Misrouted: a well-formed packet for another node.
  RdmaDescriptor other = put(0x1000, lk, 0x8000, rk, 100);
  other.remote_node = 77;
  ASSERT_TRUE(post(a, 9, other).ok());
  start(a);
  auto mis = a.nic.next_packet(DmaEngine::kLocalRead);
  ASSERT_TRUE(mis);
  ASSERT_EQ(mis->head.dest_node, 77);
  cases.push_back({DataDefect::kMisrouted, mis->flits()});
  for (const Case& c : cases) {
    const uint64_t writes = b.mem.writes;
    const uint64_t before = b.nic.dirty_packets(c.defect);
    EXPECT_EQ(b.nic.receive_packet(c.flits), NicRx::kDiscarded) << data_defect_name(c.defect);
    EXPECT_EQ(b.mem.writes, writes);
    EXPECT_EQ(b.nic.dirty_packets(c.defect), before + 1) << data_defect_name(c.defect);
    EXPECT_TRUE(b.nic.error_buffer().valid);
    EXPECT_EQ(b.nic.error_buffer().defect, c.defect);
    // Readable through registers: ERRBUF_STATUS names the defect, ERRBUF_DATA the flits.
    auto st = b.nic.read_register(reg::kErrBufStatus);
    EXPECT_EQ((st.value >> 32) & 0xFF, static_cast<uint64_t>(c.defect));
    const wire::FlitBytes first = wire::encode_flit(c.flits[0]);
    auto w0 = b.nic.read_register(reg::kErrBufData);
    uint64_t want = 0;
    for (int i = 0; i < 8; ++i) want |= uint64_t{first[i]} << (8 * i);
    EXPECT_EQ(w0.value, want);
  }
  // The good packet still goes through afterwards.
  EXPECT_EQ(b.nic.receive_packet(good), NicRx::kDelivered);
}

// chip::direct_rdma (a transfer between two NICs that reach one memory system, with no packets)
// and the packet path apply one set of rules: for each descriptor, both end with the same error
// id, the same bytes in both memories, and the same completion.
class TwoMemories final : public DirectMemory {
 public:
  TwoMemories(Memory& initiator, Memory& target) : initiator_(initiator), target_(target) {}
  Status copy(bool into_target, uint64_t dst, uint64_t src, uint64_t n) override {
    std::vector<uint8_t> buf(n);
    GALAXY_TRY((into_target ? initiator_ : target_).read(src, buf));
    return (into_target ? target_ : initiator_).write(dst, buf);
  }
  Status write_target(uint64_t phys, std::span<const uint8_t> in) override {
    return target_.write(phys, in);
  }

 private:
  Memory& initiator_;
  Memory& target_;
};

TEST(DirectRdma, AppliesThePacketPathsRulesToEveryDescriptor) {
  struct Case {
    const char* name;
    RdmaDescriptor d;
  };
  // Both pairs of nodes register the same regions, so the keys are the same in both.
  auto setup = [](Node& x, Node& y) {
    std::array<uint32_t, 5> k{};
    k[0] = x.reg(0x1000, 3 * kAttPageBytes, kAccessNone);  // the initiator's buffer
    k[1] = y.reg(0x8000, 3 * kAttPageBytes, kAccessWrite | kAccessRead);
    k[2] = y.reg(0xC000, kAttPageBytes, kAccessRead);   // read only
    k[3] = y.reg(0xE000, kAttPageBytes, kAccessWrite);  // write only: events
    k[4] = x.reg(0x5000, 64, kAccessNone);
    x.fill(0x1000, 3 * kAttPageBytes, 3);
    y.fill(0x8000, 3 * kAttPageBytes, 5);
    y.fill(0xC000, kAttPageBytes, 9);
    return k;
  };
  Node probe_a{1}, probe_b{2};
  const auto k = setup(probe_a, probe_b);
  auto with_event = [&](RdmaDescriptor d, uint64_t at, uint32_t key) {
    d.completion = Completion::kEvent;
    d.notify_address = at;
    d.notify_key = key;
    for (size_t i = 0; i < d.notify_data.size(); ++i)
      d.notify_data[i] = static_cast<uint8_t>(0xA0 + i);
    return d;
  };
  auto get = [](RdmaDescriptor d) {
    d.op = RdmaOp::kRead;
    return d;
  };
  RdmaDescriptor imm = put(0, 0, 0x8FF0, k[1], 100);
  imm.op = RdmaOp::kImmediate;
  imm.local_address = 0;
  imm.local_key = 0;
  for (uint32_t i = 0; i < 100; ++i) imm.immediate_data[i] = static_cast<uint8_t>(i * 3);
  RdmaDescriptor trailing = imm;
  trailing.completion = Completion::kTrailingImmediate;
  trailing.notify_address = 0xE100;
  trailing.notify_key = k[3];
  trailing.notify_data.fill(0x5A);
  RdmaDescriptor quiet = put(0x1003, k[0], 0x8005, k[1], 700);
  quiet.local_cq = false;
  RdmaDescriptor cp = put(0x1000, k[0], 0x8000, k[1], 8);
  cp.cp_count = 1;
  RdmaDescriptor vp = put(0x1000, k[0], 0x8000, k[1], 8);
  vp.remote_vp = 45;
  RdmaDescriptor get_trailing = get(put(0x1000, k[0], 0xC000, k[2], 8));
  get_trailing.completion = Completion::kTrailingImmediate;
  const std::vector<Case> cases = {
      {"put across scattered pages", put(0x1003, k[0], 0x8FF1, k[1], 2 * kAttPageBytes + 10)},
      {"put with event", with_event(put(0x1000, k[0], 0x8000, k[1], 300), 0xE010, k[3])},
      {"put, no completion asked", quiet},
      {"get with event", with_event(get(put(0x1FFF, k[0], 0xC001, k[2], 1500)), 0xE020, k[3])},
      {"get of whole pages", get(put(0x1000, k[0], 0x8000, k[1], 2 * kAttPageBytes))},
      {"immediate", imm},
      {"immediate, trailing immediate", trailing},
      {"put past the region", put(0x1000, k[0], 0x8000 + 100, k[1], 3 * kAttPageBytes)},
      {"put, wrong key", put(0x1000, k[0], 0x8000, k[1] ^ 0x100000, 64)},
      {"put to read-only", put(0x1000, k[0], 0xC000, k[2], 64)},
      {"get from write-only", get(put(0x1000, k[0], 0xE000, k[3], 64))},
      {"put, event key refused (data written)",
       with_event(put(0x1000, k[0], 0x8000, k[1], 64), 0xC000, k[2])},
      {"get, event key refused (nothing read)",
       with_event(get(put(0x1000, k[0], 0xC000, k[2], 64)), 0xC100, k[2])},
      {"local range past its region", put(0x5000, k[4], 0x8000, k[1], 65)},
      {"remote VP out of range", vp},
      {"get with a trailing immediate", get_trailing},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // The packet path.
    Node pa{1}, pb{2};
    setup(pa, pb);
    auto bytes = wire::encode_rdma_descriptor(c.d);
    ASSERT_TRUE(bytes.ok());
    ASSERT_TRUE(pa.nic.post_rdma(8, *bytes).ok());
    carry(pa, pb);
    std::optional<EqEntry> packet_done = pa.nic.poll_eq(8);
    const uint16_t packet_error = packet_done ? packet_done->error_id : 0;
    // The direct path.
    Node da{1}, db{2};
    setup(da, db);
    TwoMemories memory(da.mem, db.mem);
    const uint16_t direct_error = direct_rdma(c.d, da.nic.att(), db.nic.att(), memory);
    EXPECT_EQ(direct_error, packet_error);
    EXPECT_EQ(completes_locally(c.d.local_cq, direct_error != 0), packet_done.has_value());
    for (uint64_t va = 0; va < Memory::kPages * kAttPageBytes; ++va) {
      ASSERT_EQ(da.mem.at(va), pa.mem.at(va)) << "initiator byte " << va;
      ASSERT_EQ(db.mem.at(va), pb.mem.at(va)) << "target byte " << va;
    }
  }
  // The cases reach each kind of outcome: success, a refusal at each side, a bad descriptor.
  Node pa{1}, pb{2};
  setup(pa, pb);
  TwoMemories memory(pa.mem, pb.mem);
  EXPECT_EQ(direct_rdma(cases[0].d, pa.nic.att(), pb.nic.att(), memory), 0);
  EXPECT_EQ(pb.mem.at(0x8FF1), pa.mem.at(0x1003));
  EXPECT_EQ(direct_rdma(cases[7].d, pa.nic.att(), pb.nic.att(), memory), 2068);
  EXPECT_EQ(direct_rdma(cases[13].d, pa.nic.att(), pb.nic.att(), memory), 2068);
  // A CP-triggered descriptor waits in a NIC's queue for its CPs (chip/coll.h): the direct path,
  // which has no queue, refuses it.
  EXPECT_EQ(direct_rdma(cp, pa.nic.att(), pb.nic.att(), memory), 2055);
}

}  // namespace
}  // namespace galaxy::chip
