#include "wire/ib_mad.h"

#include <fmt/format.h>

#include <algorithm>

#include "wire/big_endian.h"

namespace galaxy::wire {
namespace {

// Byte offsets of the common MAD header (IBA 13.4.3), big-endian.
constexpr size_t kBaseVersion = 0;
constexpr size_t kMgmtClass = 1;
constexpr size_t kClassVersion = 2;
constexpr size_t kMethod = 3;
constexpr size_t kStatus = 4;
constexpr size_t kClassSpecific = 6;
constexpr size_t kTransactionId = 8;
constexpr size_t kAttributeId = 16;
constexpr size_t kReserved = 18;
constexpr size_t kAttributeModifier = 20;

}  // namespace

bool is_valid_mgmt_class(uint8_t raw) {
  return raw == 0x01 || (raw >= 0x03 && raw <= 0x1F) || raw == 0x81;
}

std::string_view mgmt_class_name(MgmtClass c) {
  auto raw = static_cast<uint8_t>(c);
  if (raw >= 0x09 && raw <= 0x0F) return "vendor";
  if (raw >= 0x10 && raw <= 0x1F) return "application";
  switch (c) {
    case MgmtClass::kSubnLidRouted:
      return "subn lid-routed";
    case MgmtClass::kSubnAdm:
      return "subn adm";
    case MgmtClass::kPerformance:
      return "performance";
    case MgmtClass::kBaseboard:
      return "baseboard";
    case MgmtClass::kDeviceMgmt:
      return "device mgmt";
    case MgmtClass::kCommMgmt:
      return "comm mgmt";
    case MgmtClass::kSnmp:
      return "snmp";
    case MgmtClass::kSubnDirectedRoute:
      return "subn directed-route";
    default:
      return "unknown";
  }
}

bool is_valid_mad_method(uint8_t raw) {
  switch (raw) {
    case 0x01:
    case 0x02:
    case 0x03:
    case 0x05:
    case 0x06:
    case 0x07:
    case 0x12:
    case 0x15:
    case 0x81:
    case 0x86:
    case 0x92:
    case 0x95:
      return true;
    default:
      return false;
  }
}

std::string_view mad_method_name(MadMethod m) {
  switch (m) {
    case MadMethod::kGet:
      return "Get";
    case MadMethod::kSet:
      return "Set";
    case MadMethod::kSend:
      return "Send";
    case MadMethod::kTrap:
      return "Trap";
    case MadMethod::kReport:
      return "Report";
    case MadMethod::kTrapRepress:
      return "TrapRepress";
    case MadMethod::kGetResp:
      return "GetResp";
    case MadMethod::kReportResp:
      return "ReportResp";
    case MadMethod::kGetTable:
      return "GetTable";
    case MadMethod::kDelete:
      return "Delete";
    case MadMethod::kGetTableResp:
      return "GetTableResp";
    case MadMethod::kDeleteResp:
      return "DeleteResp";
  }
  return "unknown";
}

Result<MadBytes> encode_mad(const Mad& m) {
  auto cls = static_cast<uint8_t>(m.mgmt_class);
  if (!is_valid_mgmt_class(cls)) {
    return make_error(Code::kInvalidArgument, 1600,
                      fmt::format("mad: mgmt_class = {:#04x} is not a management class", cls));
  }
  auto method = static_cast<uint8_t>(m.method);
  if (!is_valid_mad_method(method)) {
    return make_error(Code::kInvalidArgument, 1601,
                      fmt::format("mad: method = {:#04x} is not a MAD method", method));
  }
  MadBytes b{};
  b[kBaseVersion] = m.base_version;
  b[kMgmtClass] = cls;
  b[kClassVersion] = m.class_version;
  b[kMethod] = method;
  put_be(b, kStatus, 2, m.status);
  put_be(b, kClassSpecific, 2, m.class_specific);
  put_be(b, kTransactionId, 8, m.transaction_id);
  put_be(b, kAttributeId, 2, m.attribute_id);
  put_be(b, kAttributeModifier, 4, m.attribute_modifier);
  std::copy(m.data.begin(), m.data.end(), b.begin() + kMadHeaderBytes);
  return b;
}

Result<Mad> decode_mad(std::span<const uint8_t> b) {
  if (b.size() != kMadBytes) {
    return make_error(Code::kMalformed, 1610,
                      fmt::format("mad: length = {} bytes, expected {}", b.size(), kMadBytes));
  }
  if (!is_valid_mgmt_class(b[kMgmtClass])) {
    return make_error(
        Code::kMalformed, 1611,
        fmt::format("mad: mgmt_class = {:#04x} is not a management class", b[kMgmtClass]));
  }
  if (!is_valid_mad_method(b[kMethod])) {
    return make_error(Code::kMalformed, 1612,
                      fmt::format("mad: method = {:#04x} is not a MAD method", b[kMethod]));
  }
  if (uint64_t r = get_be(b, kReserved, 2); r != 0) {
    return make_error(Code::kMalformed, 1613,
                      fmt::format("mad: reserved = {:#06x}, expected 0", r));
  }
  Mad m;
  m.base_version = b[kBaseVersion];
  m.mgmt_class = static_cast<MgmtClass>(b[kMgmtClass]);
  m.class_version = b[kClassVersion];
  m.method = static_cast<MadMethod>(b[kMethod]);
  m.status = static_cast<uint16_t>(get_be(b, kStatus, 2));
  m.class_specific = static_cast<uint16_t>(get_be(b, kClassSpecific, 2));
  m.transaction_id = get_be(b, kTransactionId, 8);
  m.attribute_id = static_cast<uint16_t>(get_be(b, kAttributeId, 2));
  m.attribute_modifier = static_cast<uint32_t>(get_be(b, kAttributeModifier, 4));
  std::copy(b.begin() + kMadHeaderBytes, b.end(), m.data.begin());
  return m;
}

}  // namespace galaxy::wire
