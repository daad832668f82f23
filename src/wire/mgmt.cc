// Names of the management enums and the NMPData block shared by packet and descriptor.
#include "wire/mgmt.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/bits.h"
#include "wire/nmp_data.h"

namespace galaxy::wire {
namespace {

enum class DataShape { kRegister, kEeprom, kError, kFault, kSmInfo };

DataShape shape_of(NmpType t) {
  switch (t) {
    case NmpType::kRegError:
    case NmpType::kEepromError:
      return DataShape::kError;
    case NmpType::kFaultReport:
      return DataShape::kFault;
    case NmpType::kSmInfoGet:
    case NmpType::kSmInfoSet:
    case NmpType::kSmInfoResponse:
      return DataShape::kSmInfo;
    default:
      return is_eeprom(t) ? DataShape::kEeprom : DataShape::kRegister;
  }
}

// Offsets inside the block (docs/protocol.md, "NMPData block").
constexpr size_t kCountBit = 0;
constexpr size_t kAddressBit = 8;
constexpr size_t kRegisterValueBit = 40;
constexpr size_t kEepromByteBit = 104;
constexpr size_t kRegisterUsedBits = 168;
constexpr size_t kEepromUsedBits = 152;
constexpr size_t kErrorUsedBits = 24;
constexpr size_t kFaultUsedBits = 56;
// SMInfo: guid 0-63, act_count 64-95, priority 96-99, state 100-103, control 104-111,
// successor chip 112-127, successor VP 128-135.
constexpr size_t kSmInfoUsedBits = 137;
constexpr uint8_t kMaxSmState = 3;
constexpr uint8_t kMaxNmpError = static_cast<uint8_t>(NmpError::kBadValue);

uint8_t max_count(DataShape s) {
  return s == DataShape::kEeprom ? kMaxEepromBytesPerPacket : kMaxRegistersPerPacket;
}

}  // namespace

std::string_view chip_type_name(ChipType t) {
  return t == ChipType::kNic ? "nic" : "nrc";
}

bool is_valid_nmp_type(uint8_t raw) {
  return (raw >= 0x01 && raw <= 0x05) || (raw >= 0x11 && raw <= 0x15) || raw == 0x20 ||
         (raw >= 0x30 && raw <= 0x32);
}

bool is_sm_info(NmpType t) {
  return t == NmpType::kSmInfoGet || t == NmpType::kSmInfoSet || t == NmpType::kSmInfoResponse;
}

bool host_may_send(NmpType t) {
  return is_request(t) || is_sm_info(t);
}

bool is_request(NmpType t) {
  switch (t) {
    case NmpType::kRegReadRequest:
    case NmpType::kRegWriteRequest:
    case NmpType::kEepromReadRequest:
    case NmpType::kEepromWriteRequest:
      return true;
    default:
      return false;
  }
}

bool is_eeprom(NmpType t) {
  return (static_cast<uint8_t>(t) & 0x30) == 0x10;
}

std::string_view nmp_type_name(NmpType t) {
  switch (t) {
    case NmpType::kRegReadRequest:
      return "reg read request";
    case NmpType::kRegReadResponse:
      return "reg read response";
    case NmpType::kRegWriteRequest:
      return "reg write request";
    case NmpType::kRegWriteResponse:
      return "reg write response";
    case NmpType::kRegError:
      return "reg error response";
    case NmpType::kEepromReadRequest:
      return "eeprom read request";
    case NmpType::kEepromReadResponse:
      return "eeprom read response";
    case NmpType::kEepromWriteRequest:
      return "eeprom write request";
    case NmpType::kEepromWriteResponse:
      return "eeprom write response";
    case NmpType::kEepromError:
      return "eeprom error response";
    case NmpType::kFaultReport:
      return "fault report";
    case NmpType::kSmInfoGet:
      return "SMInfo get";
    case NmpType::kSmInfoSet:
      return "SMInfo set";
    case NmpType::kSmInfoResponse:
      return "SMInfo response";
  }
  return "unknown";
}

std::string_view nmp_error_name(NmpError e) {
  switch (e) {
    case NmpError::kNone:
      return "none";
    case NmpError::kAddressOutOfRange:
      return "address out of range";
    case NmpError::kUnknownType:
      return "unknown type";
    case NmpError::kBadLength:
      return "bad length";
    case NmpError::kWrongKey:
      return "wrong key";
    case NmpError::kReadOnly:
      return "read only";
    case NmpError::kBadValue:
      return "bad value";
  }
  return "unknown";
}

NmpData carried_nmp_data(NmpType t, const NmpData& d) {
  NmpData c;
  switch (shape_of(t)) {
    case DataShape::kRegister:
      c.count = d.count;
      for (unsigned i = 0; i < kMaxRegistersPerPacket; ++i) {
        c.address[i] = d.address[i];
        c.value[i] = d.value[i];
      }
      break;
    case DataShape::kEeprom:
      c.count = d.count;
      c.address = d.address;
      c.bytes = d.bytes;
      break;
    case DataShape::kError:
      c.error = d.error;
      c.error_address = d.error_address;
      break;
    case DataShape::kFault:
      c.fault_code = d.fault_code;
      c.fault_port = d.fault_port;
      c.fault_severity = d.fault_severity;
      c.fault_detail = d.fault_detail;
      break;
    case DataShape::kSmInfo:
      c.sm = d.sm;
      break;
  }
  return c;
}

Status check_zero_bits(std::string_view format, std::span<const uint8_t> buf, size_t bit_offset,
                       size_t width) {
  for (size_t done = 0; done < width; done += 64) {
    unsigned w = static_cast<unsigned>(std::min<size_t>(64, width - done));
    uint64_t v = get_bits(buf, bit_offset + done, w);
    if (v != 0) {
      return make_error(Code::kMalformed, 1150,
                        fmt::format("{}: reserved bits {}-{} = {:#x}, expected 0", format,
                                    bit_offset + done, bit_offset + done + w - 1, v));
    }
  }
  return {};
}

Status encode_nmp_data(std::string_view format, NmpType t, const NmpData& d, std::span<uint8_t> buf,
                       size_t off) {
  DataShape s = shape_of(t);
  switch (s) {
    case DataShape::kRegister:
    case DataShape::kEeprom: {
      if (d.count > max_count(s)) {
        return make_error(Code::kOutOfRange, 1151,
                          fmt::format("{}: data.count = {} exceeds {} for {}", format, d.count,
                                      max_count(s), nmp_type_name(t)));
      }
      put_bits(buf, off + kCountBit, 3, d.count);
      for (unsigned i = 0; i < max_count(s); ++i) {
        if (s == DataShape::kRegister && d.address[i] > kMaxRegisterAddress) {
          return make_error(Code::kOutOfRange, 1152,
                            fmt::format("{}: data.address[{}] = {:#x} exceeds {:#x}", format, i,
                                        d.address[i], kMaxRegisterAddress));
        }
        put_bits(buf, off + kAddressBit + 16 * i, 16, d.address[i]);
        if (s == DataShape::kRegister) {
          put_bits(buf, off + kRegisterValueBit + 64 * i, 64, d.value[i]);
        } else {
          put_bits(buf, off + kEepromByteBit + 8 * i, 8, d.bytes[i]);
        }
      }
      break;
    }
    case DataShape::kError:
      if (static_cast<uint8_t>(d.error) > kMaxNmpError) {
        return make_error(Code::kOutOfRange, 1153,
                          fmt::format("{}: data.error = {} exceeds {}", format,
                                      static_cast<unsigned>(d.error), kMaxNmpError));
      }
      put_bits(buf, off, 8, static_cast<uint8_t>(d.error));
      put_bits(buf, off + 8, 16, d.error_address);
      break;
    case DataShape::kFault:
      put_bits(buf, off, 8, d.fault_code);
      put_bits(buf, off + 8, 8, d.fault_port);
      put_bits(buf, off + 16, 8, d.fault_severity);
      put_bits(buf, off + 24, 32, d.fault_detail);
      break;
    case DataShape::kSmInfo:
      if (d.sm.priority > 15 || d.sm.state > kMaxSmState || d.sm.control > kMaxSmControl ||
          d.sm.successor_chip > kChipIdMask)
        return make_error(Code::kOutOfRange, 1157,
                          fmt::format("{}: SMInfo priority = {} (0-15), state = {} (0-{}), "
                                      "control = {} (0-{}), successor_chip = {:#x} (0-{:#x})",
                                      format, d.sm.priority, d.sm.state, kMaxSmState, d.sm.control,
                                      kMaxSmControl, d.sm.successor_chip, kChipIdMask));
      put_bits(buf, off, 64, d.sm.guid);
      put_bits(buf, off + 64, 32, d.sm.act_count);
      put_bits(buf, off + 96, 4, d.sm.priority);
      put_bits(buf, off + 100, 4, d.sm.state);
      put_bits(buf, off + 104, 8, d.sm.control);
      put_bits(buf, off + 112, 16, chip_id_low(d.sm.successor_chip));
      put_bits(buf, off + 136, 1, chip_id_high(d.sm.successor_chip));
      put_bits(buf, off + 128, 8, d.sm.successor_vp);
      break;
  }
  return {};
}

Result<NmpData> decode_nmp_data(std::string_view format, NmpType t, std::span<const uint8_t> buf,
                                size_t off) {
  NmpData d;
  DataShape s = shape_of(t);
  size_t used = 0;
  switch (s) {
    case DataShape::kRegister:
    case DataShape::kEeprom: {
      d.count = static_cast<uint8_t>(get_bits(buf, off + kCountBit, 3));
      if (d.count > max_count(s)) {
        return make_error(Code::kMalformed, 1154,
                          fmt::format("{}: data.count = {} exceeds {} for {}", format, d.count,
                                      max_count(s), nmp_type_name(t)));
      }
      GALAXY_TRY(check_zero_bits(format, buf, off + 3, kAddressBit - 3));
      for (unsigned i = 0; i < max_count(s); ++i) {
        d.address[i] = static_cast<uint16_t>(get_bits(buf, off + kAddressBit + 16 * i, 16));
        if (s == DataShape::kRegister && d.address[i] > kMaxRegisterAddress) {
          return make_error(Code::kMalformed, 1155,
                            fmt::format("{}: data.address[{}] = {:#x} exceeds {:#x}", format, i,
                                        d.address[i], kMaxRegisterAddress));
        }
        if (s == DataShape::kRegister) {
          d.value[i] = get_bits(buf, off + kRegisterValueBit + 64 * i, 64);
        } else {
          d.bytes[i] = static_cast<uint8_t>(get_bits(buf, off + kEepromByteBit + 8 * i, 8));
        }
      }
      used = s == DataShape::kRegister ? kRegisterUsedBits : kEepromUsedBits;
      break;
    }
    case DataShape::kError: {
      auto e = static_cast<uint8_t>(get_bits(buf, off, 8));
      if (e > kMaxNmpError) {
        return make_error(Code::kMalformed, 1156,
                          fmt::format("{}: data.error = {} exceeds {}", format, e, kMaxNmpError));
      }
      d.error = static_cast<NmpError>(e);
      d.error_address = static_cast<uint16_t>(get_bits(buf, off + 8, 16));
      used = kErrorUsedBits;
      break;
    }
    case DataShape::kFault:
      d.fault_code = static_cast<uint8_t>(get_bits(buf, off, 8));
      d.fault_port = static_cast<uint8_t>(get_bits(buf, off + 8, 8));
      d.fault_severity = static_cast<uint8_t>(get_bits(buf, off + 16, 8));
      d.fault_detail = static_cast<uint32_t>(get_bits(buf, off + 24, 32));
      used = kFaultUsedBits;
      break;
    case DataShape::kSmInfo:
      d.sm.guid = get_bits(buf, off, 64);
      d.sm.act_count = static_cast<uint32_t>(get_bits(buf, off + 64, 32));
      d.sm.priority = static_cast<uint8_t>(get_bits(buf, off + 96, 4));
      d.sm.state = static_cast<uint8_t>(get_bits(buf, off + 100, 4));
      d.sm.control = static_cast<uint8_t>(get_bits(buf, off + 104, 8));
      d.sm.successor_chip = chip_id_of(get_bits(buf, off + 112, 16), get_bits(buf, off + 136, 1));
      d.sm.successor_vp = static_cast<uint8_t>(get_bits(buf, off + 128, 8));
      if (d.sm.state > kMaxSmState || d.sm.control > kMaxSmControl)
        return make_error(Code::kMalformed, 1158,
                          fmt::format("{}: SMInfo state = {} (0-{}), control = {} (0-{})", format,
                                      d.sm.state, kMaxSmState, d.sm.control, kMaxSmControl));
      used = kSmInfoUsedBits;
      break;
  }
  GALAXY_TRY(check_zero_bits(format, buf, off + used, kNmpDataBits - used));
  return d;
}

}  // namespace galaxy::wire
