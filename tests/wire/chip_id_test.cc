// 17-bit chip ids (wire/chip_id.h; docs/protocol.md "Chip ids"): every format that names a chip
// carries the id's bit 16 in a bit TH-2 reserves, decodes it back, and refuses an id wider
// than 17 bits naming the field.
#include "wire/chip_id.h"

#include <gtest/gtest.h>

#include "base/bits.h"
#include "wire/cp.h"
#include "wire/data_packet.h"
#include "wire/mgmt.h"
#include "wire/mp.h"
#include "wire/rdma_descriptor.h"
#include "wire_test_util.h"

namespace galaxy::wire {
namespace chip_id_test {

using testing::FailsWith;

constexpr ChipId kHighId = 0x1ABCD;  // low 16 bits 0xABCD, bit 16 set

// Packet bit of payload bit `off` of flit `flit` of a management packet (docs/protocol.md).
constexpr size_t pbit(unsigned flit, size_t off) {
  return flit * 200 + 6 + off;
}

MgmtPacket request(ChipId dest, ChipId src) {
  MgmtPacket p;
  p.dest_id = dest;
  p.src_id = src;
  p.nmp_type = NmpType::kRegReadRequest;
  EXPECT_TRUE(p.forward_route.push(3).ok());
  EXPECT_TRUE(p.backward_route.push(1).ok());
  p.data.count = 1;
  return p;
}

TEST(ChipId, PartsAndLimits) {
  EXPECT_EQ(kUnconfiguredId, 0x1FFFFu);
  EXPECT_EQ(kMaxChipId, 0x1FFFEu);
  EXPECT_EQ(kMaxChips, 131071u);
  EXPECT_EQ(chip_id_low(kHighId), 0xABCDu);
  EXPECT_EQ(chip_id_high(kHighId), 1u);
  EXPECT_EQ(chip_id_of(0xABCD, 1), kHighId);
  EXPECT_EQ(chip_id_of(0x7ABCD, 0), 0xABCDu);  // each part masked to its width
}

TEST(ChipId, ManagementPacketCarriesBitSixteenInHeadFlitBits186And187) {
  auto b = encode_mgmt_packet(request(kHighId, 0x10002));
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(get_bits(*b, pbit(0, 10), 16), 0xABCDu);
  EXPECT_EQ(get_bits(*b, pbit(0, 27), 16), 0x0002u);
  EXPECT_EQ(get_bits(*b, pbit(0, 186), 1), 1u);
  EXPECT_EQ(get_bits(*b, pbit(0, 187), 1), 1u);
  auto back = decode_mgmt_packet(*b);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->dest_id, kHighId);
  EXPECT_EQ(back->src_id, 0x10002u);
  // A 16-bit id leaves both bits 0: the TH-2 packet bit for bit.
  auto narrow = encode_mgmt_packet(request(0xABCD, 2));
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(get_bits(*narrow, pbit(0, 186), 2), 0u);
  auto wide_dest = encode_mgmt_packet(request(0x20000, 2));
  EXPECT_TRUE(FailsWith(wide_dest, "dest_id = 0x20000 exceeds the 17-bit chip id"));
  EXPECT_EQ(wide_dest.error().id, 1106u);
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(request(1, 0x20000)), "src_id = 0x20000"));
}

TEST(ChipId, ManagementDescriptorCarriesBitSixteenInBit506) {
  MgmtDescriptor d;
  d.dest_id = kHighId;
  d.nmp_type = NmpType::kRegReadRequest;
  ASSERT_TRUE(d.forward_route.push(3).ok());
  ASSERT_TRUE(d.backward_route.push(1).ok());
  d.data.count = 1;
  auto b = encode_mgmt_descriptor(d);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(get_bits(*b, 32, 16), 0xABCDu);
  EXPECT_EQ(get_bits(*b, 506, 1), 1u);
  auto back = decode_mgmt_descriptor(*b);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->dest_id, kHighId);
  d.dest_id = 0x20000;
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "dest_id = 131072 exceeds 131071"));
}

