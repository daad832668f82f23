#include "wire/flit.h"

#include <gtest/gtest.h>

#include <random>

#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

TEST(Flit, GoldenHeadFlit) {
  // kind 1, vc 3 -> byte 0 bits 0-4 = 0b01101; payload[0] = 0xAB at bits 6-13,
  // payload[23] = 0xCD at bits 190-197 (worked by hand in docs/protocol.md).
  Flit f;
  f.kind = FlitKind::kHead;
  f.vc = 3;
  f.payload[0] = 0xAB;
  f.payload[23] = 0xCD;
  EXPECT_EQ(hex(encode_flit(f)), "cd2a" + std::string(2 * 21, '0') + "4033");
}

TEST(Flit, GoldenBodyFlitAllOnesPayload) {
  Flit f;
  f.kind = FlitKind::kTail;
  f.vc = 5;
  f.payload.fill(0xFF);
  // kind 2, vc 5 -> 0b10110; payload bits 6-197 all ones.
  EXPECT_EQ(hex(encode_flit(f)), "d6" + std::string(2 * 23, 'f') + "3f");
}

TEST(Flit, RandomRoundTrip) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    Flit f;
    f.kind = static_cast<FlitKind>(rng() % 4);
    f.vc = static_cast<uint8_t>(rng() % kNumVcs);
    for (auto& x : f.payload) x = static_cast<uint8_t>(rng());
    auto d = decode_flit(encode_flit(f));
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, f);
  }
}

TEST(Flit, RejectsMalformed) {
  FlitBytes good = encode_flit(Flit{});
  EXPECT_TRUE(FailsWith(decode_flit(std::span(good).first(24)), "length = 24"));
  FlitBytes b = good;
  b[0] = 6 << 2;  // vc 6
  EXPECT_TRUE(FailsWith(decode_flit(b), "vc = 6"));
  b = good;
  b[0] = 0x20;  // reserved bit 5
  EXPECT_TRUE(FailsWith(decode_flit(b), "reserved bit 5"));
  b = good;
  b[24] = 0x40;  // bit 198
  EXPECT_TRUE(FailsWith(decode_flit(b), "padding bits 198-199"));
}

TEST(Flit, KindNames) {
  EXPECT_EQ(flit_kind_name(FlitKind::kHeadTail), "head+tail");
  EXPECT_EQ(flit_kind_name(FlitKind::kBody), "body");
}

}  // namespace
}  // namespace galaxy::wire
