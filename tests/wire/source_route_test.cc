#include "wire/source_route.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/bits.h"
#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

SourceRoute route(std::initializer_list<uint8_t> ports) {
  SourceRoute r;
  for (uint8_t p : ports) EXPECT_TRUE(r.push(p).ok());
  return r;
}

TEST(SourceRoute, GoldenThreeHops) {
  // hop_num 3 at bits 0-4, hops 3, 17, 31 at bits 5-9, 10-14, 15-19:
  // 00011 | 00011<<5 | 10001<<10 | 11111<<15 = 0xFC463.
  std::vector<uint8_t> buf(14, 0);
  ASSERT_TRUE(encode_source_route(route({3, 17, 31}), buf, 0).ok());
  EXPECT_EQ(hex(buf), std::string("63c40f").append(2 * 11, '0'));
}

TEST(SourceRoute, GoldenAtOddOffset) {
  std::vector<uint8_t> buf(15, 0);
  ASSERT_TRUE(encode_source_route(route({1}), buf, 3).ok());
  // hop_num 1 at bits 3-7 (0x08), hop0 = 1 at bits 8-12.
  EXPECT_EQ(hex(buf), std::string("0801").append(2 * 13, '0'));
}

TEST(SourceRoute, FullRouteFillsBits0To104) {
  SourceRoute r;
  for (int i = 0; i < kFieldRouteHops; ++i) ASSERT_TRUE(r.push(31).ok());
  std::vector<uint8_t> buf(14, 0);
  ASSERT_TRUE(encode_source_route(r, buf, 0).ok());
  EXPECT_EQ(get_bits(buf, 0, 5), 20u);
  for (unsigned i = 0; i < kFieldRouteHops; ++i) EXPECT_EQ(get_bits(buf, 5 + 5 * i, 5), 31u);
  EXPECT_EQ(buf[13], 0x01);  // bit 104 is the top bit of hop19, nothing beyond it
}

// The long variant: hop_num 22 in the field with hops 0-19, hops 20 and 21 in the extension's
// first ten bits; the extension then reads back into the route.
TEST(SourceRoute, GoldenLongRoute) {
  SourceRoute r;
  for (int i = 0; i < 22; ++i) ASSERT_TRUE(r.push(static_cast<uint8_t>(i % 7)).ok());
  EXPECT_TRUE(r.is_long());
  EXPECT_FALSE(r.needs_wide());
  std::vector<uint8_t> buf(14, 0), ext(8, 0);
  EXPECT_TRUE(FailsWith(encode_source_route(r, buf, 0), "hop_num = 22 exceeds 20"));
  ASSERT_TRUE(encode_source_route(r, buf, 0, true).ok());
  encode_source_route_ext(r, ext, 0);
  EXPECT_EQ(get_bits(buf, 0, 5), 22u);
  EXPECT_EQ(get_bits(buf, 5 + 5 * 19, 5), 19u % 7);
  // hop20 = 6 at bits 0-4, hop21 = 0 at bits 5-9: 0x06.
  EXPECT_EQ(hex(ext), "0600000000000000");
  auto d = decode_source_route(buf, 0);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  ASSERT_TRUE(decode_source_route_ext(*d, ext, 0).ok());
  EXPECT_EQ(*d, r);
  // Bits of a hop beyond hop_num in the extension are malformed.
  put_bits(ext, 5 * 3, 5, 4);  // hop23
  d = decode_source_route(buf, 0);
  EXPECT_TRUE(FailsWith(decode_source_route_ext(*d, ext, 0), "unused hop23 = 4"));
  // Long and through a port above 31: neither variant carries it.
  r.hops[3] = 40;
  EXPECT_FALSE(r.carried());
  EXPECT_TRUE(FailsWith(encode_source_route(r, buf, 0, true), "ports up to 31 only"));
}

TEST(SourceRoute, RandomRoundTrip) {
  std::mt19937 rng(2);
  for (int i = 0; i < 500; ++i) {
    SourceRoute r;
    unsigned n = rng() % (kFieldRouteHops + 1);
    for (unsigned h = 0; h < n; ++h) ASSERT_TRUE(r.push(static_cast<uint8_t>(rng() % 32)).ok());
    size_t offset = rng() % 20;
    std::vector<uint8_t> buf(17, 0);
    ASSERT_TRUE(encode_source_route(r, buf, offset).ok());
    auto d = decode_source_route(buf, offset);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, r);
  }
}

TEST(SourceRoute, PushLimits) {
  SourceRoute r;
  EXPECT_FALSE(r.push(128).ok());  // beyond the widest switch
  EXPECT_FALSE(r.needs_wide());
  ASSERT_TRUE(r.push(127).ok());  // the wide variant names it
  EXPECT_TRUE(r.needs_wide());
  r = {};
  for (int i = 0; i < kMaxRouteHops; ++i) ASSERT_TRUE(r.push(0).ok());
  Status s = r.push(1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("hop_num = 31"), std::string::npos);
}

TEST(SourceRoute, ToString) {
  EXPECT_EQ(route({3, 17, 0}).to_string(), "[3,17,0]");
  EXPECT_EQ(SourceRoute{}.to_string(), "[]");
}

TEST(SourceRoute, EncodeRejectsInvalidRoutes) {
  std::vector<uint8_t> buf(14, 0);
  SourceRoute r;
  r.hop_num = 21;
  EXPECT_TRUE(FailsWith(encode_source_route(r, buf, 0), "hop_num = 21 exceeds 20"));
  r = route({1});
  r.hops[0] = 40;
  EXPECT_TRUE(FailsWith(encode_source_route(r, buf, 0), "hop0 = 40"));
  r = route({1});
  r.hops[5] = 2;
  EXPECT_TRUE(FailsWith(encode_source_route(r, buf, 0), "unused hop5 = 2"));
  EXPECT_TRUE(FailsWith(encode_source_route(route({1}), buf, 8), "too small"));
}

TEST(SourceRoute, DecodeRejectsMalformed) {
  std::vector<uint8_t> buf(14, 0);
  put_bits(buf, 0, 5, 23);  // long: the field is valid, the extension holds hops 20-22
  EXPECT_TRUE(decode_source_route(buf, 0).ok());
  std::fill(buf.begin(), buf.end(), 0);
  put_bits(buf, 0, 5, 2);
  put_bits(buf, 5 + 5 * 7, 5, 9);
  EXPECT_TRUE(FailsWith(decode_source_route(buf, 0), "unused hop7 = 9"));
  EXPECT_TRUE(FailsWith(decode_source_route(buf, 8), "too short"));
  EXPECT_TRUE(FailsWith(decode_source_route(buf, 1000), "too short"));
}

}  // namespace
}  // namespace galaxy::wire
