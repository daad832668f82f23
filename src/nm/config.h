// Configuration (docs/system.md 2.5.1): bulk register writes to many chips, and EEPROM defaults.
//   apply_writes — a list of (chip, address, value) in file order. Consecutive writes to one chip
//     share a two-register write packet; each chip's packets go one after another (its order
//     is kept), different chips' in parallel. A two-register write is all or nothing
//     (docs/registers.md), so a refused pair is retried as two single writes: only the refused
//     entry is lost, and the chip's later entries still go.
//   write_eeprom_defaults — the chip's current configuration registers as a boot image
//     (chip/eeprom.h) written into its EEPROM, then read back and compared.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chip/eeprom.h"
#include "nm/fabric_map.h"
#include "nm/requester.h"

namespace galaxy::nm {

struct ConfigWrite {
  uint32_t node = 0;  // FabricMap node
  uint16_t addr = 0;
  uint64_t value = 0;
  size_t entry = 0;  // the caller's index (e.g. the file's entry), reported back
};

struct ConfigWriteFailure {
  ConfigWrite write;
  Status status;          // the Requester's error (timeout or the NMA's refusal)
  std::string nma_error;  // "read_only", "bad_value", ...; empty for a timeout
};

struct ConfigApplyResult {
  uint64_t applied = 0;
  std::vector<ConfigWriteFailure> failures;  // ordered by entry
  uint64_t requests = 0;
  Picoseconds elapsed = 0;
};

// Never fails as a whole: refusals and timeouts are per entry. Writes to the server's own NIC
// or to nodes outside the map are failures of their entry.
ConfigApplyResult apply_writes(Requester& requester, const FabricMap& map,
                               const std::vector<ConfigWrite>& writes);

// The configuration registers stored as EEPROM defaults: CHIP_ID, CHIP_CTRL, FAULT_ENABLE,
// FAULT_MASK, SCRATCH, and LINK_PARAMS of every linked port.
std::vector<uint16_t> default_registers(const FabricMap& map, uint32_t node);
// Reads them in-band (two per request).
Result<chip::BootImage> read_defaults(Requester& requester, const FabricMap& map, uint32_t node);

// EEPROM access in-band, up to six bytes per packet, one packet after another.
Status write_eeprom(Requester& requester, const FabricMap& map, uint32_t node, uint16_t addr,
                    std::span<const uint8_t> bytes);
Result<std::vector<uint8_t>> read_eeprom(Requester& requester, const FabricMap& map, uint32_t node,
                                         uint16_t addr, size_t count);
// The boot image in a chip's EEPROM, read in-band (chip::read_boot_image's errors: kNotFound
// for a blank EEPROM, kMalformed for one that does not parse).
Result<chip::BootImage> read_boot_image(Requester& requester, const FabricMap& map, uint32_t node);

struct EepromDefaultsResult {
  chip::BootImage image;
  size_t bytes = 0;
  uint64_t packets = 0;  // write and read-back packets
  bool verified = false;
  Picoseconds write_time = 0;  // simulated: each byte written costs about 3 ms
  Picoseconds verify_time = 0;
};
Result<EepromDefaultsResult> write_eeprom_defaults(Requester& requester, const FabricMap& map,
                                                   uint32_t node);

}  // namespace galaxy::nm

namespace galaxy::nm {

// One entry of a configuration file before its chip is resolved against a fabric map.
struct ConfigEntry {
  std::string chip;  // chip id, name, nic:<index>, all-nrc or all-nic
  uint16_t addr = 0;
  uint64_t value = 0;
  size_t index = 0;  // position in "writes"
};

// Parses {"writes": [{"chip": ..., "addr": "0x012|SCRATCH|PORT3.LINK_PARAMS", "value": 123}]}.
// A total decoder of untrusted text (fuzz target tests/fuzz/fuzz_config.cc): errors name the
// entry and the field.
Result<std::vector<ConfigEntry>> parse_config(std::string_view text);

}  // namespace galaxy::nm
