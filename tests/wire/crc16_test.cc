#include "wire/crc16.h"

#include <gtest/gtest.h>

#include <random>
#include <string_view>
#include <vector>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Crc16, CheckValue) {
  EXPECT_EQ(crc16(bytes_of("123456789")), 0x29B1);
}

TEST(Crc16, EmptyIsInitialValue) {
  EXPECT_EQ(crc16({}), 0xFFFF);
}

TEST(Crc16, ChainsAcrossCalls) {
  EXPECT_EQ(crc16(bytes_of("6789"), crc16(bytes_of("12345"))), 0x29B1);
}

TEST(Crc16, BitsOnWholeBytesEqualBytes) {
  auto b = bytes_of("123456789");
  EXPECT_EQ(crc16_bits(b, 0, 72), 0x29B1);
  EXPECT_EQ(crc16_bits(b, 8, 64), crc16(b.subspan(1)));
}

TEST(Crc16, ManyBytesAtATimeEqualOneByteAtATime) {
  // crc16 folds in 16 bytes per step (by carry-less multiplication where the CPU has it, from
  // 48 bytes on, with four states over 64-byte blocks from 128 bytes on, eight states over
  // 128-byte blocks from 256 bytes on where it has VPCLMULQDQ; by tables otherwise);
  // crc16_bits feeds one byte per step: every length and starting value gives the same CRC.
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(1100);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n = 0; n <= buf.size(); ++n) {
    const uint16_t init = static_cast<uint16_t>(rng());
    std::span<const uint8_t> d(buf.data(), n);
    ASSERT_EQ(crc16(d, init), crc16_bits(d, 0, n * 8, init)) << n << " bytes";
  }
}

// Link frames are tens of kilobytes: where the CPU multiplies four pairs at once, crc16 folds
// 128 bytes a step from 256 bytes on; long buffers of every remainder agree with the bytewise
// definition too.
TEST(Crc16, LongBuffersEqualOneByteAtATime) {
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(33000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (const size_t n :
       {size_t{4095}, size_t{4096}, size_t{8200}, size_t{32768}, size_t{32791}, size_t{33000}}) {
    const uint16_t init = static_cast<uint16_t>(rng());
    std::span<const uint8_t> d(buf.data(), n);
    ASSERT_EQ(crc16(d, init), crc16_bits(d, 0, n * 8, init)) << n << " bytes";
    ASSERT_EQ(crc16(d.subspan(3), init), crc16_bits(d, 24, (n - 3) * 8, init)) << n << " - 3";
  }
}

TEST(Crc16, BitsAtAnOffsetEqualShiftedBytes) {
  // "123456789" stored 3 bits further along gives the same CRC when read from bit 3.
  auto msg = bytes_of("123456789");
  std::vector<uint8_t> buf(10, 0);
  for (size_t i = 0; i < msg.size(); ++i) put_bits(buf, 3 + 8 * i, 8, msg[i]);
  EXPECT_EQ(crc16_bits(buf, 3, 72), 0x29B1);
}

TEST(Crc16, PartialBitsMatchBitwiseDefinition) {
  // 5 bits 10110 fed MSB first from 0xFFFF, computed by hand with the polynomial 0x1021.
  uint16_t crc = 0xFFFF;
  for (int bit : {1, 0, 1, 1, 0}) {
    bool top = crc & 0x8000;
    crc = static_cast<uint16_t>(crc << 1);
    if (top != static_cast<bool>(bit)) crc ^= 0x1021;
  }
  std::vector<uint8_t> buf = {0x16};  // value 0b10110 in bits 0-4
  EXPECT_EQ(crc16_bits(buf, 0, 5), crc);
}

TEST(Crc16, BitsAtEveryOffsetAndLengthMatchTheBitwiseDefinition) {
  // The reference: one bit at a time, 8-bit values (the last possibly shorter) MSB first.
  auto bitwise = [](std::span<const uint8_t> d, size_t offset, size_t width, uint16_t crc) {
    for (size_t at = offset; at < offset + width; at += 8) {
      const unsigned w = static_cast<unsigned>(std::min<size_t>(8, offset + width - at));
      const uint64_t v = get_bits(d, at, w);
      for (unsigned i = w; i-- > 0;) {
        const bool top = crc & 0x8000;
        crc = static_cast<uint16_t>(crc << 1);
        if (static_cast<bool>((v >> i) & 1) != top) crc ^= 0x1021;
      }
    }
    return crc;
  };
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(160);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 16; ++offset)
    for (size_t width = 0; offset + width <= buf.size() * 8; width += 1 + width / 3) {
      const uint16_t init = static_cast<uint16_t>(rng());
      ASSERT_EQ(crc16_bits(buf, offset, width, init), bitwise(buf, offset, width, init))
          << "offset " << offset << " width " << width;
    }
}

TEST(Crc16, DetectsEverySingleBitFlip) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(24);
  for (auto& x : buf) x = static_cast<uint8_t>(rng());
  uint16_t good = crc16_bits(buf, 5, 180);
  for (size_t bit = 5; bit < 185; ++bit) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(crc16_bits(buf, 5, 180), good) << "bit " << bit;
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

TEST(Crc16, OutOfBoundsRangeReadsNothing) {
  std::vector<uint8_t> buf(2, 0xAA);
  EXPECT_EQ(crc16_bits(buf, 10, 20, 0x1234), 0x1234);
}

}  // namespace
}  // namespace galaxy::wire
