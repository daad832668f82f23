#include "wire/data_packet.h"

#include <gtest/gtest.h>

#include <random>

#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

DataHead sample() {
  DataHead h;
  h.kind = PacketKind::kRdmaWrite;
  h.vc = 1;
  h.dest_node = 0x4321;
  h.src_node = 0x0007;
  h.dest_vp = 8;
  h.src_vp = 63;
  h.length_flits = 7;
  return h;
}

TEST(DataHead, Golden) {
  auto f = encode_data_head(sample(), false);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, FlitKind::kHead);
  EXPECT_EQ(f->vc, 1);
  // kind 1 | dest_vp 8 << 4 | src_vp 63 << 10 = 0xFC81; dest_node 0x4321; src_node 7;
  // length 7 at bits 48-54.
  EXPECT_EQ(hex(f->payload), "81fc214307000700" + std::string(2 * 16, '0'));
  EXPECT_EQ(hex(encode_flit(*f)), "45207fc8d001c00100" + std::string(2 * 16, '0'));
}

TEST(DataHead, RandomRoundTrip) {
  std::mt19937_64 rng(8);
  const uint8_t vcs[] = {0, 1, 2, 4, 5};
  for (int i = 0; i < 1000; ++i) {
    DataHead h;
    h.kind = static_cast<PacketKind>(rng() % (kMaxPacketKind + 1));
    h.vc = vcs[rng() % 5];
    h.dest_node = static_cast<uint16_t>(rng());
    h.src_node = static_cast<uint16_t>(rng());
    h.dest_vp = static_cast<uint8_t>(rng() % 64);
    h.src_vp = static_cast<uint8_t>(rng() % 64);
    h.length_flits = static_cast<uint16_t>(1 + rng() % 64);
    auto f = encode_data_head(h, h.length_flits == 1);
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    auto back = decode_flit(encode_flit(*f));
    ASSERT_TRUE(back.ok());
    auto d = decode_data_head(*back);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, h);
  }
}

TEST(DataHead, EncodeRejectsOutOfRangeFields) {
  DataHead h = sample();
  h.vc = kMgmtVc;
  EXPECT_TRUE(FailsWith(encode_data_head(h, false), "vc = 3"));
  h = sample();
  h.length_flits = 65;
  EXPECT_TRUE(FailsWith(encode_data_head(h, false), "length_flits = 65"));
  h = sample();
  EXPECT_TRUE(FailsWith(encode_data_head(h, true), "single_flit = true"));
  h.kind = static_cast<PacketKind>(7);
  EXPECT_TRUE(FailsWith(encode_data_head(h, false), "kind = 7"));
  h = sample();
  h.dest_vp = 64;
  EXPECT_TRUE(FailsWith(encode_data_head(h, false), "dest_vp = 64"));
}

TEST(DataHead, DecodeRejectsMalformed) {
  Flit good = *encode_data_head(sample(), false);
  Flit f = good;
  f.kind = FlitKind::kBody;
  EXPECT_TRUE(FailsWith(decode_data_head(f), "flit kind = body"));
  f = good;
  f.vc = 3;
  EXPECT_TRUE(FailsWith(decode_data_head(f), "vc = 3"));
  f = good;
  f.vc = 7;
  EXPECT_TRUE(FailsWith(decode_data_head(f), "vc = 7"));
  f = good;
  f.payload[0] = 0x8F;
  EXPECT_TRUE(FailsWith(decode_data_head(f), "kind = 15"));
  f = good;
  f.payload[6] = 0;
  EXPECT_TRUE(FailsWith(decode_data_head(f), "length_flits = 0"));
  f = good;
  f.kind = FlitKind::kHeadTail;
  EXPECT_TRUE(FailsWith(decode_data_head(f), "length_flits = 7 in a head+tail flit"));
  f = good;
  f.payload[23] = 1;
  EXPECT_TRUE(FailsWith(decode_data_head(f), "reserved payload bits"));
}

TEST(DataPacket, TransfersAreCutAtDestinationBoundaries) {
  EXPECT_EQ(packets_for(0, 128), 1u);
  EXPECT_EQ(packets_for(1, 128), 2u);
  EXPECT_EQ(packets_for(127, 2), 2u);
  EXPECT_EQ(packets_for(128, 1), 1u);
  EXPECT_EQ(packets_for(0, 0), 1u);
  EXPECT_EQ(packets_for(64, 1 << 20), (1u << 13) + 1);
  // Flits: a head flit, then the data in 24-byte (192-bit) flit payloads.
  EXPECT_EQ(data_packet_flits(0), 1u);
  EXPECT_EQ(data_packet_flits(24), 2u);
  EXPECT_EQ(data_packet_flits(25), 3u);
  EXPECT_EQ(data_packet_flits(128), 7u);
  // 3 bytes before a boundary, one whole block, 5 after: 3 packets of 3, 128 and 5 bytes.
  EXPECT_EQ(transfer_traffic(125, 136), (Traffic{3, 136, 2 + 7 + 2}));
  EXPECT_EQ(transfer_traffic(0, 0), (Traffic{1, 0, 1}));
  // Every packet and byte of a transfer is counted once, whatever the alignment.
  for (uint64_t addr : {0u, 1u, 64u, 127u, 128u, 1000u})
    for (uint64_t len : {1u, 127u, 128u, 129u, 4096u, 100000u}) {
      Traffic t = transfer_traffic(addr, len);
      EXPECT_EQ(t.packets, packets_for(addr, len)) << addr << "+" << len;
      EXPECT_EQ(t.bytes, len);
      EXPECT_GE(t.flits, t.packets + (len + kFlitPayloadBytes - 1) / kFlitPayloadBytes);
      EXPECT_LE(t.flits, t.packets * data_packet_flits(kDataPacketBytes));
    }
}

}  // namespace
}  // namespace galaxy::wire
