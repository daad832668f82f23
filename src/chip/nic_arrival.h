// The checks a NIC makes of a data packet as it arrives from its port (docs/system.md 1.1: a
// dirty packet is discarded into the error buffer before anything reaches host memory), written
// once for every holder of an arriving packet: chip::Nic (both engines' NIC model, which also
// discards and counts what fails) and a live process that receives MPs on its own datagram
// socket (docs/live.md "The direct path"), which hands whatever fails to its host's daemon, whose
// NIC model then discards and counts it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "wire/data_packet.h"
#include "wire/flit.h"

namespace galaxy::chip {

// A packet's flits as decoded from the link's bytes (up to twice the longest packet, so that
// wire/ names a too-long packet's excess).
struct LinkFlits {
  std::array<wire::Flit, 2 * wire::kMaxDataPacketFlits> flits;
  size_t count = 0;  // 0 until every flit decoded
  std::span<const wire::Flit> view() const { return std::span(flits).first(count); }
};

// A packet as it arrived, what a discard keeps in the NIC's error buffer: its link bytes, or the
// flits an engine carries them as (the simulator's).
struct ArrivedPacket {
  ArrivedPacket(std::span<const uint8_t> link_bytes) : bytes(link_bytes) {}
  ArrivedPacket(std::span<const wire::Flit> decoded) : flits(decoded) {}
  std::span<const uint8_t> bytes;
  std::span<const wire::Flit> flits;
};

// Decodes a packet as it crossed a link (whole flits of wire::kFlitBytes; a flit that does not
// decode makes the packet dirty) into *out and checks it (check_arriving). A well-formed packet
// decodes in one pass (wire::decode_clean_data_packet); anything else is decoded flit by flit,
// and the full decoders name its defect: on error *defect says how the packet is dirty; E2078
// it is not 1 to 2 * wire::kMaxDataPacketFlits whole flits. A discard keeps `bytes` (the flits
// that decoded encode to them again).
Status check_arriving_bytes(wire::ChipId chip_id, std::span<const uint8_t> bytes,
                            wire::DataPacket* out, wire::DataDefect* defect);
// The decoding alone (the first step of check_arriving_bytes).
Status decode_arriving_flits(std::span<const uint8_t> bytes, LinkFlits* flits,
                             wire::DataDefect* defect);
// The checks of decoded flits: the packet decodes (wire/), is for this NIC (E2050 misrouted) and
// for one of its VPs (E2051).
Result<wire::DataPacket> check_arriving(wire::ChipId chip_id, std::span<const wire::Flit> flits,
                                        wire::DataDefect* defect);

}  // namespace galaxy::chip
