#include "chip/eeprom.h"

#include <fmt/format.h>

#include "wire/crc16.h"

namespace galaxy::chip {

void Eeprom::write(uint16_t addr, uint8_t v) {
  if (pages_.empty()) pages_.resize(256);
  auto& page = pages_[addr >> 8];
  if (!page) {
    page = std::make_unique<std::array<uint8_t, 256>>();
    page->fill(0xFF);
  }
  (*page)[addr & 0xFF] = v;
}

void Eeprom::write_block(uint16_t addr, std::span<const uint8_t> data) {
  for (size_t i = 0; i < data.size(); ++i) write(static_cast<uint16_t>(addr + i), data[i]);
}

std::vector<uint8_t> Eeprom::read_block(uint16_t addr, size_t n) const {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = read(static_cast<uint16_t>(addr + i));
  return out;
}

size_t Eeprom::allocated_bytes() const {
  size_t n = 0;
  for (const auto& p : pages_) n += p ? 256 : 0;
  return n;
}

namespace {
constexpr uint8_t kMagic[4] = {'G', 'X', 'E', '1'};
constexpr uint8_t kRecRegister = 0x01;
constexpr uint8_t kRecRoute = 0x02;      // ports 0-31: 32-bit input mask and port set
constexpr uint8_t kRecWideRoute = 0x03;  // ports 0-127: 128-bit input mask and port set
constexpr uint8_t kRecFarRoute = 0x04;   // as wide, destinations past 65,535: 3-byte first, count
constexpr size_t kMaxRecordBytes = 39;

size_t record_bytes(uint8_t type) {
  return type == kRecRegister    ? 11
         : type == kRecRoute     ? 13
         : type == kRecWideRoute ? 37
         : type == kRecFarRoute  ? 39
                                 : 0;
}

void put_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get_le(std::span<const uint8_t> in, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{in[off + i]} << (8 * i);
  return v;
}
}  // namespace

std::vector<uint8_t> encode_boot_image(const BootImage& image) {
  std::vector<uint8_t> out(kMagic, kMagic + 4);
  put_le(out, image.registers.size() + image.routes.size(), 2);
  put_le(out, 0, 2);
  for (const auto& r : image.registers) {
    out.push_back(kRecRegister);
    put_le(out, r.address, 2);
    put_le(out, r.value, 8);
  }
  for (const auto& r : image.routes) {
    const bool far = r.first > 0xFFFF || r.count > 0xFFFF;
    const bool wide = far || r.inputs.beyond(32) || r.ports.beyond(32);
    out.push_back(far ? kRecFarRoute : wide ? kRecWideRoute : kRecRoute);
    auto put_set = [&](const PortSet& p) {
      if (!wide) return put_le(out, p.word(0), 4);
      put_le(out, p.word(0), 8);
      put_le(out, p.word(1), 8);
    };
    put_set(r.inputs);
    put_le(out, r.first, far ? 3 : 2);
    put_le(out, r.count, far ? 3 : 2);
    put_set(r.ports);
  }
  put_le(out, wire::crc16(out), 2);
  return out;
}

Result<BootImage> decode_boot_image(std::span<const uint8_t> in) {
  if (in.size() < 4 || !std::equal(kMagic, kMagic + 4, in.begin()))
    return make_error(Code::kNotFound, 2010, "boot image: no 'GXE1' magic (blank EEPROM)");
  if (in.size() < 10)
    return make_error(
        Code::kMalformed, 2011,
        fmt::format("boot image: {} bytes is shorter than the 10-byte minimum", in.size()));
  uint64_t count = get_le(in, 4, 2);
  if (get_le(in, 6, 2) != 0)
    return make_error(Code::kMalformed, 2012, "boot image: reserved field at offset 6 is not 0");
  BootImage img;
  size_t off = 8;
  for (uint64_t i = 0; i < count; ++i) {
    if (off >= in.size())
      return make_error(
          Code::kMalformed, 2013,
          fmt::format("boot image: record {} of {} missing at offset {}", i, count, off));
    uint8_t type = in[off];
    size_t need = record_bytes(type);
    if (need == 0)
      return make_error(
          Code::kMalformed, 2014,
          fmt::format("boot image: record type = 0x{:02x} at offset {} is unknown", type, off));
    if (off + need > in.size())
      return make_error(Code::kMalformed, 2015,
                        fmt::format("boot image: record at offset {} truncated", off));
    if (type == kRecRegister) {
      img.registers.push_back(
          {static_cast<uint16_t>(get_le(in, off + 1, 2)), get_le(in, off + 3, 8)});
    } else if (type == kRecRoute) {
      img.routes.push_back({PortSet::from_words(get_le(in, off + 1, 4)),
                            static_cast<uint16_t>(get_le(in, off + 5, 2)),
                            static_cast<uint16_t>(get_le(in, off + 7, 2)),
                            PortSet::from_words(get_le(in, off + 9, 4))});
    } else if (type == kRecWideRoute) {
      img.routes.push_back({PortSet::from_words(get_le(in, off + 1, 8), get_le(in, off + 9, 8)),
                            static_cast<uint16_t>(get_le(in, off + 17, 2)),
                            static_cast<uint16_t>(get_le(in, off + 19, 2)),
                            PortSet::from_words(get_le(in, off + 21, 8), get_le(in, off + 29, 8))});
    } else {
      img.routes.push_back({PortSet::from_words(get_le(in, off + 1, 8), get_le(in, off + 9, 8)),
                            static_cast<uint32_t>(get_le(in, off + 17, 3)),
                            static_cast<uint32_t>(get_le(in, off + 20, 3)),
                            PortSet::from_words(get_le(in, off + 23, 8), get_le(in, off + 31, 8))});
    }
    off += need;
  }
  if (off + 2 > in.size())
    return make_error(Code::kMalformed, 2016,
                      fmt::format("boot image: CRC missing at offset {}", off));
  uint16_t want = static_cast<uint16_t>(get_le(in, off, 2));
  uint16_t got = wire::crc16(in.subspan(0, off));
  if (want != got)
    return make_error(Code::kCrcMismatch, 2017,
                      fmt::format("boot image: crc = 0x{:04x}, computed 0x{:04x}", want, got));
  return img;
}

Result<BootImage> read_boot_image(const EepromReader& read) {
  std::vector<uint8_t> head;
  GALAXY_TRY(read(0, 8, &head));
  if (head.size() < 8 || !std::equal(kMagic, kMagic + 4, head.begin()))
    return decode_boot_image(head);
  uint64_t count = get_le(head, 4, 2);
  size_t max_len = 8 + count * kMaxRecordBytes + 2;
  if (max_len > kEepromBytes) max_len = kEepromBytes;
  std::vector<uint8_t> all;
  GALAXY_TRY(read(0, max_len, &all));
  // Records are variable length; decode the prefix that parses (trailing bytes are ignored).
  size_t off = 8;
  for (uint64_t i = 0; i < count && off < all.size(); ++i) {
    const size_t n = record_bytes(all[off]);
    off += n != 0 ? n : all.size();
  }
  if (off + 2 <= all.size()) all.resize(off + 2);
  return decode_boot_image(all);
}

Result<BootImage> read_boot_image(const Eeprom& e) {
  return read_boot_image([&](uint16_t addr, size_t count, std::vector<uint8_t>* out) -> Status {
    *out = e.read_block(addr, count);
    return {};
  });
}

}  // namespace galaxy::chip
