// Bit-level field access for the wire formats (docs/protocol.md).
//
// Bit numbering: bit i of a buffer is bit (i % 8) of byte (i / 8), i.e. LSB-first within
// little-endian bytes; a field of width w at offset o holds its least significant bit at o.
// Every access is bounds-checked by the caller through `fits`; get/put assert it.
#pragma once

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace galaxy {

inline bool bits_fit(size_t buffer_bytes, size_t offset, unsigned width) {
  return width <= 64 && offset + width <= buffer_bytes * 8;
}

inline uint64_t get_bits(std::span<const uint8_t> buf, size_t offset, unsigned width) {
  assert(bits_fit(buf.size(), offset, width));
  // A field within one 8-byte word of the buffer: one load (the numbering is the little-endian
  // host's own), instead of a step per byte.
  if constexpr (std::endian::native == std::endian::little) {
    // Near the end of the buffer, the word is its last 8 bytes.
    const size_t first = buf.size() >= 8 ? std::min(offset / 8, buf.size() - 8) : SIZE_MAX;
    const size_t shift = offset - first * 8;
    if (first != SIZE_MAX && shift + width <= 64) {
      uint64_t w;
      std::memcpy(&w, buf.data() + first, 8);
      w >>= shift;
      return width == 64 ? w : w & ((uint64_t{1} << width) - 1);
    }
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < width;) {
    size_t bit = offset + i;
    unsigned in_byte = bit % 8;
    unsigned take = 8 - in_byte;
    if (take > width - i) take = width - i;
    uint64_t chunk = (buf[bit / 8] >> in_byte) & ((1u << take) - 1u);
    v |= chunk << i;
    i += take;
  }
  return v;
}

inline void put_bits(std::span<uint8_t> buf, size_t offset, unsigned width, uint64_t value) {
  assert(bits_fit(buf.size(), offset, width));
  if constexpr (std::endian::native == std::endian::little) {
    const size_t first = buf.size() >= 8 ? std::min(offset / 8, buf.size() - 8) : SIZE_MAX;
    const size_t shift = offset - first * 8;
    if (first != SIZE_MAX && shift + width <= 64) {
      const uint64_t field = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
      uint64_t w;
      std::memcpy(&w, buf.data() + first, 8);
      w = (w & ~(field << shift)) | ((value & field) << shift);
      std::memcpy(buf.data() + first, &w, 8);
      return;
    }
  }
  for (unsigned i = 0; i < width;) {
    size_t bit = offset + i;
    unsigned in_byte = bit % 8;
    unsigned take = 8 - in_byte;
    if (take > width - i) take = width - i;
    uint8_t mask = static_cast<uint8_t>(((1u << take) - 1u) << in_byte);
    uint8_t chunk = static_cast<uint8_t>(((value >> i) & ((1u << take) - 1u)) << in_byte);
    buf[bit / 8] = static_cast<uint8_t>((buf[bit / 8] & ~mask) | chunk);
    i += take;
  }
}

inline constexpr uint64_t low_mask(unsigned width) {
  return width >= 64 ? ~uint64_t{0} : ((uint64_t{1} << width) - 1);
}

}  // namespace galaxy
