// A chip's id (docs/system.md 2.2; docs/protocol.md "Chip ids"): 17 bits, so a fabric holds up to
// 131,071 chips (a 3-level fat tree of 64-port switches has 70,656). TH-2's formats give an id 16
// bits; its 17th bit travels in a bit those formats reserve, so a fabric of fewer than 65,535 chips
// sends the TH-2 formats bit for bit.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace galaxy::wire {

using ChipId = uint32_t;
inline constexpr unsigned kChipIdBits = 17;
inline constexpr ChipId kChipIdMask = (ChipId{1} << kChipIdBits) - 1;
// DestID all ones addresses a chip whose id has not been configured yet (docs/system.md 2.2).
inline constexpr ChipId kUnconfiguredId = kChipIdMask;
inline constexpr ChipId kMaxChipId = kUnconfiguredId - 1;
// The most chips a fabric may hold: ids 0 .. kMaxChipId.
inline constexpr uint32_t kMaxChips = kMaxChipId + 1;
static_assert(kMaxChipId == 0x1FFFE, "glex.h's GLEX_MAX_NODE says the same");

// The two parts of an id as TH-2's 16-bit fields and the 17th bit carry them.
constexpr uint32_t chip_id_low(ChipId id) {
  return id & 0xFFFF;
}
constexpr uint32_t chip_id_high(ChipId id) {
  return (id >> 16) & 1;
}
constexpr ChipId chip_id_of(uint64_t low, uint64_t high) {
  return static_cast<ChipId>((low & 0xFFFF) | ((high & 1) << 16));
}

// Why an encoder refuses the first of `ids` (field name, id) wider than 17 bits ("<format>:
// <name> = 0x20000 exceeds the 17-bit chip id"), or nothing when all fit. Each encoder gives the
// refusal its own error id.
std::optional<std::string> chip_id_refusal(
    std::string_view format, std::initializer_list<std::pair<std::string_view, ChipId>> ids);

}  // namespace galaxy::wire
