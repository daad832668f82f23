// The virtual channel of each kind of data packet (docs/system.md 1.1, 1.2), and the rule by which
// an NRC moves a packet between the two classes of data VCs, defined once.
#pragma once

#include <cstdint>

#include "chip/registers.h"
#include "wire/data_packet.h"

namespace galaxy::chip {

// Data VCs come in two classes. Class 0: VC0 requests (writes, read requests, MPs), VC1 read
// responses, VC2 acks. Class 1: VC4 requests, VC5 answers (read responses and acks: both are
// consumed by their target without waiting for anything, so they may share one). VC3 is
// management's. A ring (a torus dimension, a dragonfly's global links) is deadlock free when
// packets change class where they cross its dateline (Dally and Seitz).
inline constexpr uint8_t kDataVcClasses = 2;

constexpr bool is_answer(wire::PacketKind k) {
  return k == wire::PacketKind::kRdmaReadResponse || k == wire::PacketKind::kAck;
}

// Which virtual channel a data packet of class `vc_class` takes: write data and read responses
// never share one (docs/system.md 1.1), and acks have their own in class 0 so that a target can
// always answer.
constexpr uint8_t data_vc(wire::PacketKind k, uint8_t vc_class = 0) {
  if (vc_class != 0) return is_answer(k) ? 5 : 4;
  switch (k) {
    case wire::PacketKind::kRdmaReadResponse:
      return 1;
    case wire::PacketKind::kAck:
      return 2;
    default:
      return 0;
  }
}
constexpr uint8_t vc_class_of(uint8_t vc) {
  return vc >= 4 ? 1 : 0;
}

// A port's VC rule, four bits of the NRC's VC_RULES registers (docs/registers.md): [0] the link
// out of the port is a dateline, [3:1] the ring the port belongs to. Power-on: 0 everywhere (one
// ring, no dateline: packets keep class 0).
inline constexpr uint8_t kVcRuleBits = 4;
inline constexpr uint8_t kVcRuleDateline = 1;
constexpr uint8_t vc_rule(bool dateline, uint8_t ring) {
  return static_cast<uint8_t>((dateline ? kVcRuleDateline : 0) | ((ring & 7u) << 1));
}
constexpr uint8_t vc_rule_ring(uint8_t rule) {
  return static_cast<uint8_t>((rule >> 1) & 7u);
}
// Where port p's rule sits in the NRC's VC_RULES registers (docs/registers.md): register
// reg::kVcRules + vc_rules_word(p), at bit vc_rule_shift(p).
constexpr unsigned vc_rules_word(unsigned port) {
  return port / reg::kVcRulesPerWord;
}
constexpr unsigned vc_rule_shift(unsigned port) {
  return kVcRuleBits * (port % reg::kVcRulesPerWord);
}

// The class a data packet leaves an NRC in: class 1 over a dateline; otherwise its class as it
// came, unless it changes ring (a dimension turn on a torus), where it starts again in class 0.
constexpr uint8_t next_vc_class(uint8_t vc_class, uint8_t in_rule, uint8_t out_rule) {
  if (out_rule & kVcRuleDateline) return 1;
  return vc_rule_ring(in_rule) == vc_rule_ring(out_rule) ? vc_class : 0;
}

}  // namespace galaxy::chip
