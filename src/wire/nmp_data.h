// The 168-bit NMPData block shared by the management packet and the management descriptor
// (docs/system.md 2.2; layout in docs/protocol.md). Internal to wire/.
#pragma once

#include <span>
#include <string_view>

#include "base/status.h"
#include "wire/mgmt.h"

namespace galaxy::wire {

inline constexpr unsigned kNmpDataBits = 168;
inline constexpr uint16_t kMaxRegisterAddress =
    0x7FFF;  // 15-bit register space (docs/system.md 1.4)

// `format` prefixes error messages ("mgmt packet", "mgmt descriptor").
Status encode_nmp_data(std::string_view format, NmpType t, const NmpData& d, std::span<uint8_t> buf,
                       size_t bit_offset);
Result<NmpData> decode_nmp_data(std::string_view format, NmpType t, std::span<const uint8_t> buf,
                                size_t bit_offset);
// Checks that the reserved `width` bits at `bit_offset` are zero (the error gives the range).
Status check_zero_bits(std::string_view format, std::span<const uint8_t> buf, size_t bit_offset,
                       size_t width);

}  // namespace galaxy::wire
