// The virtual channel of each kind of data packet (SYSTEM.md 1.1, 1.2), defined once.
#pragma once

#include <cstdint>

#include "wire/data_packet.h"

namespace galaxy::chip {

// Which virtual channel a data packet takes: write data and read responses never share one
// (SYSTEM.md 1.1), and acks have their own so that a target can always answer.
constexpr uint8_t data_vc(wire::PacketKind k) {
  switch (k) {
    case wire::PacketKind::kRdmaReadResponse:
      return 1;
    case wire::PacketKind::kAck:
      return 2;
    default:
      return 0;
  }
}

}  // namespace galaxy::chip
