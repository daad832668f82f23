// Source-route field of management packets (SYSTEM.md 2.2): <HopNum, Hop0, ..., Hop19>,
// 5 bits each, 105 bits. Hop i is the output port taken at the i-th NRC on the way.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace galaxy::wire {

inline constexpr unsigned kSourceRouteBits = 105;
inline constexpr uint8_t kMaxRouteHops = 20;

struct SourceRoute {
  uint8_t hop_num = 0;                        // number of valid hops, 0..20
  std::array<uint8_t, kMaxRouteHops> hops{};  // output port per hop, 0..31; unused hops are 0

  bool operator==(const SourceRoute&) const = default;
  // Appends a hop; error if the route already has 20 hops or the port exceeds 31.
  Status push(uint8_t port);
  std::string to_string() const;  // "[3,17,0]"
};

// Writes the 105-bit field at `bit_offset` of `buf`; error if the route is invalid
// (hop_num > 20, a port > 31, or a non-zero unused hop) or the buffer is too small.
Status encode_source_route(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset);
// Reads and validates it: rejects hop_num > 20 and non-zero unused hops, naming the field.
Result<SourceRoute> decode_source_route(std::span<const uint8_t> buf, size_t bit_offset);

}  // namespace galaxy::wire
