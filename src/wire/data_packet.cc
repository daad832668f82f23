// Table-routed data packets (docs/system.md 1.1, 1.2; docs/protocol.md).
#include "wire/data_packet.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/bits.h"
#include "wire/crc16.h"

namespace galaxy::wire {
namespace {

// Offsets in the head flit's 192-bit payload.
constexpr size_t kKindBit = 0;            // 4 bits
constexpr size_t kDestVpBit = 4;          // 6 bits
constexpr size_t kSrcVpBit = 10;          // 6 bits
constexpr size_t kDestNodeBit = 16;       // 16 bits
constexpr size_t kSrcNodeBit = 32;        // 16 bits
constexpr size_t kLengthBit = 48;         // 7 bits
constexpr size_t kTagBit = 55;            // 16 bits
constexpr size_t kBytesBit = 71;          // 8 bits
constexpr size_t kFlagsBit = 79;          // 4 bits
constexpr size_t kCrcBit = 83;            // 16 bits
constexpr size_t kHopsBit = 99;           // 8 bits, not covered by the CRC (each NRC rewrites it)
constexpr size_t kDestNodeHighBit = 107;  // bit 16 of dest_node
constexpr size_t kSrcNodeHighBit = 108;   // bit 16 of src_node
constexpr size_t kReservedBit = 109;      // 83 bits
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

// A flit's 192-bit payload as three words: payload byte i is bits 8i-8i+7 (base/bits.h's
// numbering), so that fields are shifts and masks and a flit's link bytes are its payload
// words shifted by 6 (wire/flit.h); the codecs run a word at a time.
using PayloadWords = std::array<uint64_t, 3>;
static_assert(sizeof(PayloadWords) == kFlitPayloadBytes);

constexpr void set_field(PayloadWords& w, size_t offset, unsigned width, uint64_t v) {
  v &= low_mask(width);
  const size_t i = offset / 64;
  const size_t s = offset % 64;
  w[i] |= v << s;
  if (s + width > 64) w[i + 1] |= v >> (64 - s);
}

constexpr uint64_t get_field(const PayloadWords& w, size_t offset, unsigned width) {
  const size_t i = offset / 64;
  const size_t s = offset % 64;
  uint64_t v = w[i] >> s;
  if (s + width > 64) v |= w[i + 1] << (64 - s);
  return v & low_mask(width);
}

// The head's payload; `hops` and `crc` as given (zero for the CRC's run).
PayloadWords head_words(const DataHead& h, uint16_t length_flits, uint16_t crc, uint8_t hops) {
  PayloadWords w{};
  set_field(w, kKindBit, 4, static_cast<uint8_t>(h.kind));
  set_field(w, kDestVpBit, 6, h.dest_vp);
  set_field(w, kSrcVpBit, 6, h.src_vp);
  set_field(w, kDestNodeBit, 16, chip_id_low(h.dest_node));
  set_field(w, kDestNodeHighBit, 1, chip_id_high(h.dest_node));
  set_field(w, kSrcNodeBit, 16, chip_id_low(h.src_node));
  set_field(w, kSrcNodeHighBit, 1, chip_id_high(h.src_node));
  set_field(w, kLengthBit, 7, length_flits);
  set_field(w, kTagBit, 16, h.tag);
  set_field(w, kBytesBit, 8, h.bytes);
  set_field(w, kFlagsBit, 4, h.flags);
  set_field(w, kCrcBit, 16, crc);
  set_field(w, kHopsBit, 8, hops);
  return w;
}

PayloadWords ext_words(const DataExt& x) {
  PayloadWords w{};
  set_field(w, kAddressBit, 64, x.address);
  set_field(w, kKeyBit, 32, x.key);
  set_field(w, kOffsetBit, 32, x.offset);
  set_field(w, kXLengthBit, 32, x.length);
  return w;
}

// A flit's 25 link bytes (wire/flit.h: kind, VC and the reserved bit, then the payload from bit
// 6), and back; false for bits no flit has (what decode_flit refuses).
// Word by word through registers (a copy through a local array makes the compiler mix vector
// and word accesses of the same bytes, which stalls on store forwarding).
// Eight bytes as a little-endian word and back.
uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

void store64(uint8_t* p, uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof v);
}

void put_flit(uint8_t* out, FlitKind kind, uint8_t vc, const PayloadWords& w) {
  const uint64_t first = static_cast<uint64_t>(kind) | uint64_t{vc} << 2;
  store64(out, first | w[0] << 6);
  store64(out + 8, w[1] << 6 | w[0] >> 58);
  store64(out + 16, w[2] << 6 | w[1] >> 58);
  out[kFlitBytes - 1] = static_cast<uint8_t>(w[2] >> 58);
}

bool get_flit(const uint8_t* in, FlitKind* kind, uint8_t* vc, uint8_t* payload) {
  const uint64_t b[3] = {load64(in), load64(in + 8), load64(in + 16)};
  const uint64_t top = in[kFlitBytes - 1];
  *kind = static_cast<FlitKind>(b[0] & 3u);
  *vc = static_cast<uint8_t>((b[0] >> 2) & 7u);
  if (*vc >= kNumVcs || (b[0] & 0x20u) != 0 || (top >> 6) != 0) return false;
  store64(payload, b[0] >> 6 | b[1] << 58);
  store64(payload + 8, b[1] >> 6 | b[2] << 58);
  store64(payload + 16, b[2] >> 6 | top << 58);
  return true;
}

PayloadWords words_at(const uint8_t* payload) {
  return {load64(payload), load64(payload + 8), load64(payload + 16)};
}

void put_words(uint8_t* payload, const PayloadWords& w) {
  for (size_t i = 0; i < w.size(); ++i) store64(payload + 8 * i, w[i]);
}

// The head's fields as the payload holds them.
DataHead head_fields(const PayloadWords& head, uint8_t vc) {
  DataHead h;
  h.vc = vc;
  h.kind = static_cast<PacketKind>(get_field(head, kKindBit, 4));
  h.dest_vp = static_cast<uint8_t>(get_field(head, kDestVpBit, 6));
  h.src_vp = static_cast<uint8_t>(get_field(head, kSrcVpBit, 6));
  h.dest_node = chip_id_of(get_field(head, kDestNodeBit, 16), get_field(head, kDestNodeHighBit, 1));
  h.src_node = chip_id_of(get_field(head, kSrcNodeBit, 16), get_field(head, kSrcNodeHighBit, 1));
  h.length_flits = static_cast<uint16_t>(get_field(head, kLengthBit, 7));
  h.tag = static_cast<uint16_t>(get_field(head, kTagBit, 16));
  h.bytes = static_cast<uint8_t>(get_field(head, kBytesBit, 8));
  h.flags = static_cast<uint8_t>(get_field(head, kFlagsBit, 4));
  h.crc = static_cast<uint16_t>(get_field(head, kCrcBit, 16));
  h.hops = static_cast<uint8_t>(get_field(head, kHopsBit, 8));
  return h;
}

// The head's reserved bits 109-191.
uint64_t head_reserved(const PayloadWords& head) {
  static_assert(kReservedBit == 109 && kFlitPayloadBits == 192);
  return (head[1] >> 45) | head[2];
}

// Whether decode_data_head accepts the head (its checks, without their messages).
bool head_acceptable(const DataHead& h, const PayloadWords& head) {
  return static_cast<uint8_t>(h.kind) <= kMaxPacketKind && h.vc < kNumVcs && h.vc != kMgmtVc &&
         h.bytes <= kDataPacketBytes && h.length_flits == data_packet_flits(h.bytes) &&
         head_reserved(head) == 0;
}

DataExt ext_fields(const PayloadWords& ext) {
  return {get_field(ext, kAddressBit, 64), static_cast<uint32_t>(get_field(ext, kKeyBit, 32)),
          static_cast<uint32_t>(get_field(ext, kOffsetBit, 32)),
          static_cast<uint32_t>(get_field(ext, kXLengthBit, 32))};
}

// The extension's reserved bits 160-191.
uint64_t ext_reserved(const PayloadWords& ext) {
  static_assert(kXReservedBit == 160);
  return ext[2] >> 32;
}

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
  if (auto why =
          chip_id_refusal("data head", {{"dest_node", h.dest_node}, {"src_node", h.src_node}}))
    return make_error(Code::kOutOfRange, 1707, *why);
  if (h.bytes > kDataPacketBytes)
    return make_error(code, encoding ? 1703 : kErrTooLong,
                      fmt::format("data head: bytes = {} exceeds {}", h.bytes, kDataPacketBytes));
  if ((h.flags & ~kDataFlagsMask) != 0)
    return make_error(
        code, encoding ? 1704 : 1714,
        fmt::format("data head: flags = {:#x}, expected bits of {:#x}", h.flags, kDataFlagsMask));
  return {};
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

// Head, extension and the payload flits' bytes in one run: what the packet's CRC covers (with
// the head's CRC and hop fields zero), the data padded to whole flits.
constexpr size_t kRunBytes = size_t{kMaxDataPacketFlits} * kFlitPayloadBytes;
constexpr size_t kRunDataAt = size_t{kDataHeaderFlits} * kFlitPayloadBytes;

}  // namespace

