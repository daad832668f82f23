// The 64 KiB EEPROM of every chip (docs/system.md 1.4): 16-bit byte addresses, behind I2C (the
// engine charges I2C time; this model is timeless). Pages are allocated on first write so a
// TH-2 model with 24,000 chips holds only what was written (a blank byte reads 0xFF).
//
// Boot image (docs/registers.md "EEPROM boot image"), little-endian:
//   0  "GXE1" magic      4  u16 record count   6  u16 reserved (0)
//   8  records: 0x01 register  {u16 address, u64 value}                       (11 bytes)
//               0x02 route     {u32 input-port mask, u16 first, u16 count, u32 port set} (13 bytes)
//   then u16 CRC-16 (wire/crc16.h) over bytes [0, end of records)
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "chip/port_set.h"

namespace galaxy::chip {

inline constexpr uint32_t kEepromBytes = 64 * 1024;

class Eeprom {
 public:
  uint8_t read(uint16_t addr) const {
    if (pages_.empty() || !pages_[addr >> 8]) return 0xFF;
    return (*pages_[addr >> 8])[addr & 0xFF];
  }
  void write(uint16_t addr, uint8_t v);
  void write_block(uint16_t addr, std::span<const uint8_t> data);
  std::vector<uint8_t> read_block(uint16_t addr, size_t n) const;
  size_t allocated_bytes() const;

 private:
  std::vector<std::unique_ptr<std::array<uint8_t, 256>>> pages_;  // 256 pages once written
};

struct BootRegister {
  uint16_t address = 0;
  uint64_t value = 0;
  bool operator==(const BootRegister&) const = default;
};
struct BootRoute {
  PortSet inputs;
  uint32_t first = 0;  // destinations as RT_SELECT takes them (17 bits)
  uint32_t count = 0;
  PortSet ports;
  bool operator==(const BootRoute&) const = default;
};
struct BootImage {
  std::vector<BootRegister> registers;
  std::vector<BootRoute> routes;
  bool operator==(const BootImage&) const = default;
};

std::vector<uint8_t> encode_boot_image(const BootImage& image);
// Total decoder: a blank EEPROM (no magic) is reported as kNotFound; anything else that does
// not parse (unknown record type, truncation, CRC) as kMalformed naming the offset.
Result<BootImage> decode_boot_image(std::span<const uint8_t> bytes);
// Reads the image through `read(addr, count, out)` (the EEPROM itself, or management's in-band
// EEPROM reads): the 8-byte header first, so a blank EEPROM costs 8 bytes, then the records the
// header counts (trailing bytes ignored).
using EepromReader = std::function<Status(uint16_t addr, size_t count, std::vector<uint8_t>* out)>;
Result<BootImage> read_boot_image(const EepromReader& read);
Result<BootImage> read_boot_image(const Eeprom& e);

}  // namespace galaxy::chip
