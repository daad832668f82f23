// The 128-byte mini-packet written into the target VP's MPQ (SYSTEM.md 1.1; layout in
// docs/protocol.md): an 8-byte header and 120 bytes of user data.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "base/status.h"

namespace galaxy::wire {

inline constexpr unsigned kMpBytes = 128;
inline constexpr unsigned kMpHeaderBytes = 8;
inline constexpr unsigned kMpPayloadBytes = 120;

enum class MpKind : uint8_t {
  kUser = 0,  // user data sent by an MP descriptor (or a trailing MP)
  kCp = 1,    // collective control packet written to the MPQ (wire/cp.h)
  kMgmt = 2,  // management response or fault report delivered to the server VP (SYSTEM.md 2.4)
};
inline constexpr uint8_t kMaxMpKind = 2;

// Flags of a user MP; a CP gives the same 4 bits its own meaning (wire/cp.h).
inline constexpr uint8_t kMpFlagInterrupt = 0x1;  // raise the MPQ-not-empty interrupt
inline constexpr uint8_t kMpFlagTrailing = 0x2;   // completion notice of an RDMA descriptor

struct Mp {
  MpKind kind = MpKind::kUser;
  uint8_t flags = 0;      // 4 bits
  uint8_t target_vp = 0;  // VP whose MPQ receives it, 0-63
  uint8_t src_vp = 0;     // 0-63
  uint16_t src_node = 0;
  uint8_t length = 0;  // valid payload bytes, 0-120
  uint16_t tag = 0;    // free for software (e.g. a message sequence number)
  std::array<uint8_t, kMpPayloadBytes> payload{};
  bool operator==(const Mp&) const = default;
};

using MpBytes = std::array<uint8_t, kMpBytes>;

Result<MpBytes> encode_mp(const Mp& m);
Result<Mp> decode_mp(std::span<const uint8_t> bytes);  // exactly 128 bytes

}  // namespace galaxy::wire