std::optional<DataHead> decode_data_head_bytes(std::span<const uint8_t> flit_bytes) {
  if (flit_bytes.size() < kFlitBytes) return std::nullopt;
  FlitKind kind;
  uint8_t vc;
  alignas(8) std::array<uint8_t, kFlitPayloadBytes> payload;
  if (!get_flit(flit_bytes.data(), &kind, &vc, payload.data()) || kind != FlitKind::kHead)
    return std::nullopt;
  const PayloadWords words = words_at(payload.data());
  const DataHead h = head_fields(words, vc);
  if (!head_acceptable(h, words)) return std::nullopt;
  return h;
}

Status check_data_packet(const DataPacket& p) {
  return check_head(p.head, true);
}

Result<size_t> encode_data_packet_bytes(const DataPacket& p, std::span<uint8_t> out) {
  const DataHead& h = p.head;
  const uint16_t length = static_cast<uint16_t>(data_packet_flits(h.bytes));
  const size_t n = size_t{length} * kFlitBytes;
  GALAXY_TRY(check_head(h, true));  // bytes <= 128 from here: 2-8 flits
  if (out.size() < n)
    return make_error(
        Code::kInvalidArgument, 1706,
        fmt::format("data packet: {} bytes of room for {} link bytes", out.size(), n));
  alignas(8) std::array<uint8_t, kRunBytes> run;
  PayloadWords head = head_words(h, length, 0, 0);
  const PayloadWords ext = ext_words(p.ext);
  put_words(run.data(), head);
  put_words(run.data() + kFlitPayloadBytes, ext);
  // The data in whole flits, zero after its last byte (whatever the packet holds there).
  for (size_t i = 0; i < kDataPacketBytes; i += 8)
    store64(run.data() + kRunDataAt + i, load64(p.payload.data() + i));
  std::memset(run.data() + kRunDataAt + h.bytes, 0, kRunBytes - kRunDataAt - h.bytes);
  const uint16_t crc = crc16(std::span<const uint8_t>(run.data(), kRunDataAt + h.bytes));
  set_field(head, kCrcBit, 16, crc);
  set_field(head, kHopsBit, 8, h.hops);
  put_flit(out.data(), FlitKind::kHead, h.vc, head);
  put_flit(out.data() + kFlitBytes, length == kDataHeaderFlits ? FlitKind::kTail : FlitKind::kBody,
           h.vc, ext);
  for (unsigned f = kDataHeaderFlits; f < length; ++f)
    put_flit(out.data() + size_t{f} * kFlitBytes,
             f + 1 == length ? FlitKind::kTail : FlitKind::kBody, h.vc,
             words_at(run.data() + size_t{f} * kFlitPayloadBytes));
  return n;
}

