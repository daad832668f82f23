#include "wire/cp.h"

#include <gtest/gtest.h>

#include <random>

#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

TEST(Cp, GoldenReplacingCp) {
  Cp c;
  c.target_vp = 3;
  c.src_vp = 4;
  c.src_node = 0x0102;
  c.increment = 2;
  c.write_to_mpq = true;
  c.replace_data = true;
  c.length = 2;
  c.data[0] = 0xAA;
  c.data[1] = 0xBB;
  auto b = encode_cp(c);
  ASSERT_TRUE(b.ok());
  // kind 1 | flags 0b0110 << 4 = 0x61; bits 8-19 = 3 | 4 << 6 = 0x103; src_node 0x0102 in
  // bytes 3-4; length 2 in byte 5; increment 2 in bytes 6-7.
  EXPECT_EQ(hex(*b),
            "6103010201020200"
            "aabb" +
                std::string(2 * 118, '0'));
}

TEST(Cp, IsAnMpOfKindCp) {
  auto b = encode_cp(Cp{});
  ASSERT_TRUE(b.ok());
  auto m = decode_mp(*b);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, MpKind::kCp);
  EXPECT_EQ(m->tag, 1);  // the increment
}

TEST(Cp, RandomRoundTrip) {
  std::mt19937_64 rng(6);
  for (int i = 0; i < 1000; ++i) {
    Cp c;
    c.target_vp = static_cast<uint8_t>(rng() % 64);
    c.src_vp = static_cast<uint8_t>(rng() % 64);
    c.src_node = static_cast<uint16_t>(rng());
    c.increment = static_cast<uint16_t>(1 + rng() % 65535);
    c.write_to_mpq = rng() % 2;
    c.replace_data = rng() % 2;
    c.interrupt = rng() % 2;
    c.length = static_cast<uint8_t>(rng() % (kMpPayloadBytes + 1));
    for (auto& x : c.data) x = static_cast<uint8_t>(rng());
    auto b = encode_cp(c);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    auto d = decode_cp(*b);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, c);
  }
}

TEST(Cp, EncodeRejectsOutOfRangeFields) {
  Cp c;
  c.increment = 0;
  EXPECT_TRUE(FailsWith(encode_cp(c), "cp: increment = 0"));
  c = Cp{};
  c.src_vp = 100;
  EXPECT_TRUE(FailsWith(encode_cp(c), "cp: mp: src_vp = 100"));
}

TEST(Cp, DecodeRejectsMalformed) {
  MpBytes good = *encode_cp(Cp{});
  EXPECT_TRUE(FailsWith(decode_cp(std::span(good).first(5)), "cp: mp: length = 5 bytes"));
  EXPECT_TRUE(FailsWith(decode_cp(*encode_mp(Mp{})), "cp: kind = 0, expected 1"));
  MpBytes b = good;
  b[0] |= 0x80;
  EXPECT_TRUE(FailsWith(decode_cp(b), "flags = 0x8 has reserved bit 3"));
  b = good;
  b[6] = 0;
  EXPECT_TRUE(FailsWith(decode_cp(b), "increment = 0"));
  b = good;
  b[5] = 125;
  EXPECT_TRUE(FailsWith(decode_cp(b), "length = 125"));
}

}  // namespace
}  // namespace galaxy::wire
