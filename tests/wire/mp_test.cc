#include "wire/mp.h"

#include <gtest/gtest.h>

#include <random>

#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

TEST(Mp, GoldenHeader) {
  Mp m;
  m.kind = MpKind::kMgmt;      // bits 0-3 = 2
  m.flags = kMpFlagInterrupt;  // bits 4-7 = 1
  m.target_vp = 39;            // bits 8-13
  m.src_vp = 1;                // bits 14-19
  m.src_node = 0xABCD;         // bits 24-39
  m.length = 120;              // bits 40-46
  m.tag = 0x1234;              // bits 48-63
  m.payload[0] = 0x55;
  m.payload[119] = 0xEE;
  auto b = encode_mp(m);
  ASSERT_TRUE(b.ok());
  // byte 0 = 0x12; bits 8-19 = 39 | 1 << 6 = 0x067 -> bytes 1, 2 = 0x67, 0x00;
  // bytes 3-4 = 0xCD 0xAB; byte 5 = 120 = 0x78; bytes 6-7 = 0x34 0x12.
  EXPECT_EQ(hex(*b),
            "126700cdab783412"
            "55" +
                std::string(2 * 118, '0') + "ee");
}

// The header word is the little-endian reading of bytes 0-7 (how an MPQ moves it); the lap
// an MPQ writes into bits 20-23 is reserved on the wire.
TEST(Mp, HeaderWordIsBytesZeroToSeven) {
  const uint64_t w = mp_word::make(MpKind::kMgmt, kMpFlagInterrupt, 39, 1, 0xABCD, 120, 0x1234);
  EXPECT_EQ(w, 0x123478abcd006712ull);
  EXPECT_EQ(mp_word::kind(w), 2);
  EXPECT_EQ(mp_word::flags(w), kMpFlagInterrupt);
  EXPECT_EQ(mp_word::target_vp(w), 39);
  EXPECT_EQ(mp_word::src_vp(w), 1);
  EXPECT_EQ(mp_word::src_node(w), 0xABCD);
  EXPECT_EQ(mp_word::length(w), 120);
  EXPECT_EQ(mp_word::tag(w), 0x1234);
  EXPECT_EQ(mp_word::lap(w), 0);
  const uint64_t lapped = mp_word::with_lap(w, 9);
  EXPECT_EQ(mp_word::lap(lapped), 9);
  EXPECT_EQ(lapped & ~(uint64_t{0xF} << 20), w);
  std::array<uint8_t, kMpBytes> b{};
  for (unsigned i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(lapped >> (8 * i));
  EXPECT_TRUE(FailsWith(decode_mp(b), "reserved header bits 20-23 set"));
  for (unsigned i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(w >> (8 * i));
  auto m = decode_mp(b);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->src_node, 0xABCD);
}

TEST(Mp, RandomRoundTrip) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000; ++i) {
    Mp m;
    m.kind = static_cast<MpKind>(rng() % (kMaxMpKind + 1));
    m.flags = static_cast<uint8_t>(rng() % 16);
    m.target_vp = static_cast<uint8_t>(rng() % 64);
    m.src_vp = static_cast<uint8_t>(rng() % 64);
    m.src_node = static_cast<uint16_t>(rng());
    m.length = static_cast<uint8_t>(rng() % (kMpPayloadBytes + 1));
    m.tag = static_cast<uint16_t>(rng());
    for (auto& x : m.payload) x = static_cast<uint8_t>(rng());
    auto b = encode_mp(m);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    auto d = decode_mp(*b);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, m);
  }
}

TEST(Mp, EncodeRejectsOutOfRangeFields) {
  Mp m;
  m.length = 121;
  EXPECT_TRUE(FailsWith(encode_mp(m), "mp: length = 121 exceeds 120"));
  m = Mp{};
  m.target_vp = 64;
  EXPECT_TRUE(FailsWith(encode_mp(m), "target_vp = 64"));
  m = Mp{};
  m.flags = 16;
  EXPECT_TRUE(FailsWith(encode_mp(m), "flags = 16"));
  m = Mp{};
  m.kind = static_cast<MpKind>(3);
  EXPECT_TRUE(FailsWith(encode_mp(m), "kind = 3"));
}

TEST(Mp, DecodeRejectsMalformed) {
  MpBytes good = *encode_mp(Mp{});
  EXPECT_TRUE(FailsWith(decode_mp(std::span(good).first(127)), "mp: length = 127 bytes"));
  MpBytes b = good;
  b[0] = 0x0F;
  EXPECT_TRUE(FailsWith(decode_mp(b), "kind = 15"));
  b = good;
  b[2] = 0x10;  // bit 20
  EXPECT_TRUE(FailsWith(decode_mp(b), "reserved header bits"));
  b = good;
  b[5] |= 0x80;  // bit 47: bit 16 of src_node
  ASSERT_TRUE(decode_mp(b).ok());
  EXPECT_EQ(decode_mp(b)->src_node, decode_mp(good)->src_node | 0x10000);
  b = good;
  b[5] = 121;
  EXPECT_TRUE(FailsWith(decode_mp(b), "length = 121 exceeds 120"));
}

}  // namespace
}  // namespace galaxy::wire
