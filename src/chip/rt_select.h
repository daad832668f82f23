// The RT_SELECT register of an NRC and the RT_SELECT + RT_DATA writes that load a range of route
// table entries (docs/registers.md "Route tables"). One home for the layout: the NRC decodes it,
// the management server's loader and tracer encode it.
//
// A 24-port TH-2 NRC uses the register as the chip defines it: a 24-bit input mask and a port set
// in RT_DATA's low bits. Wider switches (up to kMaxSwitchPorts) use three more fields, all zero
// on TH-2: the input group (the mask names input ports 24g .. 24g + 23), "all inputs" (every
// input port of the switch, one write where a mask would need several) and the output half
// (RT_DATA carries output ports 64h .. 64h + 63; the entry's other ports keep their value), so
// every write stays one self-contained two-register packet.
#pragma once

#include <cstdint>
#include <vector>

#include "base/radix.h"
#include "chip/port_set.h"
#include "chip/route_table.h"

namespace galaxy::chip {

inline constexpr unsigned kRtInputGroupPorts = 24;
// The most entries one RT_SELECT names (its count field's 17 bits).
inline constexpr uint32_t kMaxRtCount = wire::kChipIdMask;
inline constexpr unsigned kRtDataPorts = 64;

// How many output halves RT_DATA takes on a switch of `num_ports`: one write (or read) each.
constexpr unsigned rt_halves(unsigned num_ports) {
  return num_ports > kRtDataPorts ? 2 : 1;
}
// The ports an RT_DATA value names for output half `half`.
constexpr PortSet rt_data_ports(unsigned half, uint64_t value) {
  return half == 0 ? PortSet::from_words(value, 0) : PortSet::from_words(0, value);
}

struct RtSelect {
  uint32_t mask = 0;        // [23:0] input ports 24 * group + i
  uint32_t first = 0;       // [39:24] first destination, bit 16 in [61]
  uint32_t count = 0;       // [55:40] entries, 1..131,071, bit 16 in [62]
  uint8_t group = 0;        // [58:56] input group, 0..5
  bool all_inputs = false;  // [59] every input port (mask and group 0)
  uint8_t half = 0;         // [60] RT_DATA holds output ports 64 * half ...

  static RtSelect decode(uint64_t v) {
    RtSelect s;
    s.mask = static_cast<uint32_t>(v & 0xFFFFFF);
    s.first = wire::chip_id_of(v >> 24, v >> 61);
    s.count = wire::chip_id_of(v >> 40, v >> 62);
    s.group = static_cast<uint8_t>((v >> 56) & 7);
    s.all_inputs = ((v >> 59) & 1) != 0;
    s.half = static_cast<uint8_t>((v >> 60) & 1);
    return s;
  }
  uint64_t encode() const {
    return (uint64_t{mask} & 0xFFFFFF) | uint64_t{wire::chip_id_low(first)} << 24 |
           uint64_t{wire::chip_id_low(count)} << 40 | (uint64_t{group} & 7) << 56 |
           uint64_t{all_inputs} << 59 | (uint64_t{half} & 1) << 60 |
           uint64_t{wire::chip_id_high(first)} << 61 | uint64_t{wire::chip_id_high(count)} << 62;
  }
  // Whether an NRC of `num_ports` takes the value (bit 63 zero, a count, a range inside
  // the table, a mask and group naming its ports only, a half it has).
  static bool valid(uint64_t v, unsigned num_ports) {
    const RtSelect s = decode(v);
    if ((v >> 63) != 0 || s.count == 0 || uint32_t{s.first} + s.count > kMaxRouteDestinations)
      return false;
    if (s.all_inputs && (s.mask != 0 || s.group != 0)) return false;
    if (s.half * kRtDataPorts >= num_ports) return false;
    for (unsigned i = 0; i < kRtInputGroupPorts; ++i)
      if (((s.mask >> i) & 1) && s.group * kRtInputGroupPorts + i >= num_ports) return false;
    return true;
  }
  // The input ports of a switch of `num_ports` the selection names.
  PortSet inputs(unsigned num_ports) const {
    if (all_inputs) return PortSet::first(num_ports);
    PortSet p;
    for (unsigned i = 0; i < kRtInputGroupPorts; ++i) {
      const unsigned port = group * kRtInputGroupPorts + i;
      if (((mask >> i) & 1) && port < num_ports) p.set(port);
    }
    return p;
  }
  // The output ports RT_DATA covers on a switch of `num_ports`.
  PortSet data_mask(unsigned num_ports) const {
    return PortSet::first(num_ports) & (half == 0 ? PortSet::from_words(~uint64_t{0}, 0)
                                                  : PortSet::from_words(0, ~uint64_t{0}));
  }
  // RT_DATA's value as the ports it names.
  PortSet data_ports(uint64_t value) const { return rt_data_ports(half, value); }
  // The RT_DATA value of `ports` for this selection's half.
  uint64_t data_value(PortSet ports) const { return ports.word(half); }
};

struct RtWrite {
  uint64_t select;
  uint64_t data;
};

// The writes that store `ports` for destinations [first, first + count) on every input port in
// `inputs` of a switch of `num_ports`: one per output half the switch has, times one per input
// group the inputs touch (a single "all inputs" write when they are all of the switch's ports).
inline std::vector<RtWrite> rt_writes(PortSet inputs, uint32_t first, uint32_t count, PortSet ports,
                                      unsigned num_ports) {
  std::vector<RtWrite> out;
  const unsigned halves = rt_halves(num_ports);
  std::vector<RtSelect> selects;
  if (inputs == PortSet::first(num_ports) && num_ports > kRtInputGroupPorts) {
    RtSelect s;
    s.all_inputs = true;
    selects.push_back(s);
  } else {
    for (unsigned g = 0; g * kRtInputGroupPorts < num_ports; ++g) {
      RtSelect s;
      s.group = static_cast<uint8_t>(g);
      for (unsigned i = 0; i < kRtInputGroupPorts; ++i)
        if (inputs.test(g * kRtInputGroupPorts + i)) s.mask |= 1u << i;
      if (s.mask != 0) selects.push_back(s);
    }
  }
  for (RtSelect s : selects) {
    s.first = first;
    s.count = count;
    for (unsigned h = 0; h < halves; ++h) {
      s.half = static_cast<uint8_t>(h);
      out.push_back({s.encode(), s.data_value(ports)});
    }
  }
  return out;
}

// The selection of one entry (input port `in`, destination `dest`) and output half `half`, to
// read it back through RT_DATA.
inline uint64_t rt_select_entry(unsigned in, uint32_t dest, unsigned half = 0) {
  RtSelect s;
  s.group = static_cast<uint8_t>(in / kRtInputGroupPorts);
  s.mask = 1u << (in % kRtInputGroupPorts);
  s.first = dest;
  s.count = 1;
  s.half = static_cast<uint8_t>(half);
  return s.encode();
}

}  // namespace galaxy::chip
