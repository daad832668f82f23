#include "base/bits.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

namespace galaxy {
namespace {

// Bit-by-bit oracle for the numbering in bits.h: bit i is bit (i % 8) of byte (i / 8).
uint64_t reference_get(const std::vector<uint8_t>& buf, size_t offset, unsigned width) {
  uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i)
    v |= uint64_t{(buf[(offset + i) / 8] >> ((offset + i) % 8)) & 1u} << i;
  return v;
}

TEST(BitsTest, LsbFirstNumbering) {
  std::array<uint8_t, 2> le{0x34, 0x12};
  EXPECT_EQ(get_bits(le, 0, 16), 0x1234u);
  EXPECT_EQ(get_bits(le, 4, 8), 0x23u);
  EXPECT_EQ(get_bits(le, 2, 1), 1u);
  EXPECT_EQ(get_bits(le, 3, 1), 0u);
  EXPECT_EQ(get_bits(le, 5, 0), 0u);

  std::array<uint8_t, 2> buf{};
  put_bits(buf, 3, 5, 0b10110);
  EXPECT_EQ(buf[0], 0b10110000);
  EXPECT_EQ(buf[1], 0);
  buf = {};
  put_bits(buf, 6, 4, 0xF);  // straddles the byte boundary
  EXPECT_EQ(buf[0], 0xC0);
  EXPECT_EQ(buf[1], 0x03);
}

TEST(BitsTest, PutOnlyTouchesItsFieldAndTruncatesTheValue) {
  std::array<uint8_t, 3> buf;
  buf.fill(0xFF);
  put_bits(buf, 5, 9, 0);
  EXPECT_EQ(buf[0], 0x1F);
  EXPECT_EQ(buf[1], 0xC0);
  EXPECT_EQ(buf[2], 0xFF);
  put_bits(buf, 5, 9, 0xFFFF'FFFF'FFFF'FFFF);  // bits above the width are ignored
  EXPECT_EQ(buf[0], 0xFF);
  EXPECT_EQ(buf[1], 0xFF);
  EXPECT_EQ(buf[2], 0xFF);
}

TEST(BitsTest, SixtyFourBitFieldsAtEveryAlignment) {
  for (size_t offset = 0; offset < 8; ++offset) {
    std::array<uint8_t, 9> buf{};
    put_bits(buf, offset, 64, 0x8123'4567'89AB'CDEFull);
    EXPECT_EQ(get_bits(buf, offset, 64), 0x8123'4567'89AB'CDEFull) << offset;
    EXPECT_EQ(get_bits(buf, offset, 1), 1u) << offset;
    EXPECT_EQ(get_bits(buf, offset + 63, 1), 1u) << offset;
  }
}

TEST(BitsTest, RandomRoundTripsAgainstABitByBitOracle) {
  std::mt19937_64 rng(20240601);
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> buf(12);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    unsigned width = 1 + static_cast<unsigned>(rng() % 64);
    size_t offset = rng() % (buf.size() * 8 - width + 1);
    ASSERT_TRUE(bits_fit(buf.size(), offset, width));
    EXPECT_EQ(get_bits(buf, offset, width), reference_get(buf, offset, width));

    std::vector<uint8_t> before = buf;
    uint64_t value = rng() & low_mask(width);
    put_bits(buf, offset, width, value);
    ASSERT_EQ(get_bits(buf, offset, width), value) << offset << "/" << width;
    ASSERT_EQ(reference_get(buf, offset, width), value);
    for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
      if (bit >= offset && bit < offset + width) continue;
      ASSERT_EQ(reference_get(buf, bit, 1), reference_get(before, bit, 1))
          << "bit " << bit << " changed by put at " << offset << "/" << width;
    }
  }
}

TEST(BitsTest, FitAndMask) {
  EXPECT_TRUE(bits_fit(2, 10, 6));
  EXPECT_FALSE(bits_fit(2, 11, 6));
  EXPECT_TRUE(bits_fit(8, 0, 64));
  EXPECT_FALSE(bits_fit(9, 0, 65));
  EXPECT_TRUE(bits_fit(0, 0, 0));
  EXPECT_EQ(low_mask(0), 0u);
  EXPECT_EQ(low_mask(5), 31u);
  EXPECT_EQ(low_mask(63), 0x7FFF'FFFF'FFFF'FFFFull);
  EXPECT_EQ(low_mask(64), ~uint64_t{0});
}

}  // namespace
}  // namespace galaxy