bool decode_clean_data_packet(std::span<const uint8_t> bytes, DataPacket* out) {
  const size_t n = bytes.size() / kFlitBytes;
  if (bytes.size() % kFlitBytes != 0 || n < kDataHeaderFlits || n > kMaxDataPacketFlits)
    return false;
  FlitKind kind;
  uint8_t vc;
  alignas(8) std::array<uint8_t, kRunBytes> run;
  if (!get_flit(bytes.data(), &kind, &vc, run.data()) || kind != FlitKind::kHead) return false;
  for (size_t i = 1; i < n; ++i) {
    FlitKind k;
    uint8_t v;
    if (!get_flit(bytes.data() + i * kFlitBytes, &k, &v, run.data() + i * kFlitPayloadBytes) ||
        v != vc || k != (i + 1 == n ? FlitKind::kTail : FlitKind::kBody))
      return false;
  }
  const PayloadWords head = words_at(run.data());
  DataHead& h = out->head;
  h = head_fields(head, vc);
  if (!head_acceptable(h, head) || h.length_flits != n) return false;
  const PayloadWords ext = words_at(run.data() + kFlitPayloadBytes);
  if (ext_reserved(ext) != 0) return false;
  const size_t end = kRunDataAt + h.bytes;
  const size_t padded = n * kFlitPayloadBytes;
  // The padding after the data must be zero: a byte at a time up to a word boundary, then words
  // (the run is word-aligned and whole flits are whole words: 24 bytes each).
  static_assert(kFlitPayloadBytes % 8 == 0 && kRunDataAt % 8 == 0);
  size_t i = end;
  for (; i % 8 != 0; ++i)
    if (run[i] != 0) return false;
  for (; i < padded; i += 8)
    if (load64(run.data() + i) != 0) return false;
  // The CRC and hop fields, side by side in the head's second word, as zeros.
  static_assert(kHopsBit == kCrcBit + 16 && kCrcBit >= 64 && kHopsBit + 8 <= 128);
  store64(run.data() + 8, head[1] & ~(low_mask(16 + 8) << (kCrcBit - 64)));
  if (crc16(std::span<const uint8_t>(run.data(), end)) != h.crc) return false;
  out->ext = ext_fields(ext);
  // The data, zero after its last byte (as decode_data_packet leaves it).
  std::memcpy(out->payload.data(), run.data() + kRunDataAt, kDataPacketBytes);
  std::memset(out->payload.data() + h.bytes, 0, kDataPacketBytes - h.bytes);
  return true;
}