TEST(ChipId, SmInfoSuccessorCarriesBitSixteenAtDataBit136) {
  MgmtPacket p = request(40, 3);
  p.dest_type = ChipType::kNic;
  p.nmp_type = NmpType::kSmInfoSet;
  p.data = {};
  p.data.sm.successor_chip = kHighId;
  p.data.sm.successor_vp = 7;
  auto b = encode_mgmt_packet(p);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(get_bits(*b, pbit(2, 112), 16), 0xABCDu);
  EXPECT_EQ(get_bits(*b, pbit(2, 136), 1), 1u);
  auto back = decode_mgmt_packet(*b);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->data.sm.successor_chip, kHighId);
  p.data.sm.successor_chip = 0x20000;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "successor_chip = 0x20000"));
}

TEST(ChipId, DataHeadCarriesBitSixteenInBits107And108) {
  DataPacket p;
  p.head.kind = PacketKind::kMp;
  p.head.dest_node = kHighId;
  p.head.src_node = 0x10001;
  p.head.bytes = 8;
  auto flits = encode_data_packet(p);
  ASSERT_TRUE(flits.ok()) << flits.error().to_string();
  const auto& head = (*flits)[0].payload;
  EXPECT_EQ(get_bits(head, 16, 16), 0xABCDu);
  EXPECT_EQ(get_bits(head, 32, 16), 0x0001u);
  EXPECT_EQ(get_bits(head, 107, 1), 1u);
  EXPECT_EQ(get_bits(head, 108, 1), 1u);
  auto back = decode_data_packet(*flits);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->head.dest_node, kHighId);
  EXPECT_EQ(back->head.src_node, 0x10001u);
  p.head.dest_node = 0x20000;
  auto refused = encode_data_packet(p);
  EXPECT_TRUE(FailsWith(refused, "dest_node = 0x20000 exceeds the 17-bit chip id"));
  EXPECT_EQ(refused.error().id, 1707u);
}

TEST(ChipId, MpAndCpHeadersCarryBitSixteenInBit47) {
  const uint64_t w = mp_word::make(MpKind::kUser, 0, 1, 2, kHighId, 8, 0x1234);
  EXPECT_EQ((w >> 24) & 0xFFFF, 0xABCDu);
  EXPECT_EQ((w >> 47) & 1, 1u);
  EXPECT_EQ(mp_word::src_node(w), kHighId);
  EXPECT_EQ(mp_word::tag(w), 0x1234u);
  EXPECT_EQ(mp_word::length(w), 8u);
  Mp m;
  m.src_node = kHighId;
  auto b = encode_mp(m);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(decode_mp(*b)->src_node, kHighId);
  m.src_node = 0x20000;
  EXPECT_TRUE(FailsWith(encode_mp(m), "src_node = 131072 exceeds 131071"));
  Cp c;
  c.src_node = kHighId;
  auto cb = encode_cp(c);
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(decode_cp(*cb)->src_node, kHighId);
}

TEST(ChipId, RdmaDescriptorCarriesBitSixteenInBit14) {
  RdmaDescriptor d;
  d.op = RdmaOp::kWrite;
  d.remote_node = kHighId;
  d.length = 64;
  auto b = encode_rdma_descriptor(d);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(get_bits(*b, 16, 16), 0xABCDu);
  EXPECT_EQ(get_bits(*b, 14, 1), 1u);
  auto back = decode_rdma_descriptor(*b);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->remote_node, kHighId);
  d.remote_node = 0x20000;
  auto refused = encode_rdma_descriptor(d);
  EXPECT_TRUE(FailsWith(refused, "remote_node = 0x20000 exceeds the 17-bit chip id"));
  EXPECT_EQ(refused.error().id, 1414u);
}

}  // namespace chip_id_test
}  // namespace galaxy::wire
