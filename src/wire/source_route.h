// Source-route field of management packets (docs/system.md 2.2): <HopNum, Hop0, ..., Hop19>,
// 5 bits each, 105 bits. Hop i is the output port taken at the i-th NRC on the way.
// A 60-bit extension carries what the field cannot (docs/protocol.md), one of two ways, told
// apart by the route's own hop_num:
//   * wide (hop_num <= 20): switches wider than 32 ports; the field holds each hop's low 5 bits
//     and the extension its high 3 bits, like the 8-bit port fields of InfiniBand's
//     directed-route SMP;
//   * long (hop_num 21-31, HopNum's 5 bits): routes of more than 20 NRCs (a large torus); the
//     extension holds hops 20-30, 5 bits each. Every port of a long route is at most 31.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "base/radix.h"
#include "base/status.h"

namespace galaxy::wire {

inline constexpr unsigned kSourceRouteBits = 105;
// Hops the 105-bit field holds; a route may have up to kMaxRouteHops with the extension.
inline constexpr uint8_t kFieldRouteHops = 20;
inline constexpr uint8_t kMaxRouteHops = 31;
// The highest port the TH-2 field's 5-bit hops name; higher ones need the wide variant.
inline constexpr uint8_t kMaxNarrowRoutePort = 31;
// The wide variant's extension: 3 high bits per hop, hop i at bits 3i..3i+2.
inline constexpr unsigned kRouteHighBits = 3;
inline constexpr unsigned kSourceRouteExtBits = kRouteHighBits * kFieldRouteHops;  // 60
// The long variant's extension: 5 bits per hop beyond the field's 20, hop 20 + i at bits 5i..5i+4.
inline constexpr unsigned kLongHopBits = 5;
static_assert(kLongHopBits * (kMaxRouteHops - kFieldRouteHops) <= kSourceRouteExtBits);

struct SourceRoute {
  uint8_t hop_num = 0;  // number of valid hops, 0..31 (above 20: the long variant)
  // Output port per hop, 0..kMaxSwitchPorts-1; unused hops are 0.
  std::array<uint8_t, kMaxRouteHops> hops{};

  bool operator==(const SourceRoute&) const = default;
  // Appends a hop; error if the route already has 31 hops or the port is beyond the widest
  // switch.
  Status push(uint8_t port);
  // Whether a hop names a port above 31, so that the route needs the wide variant.
  bool needs_wide() const;
  // Whether the route has more hops than the 105-bit field holds (the long variant).
  bool is_long() const { return hop_num > kFieldRouteHops; }
  // Whether the route needs the extension at all (wide or long).
  bool needs_ext() const { return needs_wide() || is_long(); }
  // Whether a management packet can carry it: not both wide and long.
  bool carried() const { return !(is_long() && needs_wide()); }
  std::string to_string() const;  // "[3,17,0]"
};

// Writes the 105-bit field at `bit_offset` of `buf`; error if the route is invalid (a non-zero
// unused hop; without `ext`, more than 20 hops or a port > 31; with it, a port > 31 in a route
// of more than 20 hops, which neither variant carries) or the buffer is too small. With `ext`
// the field holds hop_num, hops 0-19 and each one's low 5 bits; encode_source_route_ext
// writes the rest.
Status encode_source_route(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset,
                           bool ext = false);
// Reads and validates it: hop_num (up to 31: above 20 the long variant, whose hops 20-30 the
// extension adds) and non-zero unused hops, naming the field.
Result<SourceRoute> decode_source_route(std::span<const uint8_t> buf, size_t bit_offset);
// The 60-bit extension of a route encoded with `ext`: hops 20-30 of a long route, else each
// hop's high 3 bits (zero for a route that needs neither).
void encode_source_route_ext(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset);
// Adds the extension at `bit_offset` to `r` as decoded from the 105-bit field; rejects bits on
// unused hops and ports above 127.
Status decode_source_route_ext(SourceRoute& r, std::span<const uint8_t> buf, size_t bit_offset);
// The output port of hop `i` of a route as encoded with its extension, read without decoding
// the rest (what an NRC forwarding a packet reads): `ext_bit` is the extension's offset, or
// SIZE_MAX when the packet carries none.
uint8_t source_route_hop(std::span<const uint8_t> buf, size_t field_bit, size_t ext_bit,
                         uint8_t hop_num, uint8_t i);

}  // namespace galaxy::wire
