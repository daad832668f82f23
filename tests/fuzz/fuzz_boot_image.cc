// libFuzzer target: decode_boot_image (EEPROM boot image, docs/registers.md); a decoded image
// re-encodes to one that decodes to the same records, and read_boot_image of an EEPROM holding
// the bytes agrees with the decoder. The bytes then power on an NRC and a NIC, once as given
// and once with the CRC repaired so that the record checks are reached: power_on() must not
// crash, and when it fails nothing may have been applied (chip.h: "a bad image changes
// nothing").
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "chip/eeprom.h"
#include "chip/nic.h"
#include "chip/nrc.h"
#include "chip/registers.h"
#include "wire/crc16.h"

namespace {

using namespace galaxy::chip;

// The image length the record types imply, or 0 if the bytes end first.
size_t implied_length(std::span<const uint8_t> in) {
  if (in.size() < 8) return 0;
  size_t count = in[4] | size_t{in[5]} << 8;
  size_t off = 8;
  for (size_t i = 0; i < count; ++i) {
    if (off >= in.size()) return 0;
    off += in[off] == 0x01 ? 11 : 13;
  }
  return off + 2 <= in.size() ? off + 2 : 0;
}

void power_on_checked(Chip& chip, std::span<const uint8_t> bytes) {
  chip.eeprom().write_block(0, bytes);
  if (chip.power_on().ok()) return;
  if (chip.configured() || chip.read_register(reg::kScratch).value != 0 ||
      chip.read_register(reg::kChipCtrl).value != 0 ||
      chip.read_register(reg::kFaultEnable).value != 0)
    std::abort();
  if (chip.type() == galaxy::wire::ChipType::kNrc &&
      chip.read_register(reg::kRtEntriesWritten).value != 0)
    std::abort();
}

void power_on_both(std::span<const uint8_t> bytes) {
  Nrc nrc;
  power_on_checked(nrc, bytes);
  Nic nic;
  power_on_checked(nic, bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, std::min<size_t>(size, kEepromBytes));
  auto image = decode_boot_image(in);
  if (image.ok()) {
    auto again = decode_boot_image(encode_boot_image(*image));
    if (!again.ok() || *again != *image) std::abort();
    Eeprom e;
    e.write_block(0, in);
    auto stored = read_boot_image(e);
    if (!stored.ok() || *stored != *image) std::abort();
  }
  power_on_both(in);
  if (size_t n = implied_length(in); n != 0) {
    std::vector<uint8_t> fixed(in.begin(), in.end());
    uint16_t crc = galaxy::wire::crc16(std::span<const uint8_t>(fixed).first(n - 2));
    fixed[n - 2] = static_cast<uint8_t>(crc);
    fixed[n - 1] = static_cast<uint8_t>(crc >> 8);
    power_on_both(fixed);
  }
  return 0;
}
