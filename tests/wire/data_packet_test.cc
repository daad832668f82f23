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

}  // namespace
}  // namespace galaxy::wire
