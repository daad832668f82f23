// The 128-byte mini-packet written into the target VP's MPQ (docs/system.md 1.1; layout in
// docs/protocol.md): an 8-byte header and 120 bytes of user data.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "wire/chip_id.h"

namespace galaxy::wire {

inline constexpr unsigned kMpBytes = 128;
inline constexpr unsigned kMpHeaderBytes = 8;
inline constexpr unsigned kMpPayloadBytes = 120;

enum class MpKind : uint8_t {
  kUser = 0,  // user data sent by an MP descriptor (or a trailing MP)
  kCp = 1,    // collective control packet written to the MPQ (wire/cp.h)
  kMgmt = 2,  // management response or fault report delivered to the server VP (docs/system.md 2.4)
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
  ChipId src_node = 0;
  uint8_t length = 0;  // valid payload bytes, 0-120
  uint16_t tag = 0;    // free for software (e.g. a message sequence number)
  std::array<uint8_t, kMpPayloadBytes> payload{};
  bool operator==(const Mp&) const = default;
};

using MpBytes = std::array<uint8_t, kMpBytes>;

// The header as the little-endian word of the MP's bytes 0-7 (docs/protocol.md): the one
// definition of its bit positions, used by encode_mp/decode_mp and by an MPQ, where the NIC
// writes the header as one word after the payload and the host reads it as one word.
// In an MPQ cell the reserved bits 20-23 carry the queue's lap (never 0), so the host
// tells a freshly written cell from one of the previous lap; on the wire they are 0.
namespace mp_word {
inline constexpr unsigned kKindBit = 0, kFlagsBit = 4, kTargetVpBit = 8, kSrcVpBit = 14,
                          kLapBit = 20, kSrcNodeBit = 24, kLengthBit = 40, kSrcNodeHighBit = 47,
                          kTagBit = 48;
inline constexpr uint64_t kReservedMask = uint64_t{0xF} << kLapBit;
inline constexpr uint8_t kMaxVp = 63;
// Fields are masked to their widths; callers check ranges (encode_mp does).
constexpr uint64_t make(MpKind kind, uint8_t flags, uint8_t target_vp, uint8_t src_vp,
                        ChipId src_node, uint8_t length, uint16_t tag) {
  return (uint64_t{static_cast<uint8_t>(kind) & 0xFu} << kKindBit) |
         (uint64_t{flags & 0xFu} << kFlagsBit) | (uint64_t{target_vp & 0x3Fu} << kTargetVpBit) |
         (uint64_t{src_vp & 0x3Fu} << kSrcVpBit) |
         (uint64_t{chip_id_low(src_node)} << kSrcNodeBit) |
         (uint64_t{chip_id_high(src_node)} << kSrcNodeHighBit) |
         (uint64_t{length & 0x7Fu} << kLengthBit) | (uint64_t{tag} << kTagBit);
}
constexpr uint8_t kind(uint64_t w) {
  return static_cast<uint8_t>(w & 0xF);
}
constexpr uint8_t flags(uint64_t w) {
  return static_cast<uint8_t>((w >> kFlagsBit) & 0xF);
}
constexpr uint8_t target_vp(uint64_t w) {
  return static_cast<uint8_t>((w >> kTargetVpBit) & 0x3F);
}
constexpr uint8_t src_vp(uint64_t w) {
  return static_cast<uint8_t>((w >> kSrcVpBit) & 0x3F);
}
constexpr uint8_t lap(uint64_t w) {
  return static_cast<uint8_t>((w >> kLapBit) & 0xF);
}
constexpr ChipId src_node(uint64_t w) {
  return chip_id_of(w >> kSrcNodeBit, w >> kSrcNodeHighBit);
}
constexpr uint8_t length(uint64_t w) {
  return static_cast<uint8_t>((w >> kLengthBit) & 0x7F);
}
constexpr uint16_t tag(uint64_t w) {
  return static_cast<uint16_t>(w >> kTagBit);
}
constexpr uint64_t with_lap(uint64_t w, uint8_t lap) {
  return (w & ~(uint64_t{0xF} << kLapBit)) | (uint64_t{lap & 0xFu} << kLapBit);
}
}  // namespace mp_word

Result<MpBytes> encode_mp(const Mp& m);
Result<Mp> decode_mp(std::span<const uint8_t> bytes);  // exactly 128 bytes

}  // namespace galaxy::wire
