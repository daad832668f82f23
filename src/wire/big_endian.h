// Big-endian (network order) integers in byte buffers: the InfiniBand formats (MADs, SMPs and
// their attributes, IBA 13.4 and 14.2). Callers check the bounds; these assume them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace galaxy::wire {

inline uint64_t get_be(std::span<const uint8_t> b, size_t at, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v = (v << 8) | b[at + i];
  return v;
}

inline void put_be(std::span<uint8_t> b, size_t at, unsigned n, uint64_t v) {
  for (unsigned i = n; i-- > 0; v >>= 8) b[at + i] = static_cast<uint8_t>(v);
}

// A field of `width` bits within byte `at`, `shift` bits above the byte's least significant bit
// (IBA draws fields most significant bit first: "PortState, bits 4-7 of byte 32" is shift 0).
inline uint8_t get_bits_be(std::span<const uint8_t> b, size_t at, unsigned shift, unsigned width) {
  return static_cast<uint8_t>((b[at] >> shift) & ((1u << width) - 1u));
}

inline void put_bits_be(std::span<uint8_t> b, size_t at, unsigned shift, unsigned width,
                        unsigned v) {
  const unsigned mask = ((1u << width) - 1u) << shift;
  b[at] = static_cast<uint8_t>((b[at] & ~mask) | ((v << shift) & mask));
}

}  // namespace galaxy::wire
