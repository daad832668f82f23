#include "chip/nic.h"

#include <gtest/gtest.h>

#include "chip_test_util.h"

namespace galaxy::chip {
namespace {

wire::MgmtDescriptorBytes descriptor(uint16_t tid, bool fence = false) {
  wire::MgmtDescriptor d;
  d.dest_id = 7;
  d.dest_vp = 8;
  d.src_vp = 8;
  d.transaction_id = tid;
  d.fen = fence;
  d.nmp_type = wire::NmpType::kRegReadRequest;
  d.data.count = 1;
  d.data.address[0] = reg::kScratch;
  return wire::encode_mgmt_descriptor(d).value();
}

// An HCA with two ports: the first one whose link is up and leads to an NRC carries its packets
// (chip/network_port.h), the same rule the fabric's plans use.
TEST(NicTest, NetworkPortIsTheFirstUpPortToAnNrc) {
  Nic nic(3);
  EXPECT_EQ(nic.network_port(), 0);                    // none qualifies yet
  nic.link_up(0, {true, wire::ChipType::kNic, 5, 0});  // cabled back to back to another HCA
  nic.link_up(2, {true, wire::ChipType::kNrc, 9, 4});
  EXPECT_EQ(nic.network_port(), 2);
  nic.link_up(1, {true, wire::ChipType::kNrc, 8, 1});
  EXPECT_EQ(nic.network_port(), 1);
  nic.link_down(1);
  EXPECT_EQ(nic.network_port(), 2);
  nic.link_down(2);
  EXPECT_EQ(nic.network_port(), 0);
}

TEST(NicTest, ManagementOnlyThroughSdqs) {
  Nic n;
  auto d = descriptor(1);
  auto s = n.post_mgmt(3, d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("PIO"), std::string::npos);
  EXPECT_FALSE(n.post_mgmt(40, d).ok());
  EXPECT_TRUE(n.post_mgmt(8, d).ok());
  EXPECT_FALSE(n.post_mgmt(8, std::span(d).first(10)).ok());
}

TEST(NicTest, InOrderWithinVpRoundRobinAcrossVps) {
  Nic n;
  n.set_chip_id(100);
  ASSERT_TRUE(n.post_mgmt(8, descriptor(1)).ok());
  ASSERT_TRUE(n.post_mgmt(8, descriptor(2)).ok());
  ASSERT_TRUE(n.post_mgmt(9, descriptor(3)).ok());
  std::vector<std::pair<uint8_t, uint16_t>> order;
  while (auto w = n.next_work()) {
    auto p = wire::decode_mgmt_packet(w->mgmt).value();
    order.push_back({w->vp, p.transaction_id});
    EXPECT_EQ(p.src_id, 100);
    n.complete(w->vp, true);
  }
  std::vector<std::pair<uint8_t, uint16_t>> want{{8, 1}, {9, 3}, {8, 2}};
  EXPECT_EQ(order, want);
}

TEST(NicTest, FencedDescriptorWaitsForPredecessors) {
  Nic n;
  ASSERT_TRUE(n.post_mgmt(8, descriptor(1)).ok());
  ASSERT_TRUE(n.post_mgmt(8, descriptor(2, /*fence=*/true)).ok());
  auto first = n.next_work();
  ASSERT_TRUE(first);
  EXPECT_FALSE(n.next_work());  // blocked until the first completes
  n.complete(8, true);
  auto second = n.next_work();
  ASSERT_TRUE(second);
  EXPECT_EQ(wire::decode_mgmt_packet(second->mgmt).value().transaction_id, 2);
}

TEST(NicTest, MalformedDescriptorCompletesWithErrorEvent) {
  Nic n;
  auto d = descriptor(1);
  d[0] ^= 0xFF;  // scramble the head of the descriptor
  d[1] ^= 0xFF;
  ASSERT_TRUE(n.post_mgmt(8, d).ok());
  auto w = n.next_work();
  ASSERT_TRUE(w);
  ASSERT_EQ(w->kind, NicWork::Kind::kRejected);
  EXPECT_FALSE(w->error.message.empty());
  n.complete(w->vp, false, w->error.id);
  auto e = n.poll_eq(8);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, EventKind::kDescriptorError);
  EXPECT_EQ(n.read_register(reg::kVpBase + 8 * reg::kVpStride + reg::vp::kDescErrors).value, 1u);
}

// A full EQ never loses a completion: later ones wait in order and enter as the host polls.
TEST(NicTest, CompletionsBeyondAFullEqWaitAndArriveInOrder) {
  Nic n;
  n.set_chip_id(1);
  const size_t total = kDefaultEqDepth + 10;
  const uint8_t msg[4] = {1, 2, 3, 4};
  for (size_t i = 0; i < total; ++i)
    ASSERT_TRUE(n.post_mp(8, 2, 9, msg, /*fence=*/false, /*notify=*/true).ok());
  while (auto w = n.next_work()) n.complete(w->vp, true);
  EXPECT_EQ(n.eq_count(8), kDefaultEqDepth);
  EXPECT_EQ(n.eq_waiting(8), 10u);
  for (uint64_t seq = 0; seq < total; ++seq) {
    auto e = n.poll_eq(8);
    ASSERT_TRUE(e) << seq;
    EXPECT_EQ(e->sequence, seq);
    EXPECT_EQ(e->op, DescriptorOp::kMp);
  }
  EXPECT_FALSE(n.poll_eq(8));
  EXPECT_EQ(n.eq_waiting(8), 0u);
}

// A VP's state exists once the VP is used: a NIC of a large model stays small, a VP never used
// reads as at power-on, and each VP's completions land in its own EQ (and its bit of EQ_BUSY).
TEST(NicTest, VpsHoldStateOnlyOnceUsed) {
  EXPECT_LT(sizeof(Nic), 4096u);
  Nic n;
  n.set_chip_id(1);
  EXPECT_EQ(n.read_register(reg::vp_register(20, reg::vp::kMpqCount)).value, 0u);
  EXPECT_EQ(n.read_register(reg::vp_register(20, reg::vp::kDescDone)).value, 0u);
  EXPECT_EQ(n.eq_count(20), 0u);
  EXPECT_EQ(n.mpq_count(20), 0u);
  const uint8_t msg[4] = {1, 2, 3, 4};
  for (uint8_t vp : {uint8_t{kNumVps - 1}, uint8_t{0}})
    ASSERT_TRUE(n.post_mp(vp, 2, 9, msg, /*fence=*/false, /*notify=*/true).ok());
  while (auto w = n.next_work()) n.complete(w->vp, true);
  EXPECT_EQ(n.eq_busy(), (uint64_t{1} << (kNumVps - 1)) | 1u);
  EXPECT_EQ(n.read_register(reg::vp_register(kNumVps - 1, reg::vp::kDescDone)).value, 1u);
  EXPECT_EQ(n.read_register(reg::vp_register(20, reg::vp::kDescDone)).value, 0u);
  ASSERT_TRUE(n.poll_eq(kNumVps - 1));
  EXPECT_EQ(n.eq_busy(), 1u);
}

TEST(NicTest, ResponsesLandInTheRequestingVpsMpq) {
  Nic n;
  n.set_chip_id(100);
  wire::MgmtPacket resp;
  resp.nmp_type = wire::NmpType::kRegReadResponse;
  resp.dest_id = 100;
  resp.dest_type = wire::ChipType::kNic;
  resp.dest_vp = 12;
  resp.src_id = 7;
  resp.transaction_id = 77;
  resp.data.count = 1;
  auto b = testing::bytes_of(resp);
  EXPECT_EQ(n.receive_mgmt(b), NicRx::kDelivered);
  EXPECT_FALSE(n.poll_mpq(8));
  auto e = n.poll_mpq(12);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->management);
  EXPECT_EQ(wire::decode_mgmt_packet(std::span(e->data).first(e->length)).value(), resp);
  // A full MPQ makes MPs wait in the NIC's input, in order; they go in as the host polls.
  n.set_mpq_depth(12, 1);
  auto second = resp, third = resp;
  second.transaction_id = 78;
  third.transaction_id = 79;
  EXPECT_EQ(n.receive_mgmt(b), NicRx::kDelivered);
  EXPECT_EQ(n.receive_mgmt(testing::bytes_of(second)), NicRx::kWaiting);
  EXPECT_EQ(n.receive_mgmt(testing::bytes_of(third)), NicRx::kWaiting);
  EXPECT_EQ(n.mpq_count(12), 1u);
  EXPECT_EQ(n.mpq_waiting(12), 2u);
  EXPECT_EQ(n.read_register(reg::kVpBase + 12 * reg::kVpStride + reg::vp::kMpqFull).value, 2u);
  for (uint16_t tid : {77, 78, 79}) {
    auto got = n.poll_mpq(12);
    ASSERT_TRUE(got);
    EXPECT_EQ(wire::decode_mgmt_packet(std::span(got->data).first(got->length))->transaction_id,
              tid);
  }
  EXPECT_FALSE(n.poll_mpq(12));
  EXPECT_EQ(n.mpq_waiting(12), 0u);
  // Requests go to the NIC's own NMA.
  auto req = testing::request(wire::NmpType::kRegReadRequest, {reg::kScratch}, {}, 100);
  req.dest_type = wire::ChipType::kNic;
  EXPECT_EQ(n.receive_mgmt(testing::bytes_of(req)), NicRx::kToNma);
}

