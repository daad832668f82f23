// The NRC's choice of output for a table-routed data packet (docs/system.md 1.2), written once and
// called by both engines: `Nrc::route_data` over the chip model's port state (the simulator),
// and the live engine's sender-executed forwarding over the shared segment's copies of the
// tables and link states. Header-only and allocation-free: the live path runs it per packet.
//
// The rule: from the allowed set that the input port's table gives for the destination, the
// usable output with the least load. Equal loads are broken by a start position derived from
// the destination (the (dest mod n)-th allowed port, then onwards), so that while loads are
// equal one destination's packets keep one path (and stay in order) and different destinations
// spread over the allowed set.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>

#include "chip/route_table.h"
#include "wire/data_packet.h"
#include "wire/flit.h"

namespace galaxy::chip {

inline constexpr int kNoDataRoute = -1;    // the allowed set is empty
inline constexpr int kNoUsableRoute = -2;  // allowed outputs exist but none is usable

// The most NRCs a data packet passes (its head's 8-bit hop count, docs/protocol.md). Tables
// that loop for a destination (a fault, a half-loaded fabric, ranges that cover ids outside
// the routed set) would otherwise keep a packet circling for ever; an NRC discards a packet
// that has already passed this many instead of passing it on (E2037, chip/refusal.h), far above
// any real path (TH-2: 9; a 16x16x16 mesh: 46).
inline constexpr unsigned kMaxDataHops = 255;
constexpr bool within_hop_limit(unsigned hops_passed) {
  return hops_passed < kMaxDataHops;
}

// `usable(p)`: the link out of port p is up and enabled; `load(p)`: what the engine measures
// as the output's load (flits queued for it; 0 where nothing queues). Returns the port, or
// kNoDataRoute / kNoUsableRoute.
template <class Usable, class Load>
inline int choose_data_output(PortSet allowed, uint32_t dest, Usable&& usable, Load&& load) {
  const int n = allowed.count();
  if (n == 0) return kNoDataRoute;
  std::array<uint8_t, kMaxSwitchPorts> ports{};
  int k = 0;
  allowed.for_each([&](unsigned p) { ports[static_cast<size_t>(k++)] = static_cast<uint8_t>(p); });
  const int start = static_cast<int>(dest % static_cast<uint32_t>(n));
  int best = kNoUsableRoute;
  uint64_t best_load = 0;
  for (int i = 0; i < n; ++i) {
    const uint8_t p = ports[static_cast<size_t>((start + i) % n)];
    if (!usable(p)) continue;
    const uint64_t l = load(p);
    if (best < 0 || l < best_load) {
      best = p;
      best_load = l;
    }
  }
  return best;
}

// The output for a data packet an NRC sends itself (a refusal, chip/refusal.h). A port whose
// link leads straight to `dest` goes first (ports learn their peer's identity, docs/system.md 1.4),
// so that a sender next to the NRC hears even where no table is loaded. Otherwise the tables:
// the packet entered on no port, and the table of the port it answers through may not lead back
// (a fat tree's table for a port from above routes only downwards), so they are tried in port
// order from `first` and the first that gives a usable output decides. `allowed(p)`: input port
// p's allowed set for `dest`; `leads_to_dest(p)`: port p's peer is `dest`.
template <class Allowed, class Usable, class Load, class LeadsToDest>
inline int choose_own_output(unsigned num_ports, uint8_t first, uint32_t dest, Allowed&& allowed,
                             Usable&& usable, Load&& load, LeadsToDest&& leads_to_dest) {
  for (unsigned p = 0; p < num_ports; ++p)
    if (leads_to_dest(static_cast<uint8_t>(p)) && usable(static_cast<uint8_t>(p)))
      return static_cast<int>(p);
  int out = kNoDataRoute;
  for (unsigned i = 0; i < num_ports; ++i) {
    const auto in = static_cast<uint8_t>((first + i) % num_ports);
    const int o = choose_data_output(allowed(in), dest, usable, load);
    if (o >= 0) return o;
    if (o == kNoUsableRoute) out = o;
  }
  return out;
}

// What an NRC routes a data packet by: its head flit alone (docs/system.md 1.2). A packet whose
// first flit is not a head that decodes cannot be routed: the NRC discards it and counts it dirty
// on the input port (DIRTY_DISCARDS). Both engines ask this; the live engine has the flit as the
// bytes that crossed the link.
inline std::optional<wire::DataHead> routable_head(const wire::Flit& first) {
  auto h = wire::decode_data_head(first);
  if (!h.ok()) return std::nullopt;
  return *h;
}
inline std::optional<wire::DataHead> routable_head(std::span<const uint8_t> packet_bytes) {
  if (packet_bytes.size() < wire::kFlitBytes || packet_bytes.size() % wire::kFlitBytes != 0)
    return std::nullopt;
  return wire::decode_data_head_bytes(packet_bytes);
}

}  // namespace galaxy::chip