Result<Flit> encode_data_head(const DataHead& h) {
  GALAXY_TRY(check_head(h, true));
  if (h.length_flits < kMinLengthFlits || h.length_flits > kMaxLengthFlits)
    return make_error(Code::kOutOfRange, 1705,
                      fmt::format("data head: length_flits = {}, expected {}-{}", h.length_flits,
                                  kMinLengthFlits, kMaxLengthFlits));
  Flit f;
  f.kind = FlitKind::kHead;
  f.vc = h.vc;
  put_words(f.payload.data(), head_words(h, h.length_flits, h.crc, h.hops));
  return f;
}

Result<DataHead> decode_data_head(const Flit& f) {
  if (f.kind != FlitKind::kHead)
    return make_error(Code::kMalformed, kErrMissingHead,
                      fmt::format("data packet: first flit kind = {}, expected head (missing head)",
                                  flit_kind_name(f.kind)));
  const PayloadWords words = words_at(f.payload.data());
  const DataHead h = head_fields(words, f.vc);
  GALAXY_TRY(check_head(h, false));
  if (h.length_flits != data_packet_flits(h.bytes))
    return make_error(Code::kMalformed, kErrTooLong,
                      fmt::format("data head: length_flits = {} for {} payload bytes, expected {}",
                                  h.length_flits, h.bytes, data_packet_flits(h.bytes)));
  if (uint64_t r = head_reserved(words); r != 0)
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
  put_words(flits[1].payload.data(), ext_words(p.ext));
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
  const PayloadWords ext = words_at(flits[1].payload.data());
  p.ext = ext_fields(ext);
  for (unsigned i = 0; i < h.bytes; i += kFlitPayloadBytes)
    std::memcpy(p.payload.data() + i,
                flits[kDataHeaderFlits + i / kFlitPayloadBytes].payload.data(),
                std::min<unsigned>(kFlitPayloadBytes, h.bytes - i));
  if (packet_crc(flits[0], flits[1], p.data()) != h.crc)
    return make_error(
        Code::kCrcMismatch, kErrDataError,
        fmt::format("data packet: CRC {:#06x} does not match the data (data error)", h.crc));
  if (uint64_t r = ext_reserved(ext); r != 0)
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
