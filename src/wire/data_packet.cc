// Table-routed data packets (docs/system.md 1.1, 1.2; docs/protocol.md).
#include "wire/data_packet.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/bits.h"
#include "wire/crc16.h"

namespace galaxy::wire {
namespace {

// Offsets in the head flit's 192-bit payload.
constexpr size_t kKindBit = 0;        // 4 bits
constexpr size_t kDestVpBit = 4;      // 6 bits
constexpr size_t kSrcVpBit = 10;      // 6 bits
constexpr size_t kDestNodeBit = 16;   // 16 bits
constexpr size_t kSrcNodeBit = 32;    // 16 bits
constexpr size_t kLengthBit = 48;     // 7 bits
constexpr size_t kTagBit = 55;        // 16 bits
constexpr size_t kBytesBit = 71;      // 8 bits
constexpr size_t kFlagsBit = 79;      // 4 bits
constexpr size_t kCrcBit = 83;        // 16 bits
constexpr size_t kHopsBit = 99;       // 8 bits, not covered by the CRC (each NRC rewrites it)
constexpr size_t kReservedBit = 107;  // 85 bits
// Offsets in the extension flit's payload.
constexpr size_t kAddressBit = 0;  // 64 bits
constexpr size_t kKeyBit = 64;     // 32 bits
constexpr size_t kOffsetBit = 96;  // 32 bits
constexpr size_t kXLengthBit = 128;
constexpr size_t kXReservedBit = 160;  // 32 bits
constexpr uint8_t kMaxVp = 63;
constexpr uint16_t kMinLengthFlits = kDataHeaderFlits;
constexpr uint16_t kMaxLengthFlits = kMaxDataPacketFlits;

// Error ids whose defect is not "malformed".
constexpr uint16_t kErrMissingHead = 1720;
constexpr uint16_t kErrMissingTail = 1721;
constexpr uint16_t kErrTooLong = 1722;
constexpr uint16_t kErrDataError = 1723;

Status check_head(const DataHead& h, bool encoding) {
  const Code code = encoding ? Code::kInvalidArgument : Code::kMalformed;
  if (static_cast<uint8_t>(h.kind) > kMaxPacketKind)
    return make_error(code, encoding ? 1700 : 1712,
                      fmt::format("data head: kind = {} exceeds {}", static_cast<unsigned>(h.kind),
                                  kMaxPacketKind));
  if (h.vc >= kNumVcs || h.vc == kMgmtVc)
    return make_error(
        code, encoding ? 1701 : 1711,
        fmt::format("data head: vc = {}, expected 0-5 but not {} (management)", h.vc, kMgmtVc));
  if (h.dest_vp > kMaxVp || h.src_vp > kMaxVp) {
    bool dest = h.dest_vp > kMaxVp;
    return make_error(Code::kOutOfRange, 1702,
                      fmt::format("data head: {} = {} exceeds {}", dest ? "dest_vp" : "src_vp",
                                  dest ? h.dest_vp : h.src_vp, kMaxVp));
  }
  if (h.bytes > kDataPacketBytes)
    return make_error(code, encoding ? 1703 : kErrTooLong,
                      fmt::format("data head: bytes = {} exceeds {}", h.bytes, kDataPacketBytes));
  if ((h.flags & ~kDataFlagsMask) != 0)
    return make_error(
        code, encoding ? 1704 : 1714,
        fmt::format("data head: flags = {:#x}, expected bits of {:#x}", h.flags, kDataFlagsMask));
  return {};
}

void put_head(std::span<uint8_t> p, const DataHead& h, uint16_t length_flits, uint16_t crc) {
  put_bits(p, kKindBit, 4, static_cast<uint8_t>(h.kind));
  put_bits(p, kDestVpBit, 6, h.dest_vp);
  put_bits(p, kSrcVpBit, 6, h.src_vp);
  put_bits(p, kDestNodeBit, 16, h.dest_node);
  put_bits(p, kSrcNodeBit, 16, h.src_node);
  put_bits(p, kLengthBit, 7, length_flits);
  put_bits(p, kTagBit, 16, h.tag);
  put_bits(p, kBytesBit, 8, h.bytes);
  put_bits(p, kFlagsBit, 4, h.flags);
  put_bits(p, kCrcBit, 16, crc);
  put_bits(p, kHopsBit, 8, h.hops);
}

void put_ext(std::span<uint8_t> p, const DataExt& x) {
  put_bits(p, kAddressBit, 64, x.address);
  put_bits(p, kKeyBit, 32, x.key);
  put_bits(p, kOffsetBit, 32, x.offset);
  put_bits(p, kXLengthBit, 32, x.length);
}

// CRC-16 over the head payload with its CRC and hop fields zero, the extension payload and the
// data.
uint16_t packet_crc(const Flit& head, const Flit& ext, std::span<const uint8_t> data) {
  // Head (its CRC and hop count as zeros), extension and data in one run, which crc16 folds
  // fastest.
  std::array<uint8_t, 2 * kFlitPayloadBytes + kDataPacketBytes> all;
  std::span<uint8_t> h(all.data(), kFlitPayloadBytes);
  std::memcpy(h.data(), head.payload.data(), kFlitPayloadBytes);
  put_bits(h, kCrcBit, 16, 0);
  put_bits(h, kHopsBit, 8, 0);
  std::memcpy(all.data() + kFlitPayloadBytes, ext.payload.data(), kFlitPayloadBytes);
  const size_t n = std::min(data.size(), size_t{kDataPacketBytes});
  std::memcpy(all.data() + 2 * kFlitPayloadBytes, data.data(), n);
  return crc16(std::span<const uint8_t>(all.data(), 2 * kFlitPayloadBytes + n));
}

uint64_t reserved_bits(std::span<const uint8_t> p, size_t from) {
  uint64_t any = 0;
  for (size_t off = from; off < kFlitPayloadBits; off += 64)
    any |= get_bits(p, off, static_cast<unsigned>(std::min<size_t>(64, kFlitPayloadBits - off)));
  return any;
}

}  // namespace

Result<Flit> encode_data_head(const DataHead& h) {
  GALAXY_TRY(check_head(h, true));
  if (h.length_flits < kMinLengthFlits || h.length_flits > kMaxLengthFlits)
    return make_error(Code::kOutOfRange, 1705,
                      fmt::format("data head: length_flits = {}, expected {}-{}", h.length_flits,
                                  kMinLengthFlits, kMaxLengthFlits));
  Flit f;
  f.kind = FlitKind::kHead;
  f.vc = h.vc;
  put_head(f.payload, h, h.length_flits, h.crc);
  return f;
}

Result<DataHead> decode_data_head(const Flit& f) {
  if (f.kind != FlitKind::kHead)
    return make_error(Code::kMalformed, kErrMissingHead,
                      fmt::format("data packet: first flit kind = {}, expected head (missing head)",
                                  flit_kind_name(f.kind)));
  DataHead h;
  h.vc = f.vc;
  h.kind = static_cast<PacketKind>(get_bits(f.payload, kKindBit, 4));
  h.dest_vp = static_cast<uint8_t>(get_bits(f.payload, kDestVpBit, 6));
  h.src_vp = static_cast<uint8_t>(get_bits(f.payload, kSrcVpBit, 6));
  h.dest_node = static_cast<uint16_t>(get_bits(f.payload, kDestNodeBit, 16));
  h.src_node = static_cast<uint16_t>(get_bits(f.payload, kSrcNodeBit, 16));
  h.length_flits = static_cast<uint16_t>(get_bits(f.payload, kLengthBit, 7));
  h.tag = static_cast<uint16_t>(get_bits(f.payload, kTagBit, 16));
  h.bytes = static_cast<uint8_t>(get_bits(f.payload, kBytesBit, 8));
  h.flags = static_cast<uint8_t>(get_bits(f.payload, kFlagsBit, 4));
  h.crc = static_cast<uint16_t>(get_bits(f.payload, kCrcBit, 16));
  h.hops = static_cast<uint8_t>(get_bits(f.payload, kHopsBit, 8));
  GALAXY_TRY(check_head(h, false));
  if (h.length_flits != data_packet_flits(h.bytes))
    return make_error(Code::kMalformed, kErrTooLong,
                      fmt::format("data head: length_flits = {} for {} payload bytes, expected {}",
                                  h.length_flits, h.bytes, data_packet_flits(h.bytes)));
  if (uint64_t r = reserved_bits(f.payload, kReservedBit); r != 0)
    return make_error(Code::kMalformed, 1715,
                      fmt::format("data head: reserved payload bits {}-191 = {:#x}, expected 0",
                                  kReservedBit, r));
  return h;
}

Result<std::vector<Flit>> encode_data_packet(const DataPacket& p) {
  DataHead h = p.head;
  h.length_flits = static_cast<uint16_t>(data_packet_flits(h.bytes));
  h.crc = 0;
  auto head = encode_data_head(h);
  if (!head.ok()) return head.error();
  std::vector<Flit> flits(h.length_flits);
  flits[0] = *head;
  flits[1].kind = FlitKind::kBody;
  flits[1].vc = h.vc;
  put_ext(flits[1].payload, p.ext);
  // The payload, a flit's worth at a time.
  for (unsigned i = 0; i < h.bytes; i += kFlitPayloadBytes) {
    Flit& f = flits[kDataHeaderFlits + i / kFlitPayloadBytes];
    f.vc = h.vc;
    std::memcpy(f.payload.data(), p.payload.data() + i,
                std::min<unsigned>(kFlitPayloadBytes, h.bytes - i));
  }
  flits.back().kind = FlitKind::kTail;
  put_bits(flits[0].payload, kCrcBit, 16, packet_crc(flits[0], flits[1], p.data()));
  return flits;
}

Result<DataPacket> decode_data_packet(std::span<const Flit> flits) {
  if (flits.empty())
    return make_error(Code::kMalformed, kErrMissingHead, "data packet: no flits (missing head)");
  DataPacket p;
  auto head = decode_data_head(flits[0]);
  if (!head.ok()) return head.error();
  p.head = *head;
  const DataHead& h = p.head;
  for (size_t i = 1; i < flits.size(); ++i) {
    const Flit& f = flits[i];
    if (f.kind == FlitKind::kHead || f.kind == FlitKind::kHeadTail)
      return make_error(Code::kMalformed, kErrMissingTail,
                        fmt::format("data packet: flit {} is a {} before the tail (missing tail)",
                                    i, flit_kind_name(f.kind)));
    if (f.kind == FlitKind::kTail && i + 1 != flits.size())
      return make_error(
          Code::kMalformed, kErrTooLong,
          fmt::format("data packet: {} flits after the tail (too long)", flits.size() - i - 1));
    if (f.vc != h.vc)
      return make_error(
          Code::kMalformed, 1724,
          fmt::format("data packet: flit {} on vc {}, the head on vc {}", i, f.vc, h.vc));
  }
  if (flits.back().kind != FlitKind::kTail)
    return make_error(
        Code::kMalformed, kErrMissingTail,
        fmt::format("data packet: {} flits and no tail (missing tail)", flits.size()));
  if (flits.size() != h.length_flits)
    return make_error(
        Code::kMalformed, kErrTooLong,
        fmt::format("data packet: {} flits, the head says length_flits = {}{}", flits.size(),
                    h.length_flits, flits.size() > h.length_flits ? " (too long)" : ""));
  const Flit& x = flits[1];
  p.ext.address = get_bits(x.payload, kAddressBit, 64);
  p.ext.key = static_cast<uint32_t>(get_bits(x.payload, kKeyBit, 32));
  p.ext.offset = static_cast<uint32_t>(get_bits(x.payload, kOffsetBit, 32));
  p.ext.length = static_cast<uint32_t>(get_bits(x.payload, kXLengthBit, 32));
  for (unsigned i = 0; i < h.bytes; i += kFlitPayloadBytes)
    std::memcpy(p.payload.data() + i,
                flits[kDataHeaderFlits + i / kFlitPayloadBytes].payload.data(),
                std::min<unsigned>(kFlitPayloadBytes, h.bytes - i));
  if (packet_crc(flits[0], flits[1], p.data()) != h.crc)
    return make_error(
        Code::kCrcMismatch, kErrDataError,
        fmt::format("data packet: CRC {:#06x} does not match the data (data error)", h.crc));
  if (uint64_t r = reserved_bits(x.payload, kXReservedBit); r != 0)
    return make_error(Code::kMalformed, 1725,
                      fmt::format("data packet: extension reserved bits {}-191 = {:#x}, "
                                  "expected 0",
                                  kXReservedBit, r));
  const unsigned used = h.bytes % kFlitPayloadBytes;
  if (used != 0 && std::any_of(flits.back().payload.begin() + used, flits.back().payload.end(),
                               [](uint8_t b) { return b != 0; }))
    return make_error(Code::kMalformed, 1726,
                      fmt::format("data packet: tail padding after byte {} not zero", used));
  return p;
}

const char* data_defect_name(DataDefect d) {
  switch (d) {
    case DataDefect::kNone:
      return "none";
    case DataDefect::kMissingHead:
      return "missing head";
    case DataDefect::kMissingTail:
      return "missing tail";
    case DataDefect::kTooLong:
      return "too long";
    case DataDefect::kMisrouted:
      return "misrouted";
    case DataDefect::kDataError:
      return "data error";
    case DataDefect::kMalformed:
      return "malformed";
  }
  return "?";
}

DataDefect data_defect_of(const Error& e) {
  switch (e.id) {
    case kErrMissingHead:
      return DataDefect::kMissingHead;
    case kErrMissingTail:
      return DataDefect::kMissingTail;
    case kErrTooLong:
      return DataDefect::kTooLong;
    case kErrDataError:
      return DataDefect::kDataError;
    default:
      return DataDefect::kMalformed;
  }
}

void set_data_hops(Flit& head, uint8_t hops) {
  put_bits(head.payload, kHopsBit, 8, hops);
}

void set_data_hops(std::span<uint8_t> packet_bytes, uint8_t hops) {
  // The head flit's payload starts after its 6 bits of kind, VC and reserved (wire/flit.h).
  if (packet_bytes.size() < kFlitBytes) return;
  put_bits(packet_bytes.first(kFlitBytes), 6 + kHopsBit, 8, hops);
}

}  // namespace galaxy::wire
