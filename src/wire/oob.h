// The monitor board's protocol (docs/system.md 2.1, docs/management.md "Out-of-band path"): the
// management server asks a chassis's monitor board over TCP to act on one of its chips; the
// board answers with the outcome and the time its I2C bus took. Fixed-size frames, big-endian:
//
//   request  (32 bytes): magic "GMB1", version 1, op, 2 reserved (0), chip (u32), tag (u32),
//                        register address (u16), 6 reserved (0), value (u64)
//   response (40 bytes): magic "GMB1", version 1, op, error id (u16, 0 = done), chip (u32),
//                        tag (u32), flags (u32: bit 0 the chip is powered), value (u64),
//                        I2C bus time in ns (u64)
//
// The tag is the client's, echoed so a client can match answers to requests. Decoding checks
// every field: a frame that fails is refused whole.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace galaxy::wire {

inline constexpr size_t kOobRequestBytes = 32;
inline constexpr size_t kOobResponseBytes = 40;
inline constexpr uint32_t kOobMagic = 0x474D4231;  // "GMB1"
inline constexpr uint8_t kOobVersion = 1;
inline constexpr uint32_t kOobPowered = 1;  // response flags bit 0

enum class OobOp : uint8_t {
  kStatus = 0,           // power state only; no bus traffic
  kPowerOn = 1,          // the chip's regulator on: the chip boots from its EEPROM
  kPowerOff = 2,         // the regulator off
  kReset = 3,            // the reset line pulsed: volatile state lost, boots again
  kReadTemperature = 4,  // value: milli-degrees Celsius (two's complement)
  kReadVoltage = 5,      // value: core millivolts
  kReadRegister = 6,     // value: the register's 64 bits
  kWriteRegister = 7,    // value: written
};
inline constexpr uint8_t kOobOpCount = 8;
std::string_view oob_op_name(OobOp op);

struct OobRequest {
  OobOp op = OobOp::kStatus;
  uint32_t chip = 0;  // the fabric's node index (its plan's numbering)
  uint32_t tag = 0;
  uint16_t address = 0;
  uint64_t value = 0;
  bool operator==(const OobRequest&) const = default;
};

struct OobResponse {
  OobOp op = OobOp::kStatus;
  uint16_t error_id = 0;  // 0: done; otherwise the board's error id (E<id>)
  uint32_t chip = 0;
  uint32_t tag = 0;
  uint32_t flags = 0;
  uint64_t value = 0;
  uint64_t bus_ns = 0;
  bool operator==(const OobResponse&) const = default;
};

std::array<uint8_t, kOobRequestBytes> encode_oob_request(const OobRequest& r);
std::array<uint8_t, kOobResponseBytes> encode_oob_response(const OobResponse& r);
// E1950 wrong size, E1951 magic, E1952 version, E1953 op, E1954 reserved bits set.
Result<OobRequest> decode_oob_request(std::span<const uint8_t> bytes);
Result<OobResponse> decode_oob_response(std::span<const uint8_t> bytes);

}  // namespace galaxy::wire