TEST(NicTest, DirtyPacketsAreDiscardedIntoTheErrorBuffer) {
  Nic n;
  n.set_chip_id(100);
  wire::MgmtPacketBytes junk;
  junk.fill(0xA5);
  EXPECT_EQ(n.receive_mgmt(junk), NicRx::kDiscarded);
  EXPECT_TRUE(n.error_buffer().valid);
  EXPECT_EQ(n.error_buffer().bytes[0], 0xA5);
  EXPECT_EQ(n.read_register(reg::kDirtyDiscards).value, 1u);
  EXPECT_EQ(n.read_register(reg::kErrBufStatus).value & 1, 1u);
  EXPECT_EQ(n.read_register(reg::kErrBufData).value, 0xA5A5A5A5A5A5A5A5u);
  // A response for another NIC is misrouted: discarded too.
  wire::MgmtPacket resp;
  resp.nmp_type = wire::NmpType::kRegWriteResponse;
  resp.dest_id = 101;
  resp.dest_type = wire::ChipType::kNic;
  EXPECT_EQ(n.receive_mgmt(testing::bytes_of(resp)), NicRx::kDiscarded);
  EXPECT_EQ(n.read_register(reg::kDirtyDiscards).value, 2u);
}

TEST(NicTest, MpSendAndReceive) {
  Nic n;
  n.set_chip_id(3);
  uint8_t msg[5] = {1, 2, 3, 4, 5};
  ASSERT_TRUE(n.post_mp(0, 9, 2, msg).ok());  // PIO VP
  auto w = n.next_work();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, NicWork::Kind::kMp);
  EXPECT_EQ(w->head.dest_node, 9);
  EXPECT_EQ(w->head.src_node, 3);
  wire::DataHead h = w->head;
  h.dest_node = 3;
  EXPECT_EQ(n.receive_mp(h, msg), NicRx::kDelivered);
  auto e = n.poll_mpq(2);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->length, 5);
  EXPECT_EQ(e->data[4], 5);
  h.dest_node = 4;
  EXPECT_EQ(n.receive_mp(h, msg), NicRx::kDiscarded);
  uint8_t big[121] = {};
  EXPECT_FALSE(n.post_mp(0, 9, 2, big).ok());
}

}  // namespace
}  // namespace galaxy::chip

