// The 198-bit flit of the TH-2 link layer (docs/system.md 1.3, 2.2; layout in docs/protocol.md).
//
// A flit is stored in 25 bytes (200 bits; bits 198 and 199 are always zero):
//   bits 0-1  kind: 0 body, 1 head, 2 tail, 3 head+tail (single-flit packet)
//   bits 2-4  VC (0..5; VC3 is management)
//   bit  5    reserved, zero
//   bits 6-197 192 bits (24 bytes) of payload
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace galaxy::wire {

inline constexpr unsigned kFlitBits = 198;
inline constexpr unsigned kFlitBytes = 25;
// One direction of a link: 8 lanes of 14 Gbit/s (docs/system.md 1.2).
inline constexpr double kLinkBitsPerSecond = 8 * 14e9;
inline constexpr unsigned kFlitPayloadBits = 192;
inline constexpr unsigned kFlitPayloadBytes = 24;
inline constexpr uint8_t kNumVcs = 6;
inline constexpr uint8_t kMgmtVc = 3;

// What traffic puts on every link it crosses: the port counters (TX/RX_PACKETS, TX/RX_FLITS)
// and the live engine's byte counts add these.
struct Traffic {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t flits = 0;
  constexpr Traffic& operator+=(const Traffic& o) {
    packets += o.packets;
    bytes += o.bytes;
    flits += o.flits;
    return *this;
  }
  bool operator==(const Traffic&) const = default;
};

enum class FlitKind : uint8_t { kBody = 0, kHead = 1, kTail = 2, kHeadTail = 3 };

struct Flit {
  FlitKind kind = FlitKind::kBody;
  uint8_t vc = 0;
  std::array<uint8_t, kFlitPayloadBytes> payload{};
  bool operator==(const Flit&) const = default;
};

std::string_view flit_kind_name(FlitKind k);  // "body", "head", "tail", "head+tail"

using FlitBytes = std::array<uint8_t, kFlitBytes>;

// kind and vc are cut to their widths; a VC above 5 gives bytes that decode_flit rejects.
FlitBytes encode_flit(const Flit& f);
// Flits as they cross a link, one after the other: flits.size() * kFlitBytes bytes at `out`.
void encode_flits(std::span<const Flit> flits, uint8_t* out);
// Rejects: fewer than 25 bytes, VC > 5, reserved bit set, bits 198-199 set.
Result<Flit> decode_flit(std::span<const uint8_t> bytes);
// The VC field of an encoded flit (0-7; decode_flit refuses one above 5), read without decoding
// the rest: what a link reads to put a packet on its VC's credits.
inline uint8_t flit_vc(std::span<const uint8_t> bytes) {
  return bytes.empty() ? 0 : static_cast<uint8_t>((bytes[0] >> 2) & 7u);
}
// Moves a packet to VC `vc` (an NRC changing its class, chip/data_vc.h): every flit's VC field,
// in flits or in the flit-encoded bytes of the whole packet. No CRC covers the field.
inline void set_flits_vc(std::span<Flit> flits, uint8_t vc) {
  for (Flit& f : flits) f.vc = vc;
}
inline void set_flits_vc(std::span<uint8_t> packet_bytes, uint8_t vc) {
  for (size_t i = 0; i + kFlitBytes <= packet_bytes.size(); i += kFlitBytes)
    packet_bytes[i] = static_cast<uint8_t>((packet_bytes[i] & ~(7u << 2)) | ((vc & 7u) << 2));
}

}  // namespace galaxy::wire
