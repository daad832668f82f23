#include "wire/crc16.h"

#include <array>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

constexpr uint16_t kPolynomial = 0x1021;

constexpr std::array<uint16_t, 256> make_table() {
  std::array<uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    uint16_t c = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) {
      c = static_cast<uint16_t>((c & 0x8000) ? (c << 1) ^ kPolynomial : c << 1);
    }
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kTable = make_table();

uint16_t feed_byte(uint16_t crc, uint8_t byte) {
  return static_cast<uint16_t>((crc << 8) ^ kTable[((crc >> 8) ^ byte) & 0xFF]);
}

}  // namespace

namespace {
// Slicing by 8: kSlices[k][x] is the CRC (from 0) of byte x followed by k zero bytes, so eight
// bytes fold in with eight lookups instead of eight dependent steps.
constexpr std::array<std::array<uint16_t, 256>, 8> make_slices() {
  std::array<std::array<uint16_t, 256>, 8> t{};
  t[0] = make_table();
  for (size_t k = 1; k < 8; ++k)
    for (unsigned x = 0; x < 256; ++x) {
      const uint16_t prev = t[k - 1][x];
      t[k][x] = static_cast<uint16_t>((prev << 8) ^ t[0][prev >> 8]);
    }
  return t;
}
constexpr std::array<std::array<uint16_t, 256>, 8> kSlices = make_slices();
}  // namespace

uint16_t crc16(std::span<const uint8_t> data, uint16_t crc) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  for (; n >= 8; n -= 8, p += 8) {
    crc = static_cast<uint16_t>(kSlices[7][(p[0] ^ (crc >> 8)) & 0xFF] ^
                                kSlices[6][(p[1] ^ crc) & 0xFF] ^ kSlices[5][p[2]] ^
                                kSlices[4][p[3]] ^ kSlices[3][p[4]] ^ kSlices[2][p[5]] ^
                                kSlices[1][p[6]] ^ kSlices[0][p[7]]);
  }
  for (; n > 0; --n, ++p) crc = feed_byte(crc, *p);
  return crc;
}

// The range is read as consecutive 8-bit values (get_bits, the last one possibly shorter),
// each fed most significant bit first; on whole bytes this equals crc16().
uint16_t crc16_bits(std::span<const uint8_t> data, size_t offset, size_t width, uint16_t crc) {
  if (offset + width > data.size() * 8) return crc;  // callers check bounds; never read past
  size_t end = offset + width;
  for (; offset + 8 <= end; offset += 8) {
    crc = feed_byte(crc, static_cast<uint8_t>(get_bits(data, offset, 8)));
  }
  unsigned rest = static_cast<unsigned>(end - offset);
  if (rest > 0) {
    uint64_t v = get_bits(data, offset, rest);
    for (unsigned i = rest; i-- > 0;) {
      bool in = (v >> i) & 1;
      bool top = crc & 0x8000;
      crc = static_cast<uint16_t>(crc << 1);
      if (in != top) crc ^= kPolynomial;
    }
  }
  return crc;
}

}  // namespace galaxy::wire
