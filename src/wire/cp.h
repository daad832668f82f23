// Collective control packet (docs/system.md 1.1, "Offloaded collectives"): a special MP
// (MpKind::kCp) whose arrival increments the target VP's CP counter; it may also be written to the
// MPQ and its data may replace the data of the queued MP descriptor it triggers. Layout in
// docs/protocol.md: the MP header with CP flags and the counter increment in place of the tag.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "wire/mp.h"

namespace galaxy::wire {

struct Cp {
  uint8_t target_vp = 0;  // VP whose CP counter is incremented, 0-63
  uint8_t src_vp = 0;     // 0-63
  ChipId src_node = 0;
  uint16_t increment = 1;     // added to the CP counter, 1-65535
  bool write_to_mpq = false;  // also write the CP into the target VP's MPQ
  bool replace_data = false;  // data replaces that of the queued MP descriptor it triggers
  bool interrupt = false;     // raise the MPQ-not-empty interrupt (with write_to_mpq)
  uint8_t length = 0;         // valid data bytes, 0-120
  std::array<uint8_t, kMpPayloadBytes> data{};
  bool operator==(const Cp&) const = default;
};

Result<MpBytes> encode_cp(const Cp& c);
Result<Cp> decode_cp(std::span<const uint8_t> bytes);  // exactly 128 bytes, MP kind cp

}  // namespace galaxy::wire
