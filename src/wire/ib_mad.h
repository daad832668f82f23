// InfiniBand management datagram, 256 bytes in network (big-endian) byte order (docs/system.md 3;
// layout in docs/protocol.md).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace galaxy::wire {

inline constexpr unsigned kMadBytes = 256;
inline constexpr unsigned kMadHeaderBytes = 24;
inline constexpr unsigned kMadDataBytes = 232;

// Classes 0x09-0x0F are vendor-specific and 0x10-0x1F application-specific; any value in
// those ranges is valid.
enum class MgmtClass : uint8_t {
  kSubnLidRouted = 0x01,
  kSubnAdm = 0x03,
  kPerformance = 0x04,
  kBaseboard = 0x05,
  kDeviceMgmt = 0x06,
  kCommMgmt = 0x07,
  kSnmp = 0x08,
  kVendorFirst = 0x09,
  kVendorLast = 0x0F,
  kApplicationFirst = 0x10,
  kApplicationLast = 0x1F,
  kSubnDirectedRoute = 0x81,
};
bool is_valid_mgmt_class(uint8_t raw);
std::string_view mgmt_class_name(MgmtClass c);  // "vendor"/"application" for the ranges

// The whole method byte: bit 7 is the R (response) bit.
enum class MadMethod : uint8_t {
  kGet = 0x01,
  kSet = 0x02,
  kSend = 0x03,
  kTrap = 0x05,
  kReport = 0x06,
  kTrapRepress = 0x07,
  // Subnet administration's own (IBA 15.2.2): every record that matches, and a record's removal.
  kGetTable = 0x12,
  kDelete = 0x15,
  kGetResp = 0x81,
  kReportResp = 0x86,
  kGetTableResp = 0x92,
  kDeleteResp = 0x95,
};
bool is_valid_mad_method(uint8_t raw);
inline bool is_response(MadMethod m) {
  return static_cast<uint8_t>(m) & 0x80;
}
std::string_view mad_method_name(MadMethod m);

struct Mad {
  uint8_t base_version = 1;
  MgmtClass mgmt_class = MgmtClass::kSubnLidRouted;
  uint8_t class_version = 1;
  MadMethod method = MadMethod::kGet;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t transaction_id = 0;
  uint16_t attribute_id = 0;
  uint32_t attribute_modifier = 0;
  std::array<uint8_t, kMadDataBytes> data{};
  bool operator==(const Mad&) const = default;
};

using MadBytes = std::array<uint8_t, kMadBytes>;

Result<MadBytes> encode_mad(const Mad& m);
// Rejects a length other than 256, an unknown class or method and a non-zero Reserved field.
Result<Mad> decode_mad(std::span<const uint8_t> bytes);

}  // namespace galaxy::wire
