// Source-route field of management packets (SYSTEM.md 2.2): <HopNum, Hop0, ..., Hop19>,
// 5 bits each, 105 bits. Hop i is the output port taken at the i-th NRC on the way.
// Switches wider than 32 ports are named by the wide variant (docs/protocol.md): the same
// 105-bit field holds each hop's low 5 bits and a 60-bit extension its high 3 bits, like the
// 8-bit port fields of InfiniBand's directed-route SMP.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "base/radix.h"
#include "base/status.h"

namespace galaxy::wire {

inline constexpr unsigned kSourceRouteBits = 105;
inline constexpr uint8_t kMaxRouteHops = 20;
// The highest port the TH-2 field's 5-bit hops name; higher ones need the wide variant.
inline constexpr uint8_t kMaxNarrowRoutePort = 31;
// The wide variant's extension: 3 high bits per hop, hop i at bits 3i..3i+2.
inline constexpr unsigned kRouteHighBits = 3;
inline constexpr unsigned kSourceRouteExtBits = kRouteHighBits * kMaxRouteHops;  // 60

struct SourceRoute {
  uint8_t hop_num = 0;  // number of valid hops, 0..20
  // Output port per hop, 0..kMaxSwitchPorts-1; unused hops are 0.
  std::array<uint8_t, kMaxRouteHops> hops{};

  bool operator==(const SourceRoute&) const = default;
  // Appends a hop; error if the route already has 20 hops or the port is beyond the widest
  // switch.
  Status push(uint8_t port);
  // Whether a hop names a port above 31, so that the route needs the wide variant.
  bool needs_wide() const;
  std::string to_string() const;  // "[3,17,0]"
};

// Writes the 105-bit field at `bit_offset` of `buf`; error if the route is invalid
// (hop_num > 20, a non-zero unused hop, or a port > 31 unless `wide`, which writes each hop's
// low 5 bits) or the buffer is too small.
Status encode_source_route(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset,
                           bool wide = false);
// Reads and validates it: rejects hop_num > 20 and non-zero unused hops, naming the field.
Result<SourceRoute> decode_source_route(std::span<const uint8_t> buf, size_t bit_offset);
// The wide variant's 60-bit extension of a route encoded with `wide`: each hop's high 3 bits.
void encode_source_route_ext(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset);
// Adds the extension at `bit_offset` to `r` as decoded from the 105-bit field; rejects high
// bits on unused hops.
Status decode_source_route_ext(SourceRoute& r, std::span<const uint8_t> buf, size_t bit_offset);

}  // namespace galaxy::wire