namespace galaxy::chip {
namespace {

// The refusal of a discarded MP (chip/refusal.h): only an MP on its own is answered; the
// refusal, as it crosses the wire, becomes an error event of the sender's VP and is counted; a
// refusal that names no VP or no error is a dirty packet and reaches nobody.
TEST(NicRefusalTest, AnMpsRefusalBecomesAnErrorEventOfItsVp) {
  wire::DataHead mp;
  mp.kind = wire::PacketKind::kMp;
  mp.src_node = 4;
  mp.src_vp = 9;
  mp.dest_node = 7;
  mp.dest_vp = 2;
  for (wire::PacketKind k : {wire::PacketKind::kRdmaWrite, wire::PacketKind::kRdmaReadRequest,
                             wire::PacketKind::kRdmaReadResponse, wire::PacketKind::kAck}) {
    wire::DataHead other = mp;
    other.kind = k;
    EXPECT_FALSE(refusal_of(other, 12, kErrNoUsableRoute)) << static_cast<int>(k);
  }
  wire::DataHead trailing = mp;
  trailing.flags = wire::kDataFlagInTransfer;
  EXPECT_FALSE(refusal_of(trailing, 12, kErrNoUsableRoute));
  auto r = refusal_of(mp, 12, kErrNoUsableRoute);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->head.dest_node, 4);
  EXPECT_EQ(r->head.dest_vp, 9);
  EXPECT_EQ(r->head.src_node, 12);
  EXPECT_EQ(r->head.vc, data_vc(wire::PacketKind::kAck));

  Nic n;
  n.set_chip_id(4);
  auto flits = wire::encode_data_packet(*r);
  ASSERT_TRUE(flits.ok());
  EXPECT_EQ(n.receive_packet(*flits), NicRx::kDelivered);
  auto e = n.poll_eq(9);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, EventKind::kMpRefused);
  EXPECT_EQ(e->op, DescriptorOp::kMp);
  EXPECT_EQ(e->error_id, kErrNoUsableRoute);
  EXPECT_EQ(failure_of(e->error_id), Failure::kUnreachable);
  EXPECT_EQ(failure_of(kErrNicPortDown), Failure::kUnreachable);
  EXPECT_EQ(n.read_register(reg::vp_register(9, reg::vp::kMpRefused)).value, 1u);
  EXPECT_EQ(n.read_register(reg::vp_register(9, reg::vp::kDescErrors)).value, 0u);

  for (auto bad : {std::pair<uint8_t, uint32_t>{kNumVps, kErrNoUsableRoute},
                   std::pair<uint8_t, uint32_t>{9, 0}}) {
    wire::DataPacket p = *r;
    p.head.dest_vp = bad.first;
    p.ext.offset = bad.second;
    auto f = wire::encode_data_packet(p);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(n.receive_packet(*f), NicRx::kDiscarded);
  }
  EXPECT_FALSE(n.poll_eq(9));
  EXPECT_EQ(n.read_register(reg::kErrBufStatus).value >> 16 & 0xFFFF, 2079u);
}

}  // namespace
}  // namespace galaxy::chip
