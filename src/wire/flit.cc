#include "wire/flit.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

constexpr size_t kKindBit = 0;
constexpr size_t kVcBit = 2;
constexpr size_t kReservedBit = 5;
constexpr size_t kPayloadBit = 6;

}  // namespace

FlitBytes encode_flit(const Flit& f) {
  FlitBytes b{};
  put_bits(b, kKindBit, 2, static_cast<uint8_t>(f.kind) & 3u);
  put_bits(b, kVcBit, 3, f.vc & 7u);
  // The payload starts at bit 6: byte i of it spans bits 6-7 of flit byte i and bits 0-5 of
  // flit byte i + 1 (the same as put_bits byte by byte, without its per-bit work).
  static_assert(kPayloadBit == 6 && kFlitBytes == kFlitPayloadBytes + 1);
  if constexpr (std::endian::native == std::endian::little) {
    // Eight payload bytes a step: the payload as three little-endian words shifted up by 6.
    static_assert(kFlitPayloadBytes == 24);
    uint64_t w[3];
    std::memcpy(w, f.payload.data(), sizeof w);
    const uint64_t out[3] = {b[0] | (w[0] << 6), (w[1] << 6) | (w[0] >> 58),
                             (w[2] << 6) | (w[1] >> 58)};
    std::memcpy(b.data(), out, sizeof out);
    b[24] = static_cast<uint8_t>(w[2] >> 58);
    return b;
  }
  for (unsigned i = 0; i < kFlitPayloadBytes; ++i) {
    b[i] = static_cast<uint8_t>(b[i] | (f.payload[i] << 6));
    b[i + 1] = static_cast<uint8_t>(f.payload[i] >> 2);
  }
  return b;
}

Result<Flit> decode_flit(std::span<const uint8_t> bytes) {
  if (bytes.size() < kFlitBytes) {
    return make_error(
        Code::kMalformed, 1010,
        fmt::format("flit: length = {} bytes, expected {}", bytes.size(), kFlitBytes));
  }
  Flit f;
  f.kind = static_cast<FlitKind>(get_bits(bytes, kKindBit, 2));
  f.vc = static_cast<uint8_t>(get_bits(bytes, kVcBit, 3));
  if (f.vc >= kNumVcs) {
    return make_error(Code::kMalformed, 1011,
                      fmt::format("flit: vc = {} exceeds {}", f.vc, kNumVcs - 1));
  }
  if (get_bits(bytes, kReservedBit, 1) != 0) {
    return make_error(Code::kMalformed, 1012, "flit: reserved bit 5 = 1, expected 0");
  }
  uint64_t pad = get_bits(bytes, kFlitBits, kFlitBytes * 8 - kFlitBits);
  if (pad != 0) {
    return make_error(Code::kMalformed, 1013,
                      fmt::format("flit: padding bits 198-199 = {:#x}, expected 0", pad));
  }
  if constexpr (std::endian::native == std::endian::little) {
    uint64_t w[3];
    std::memcpy(w, bytes.data(), sizeof w);
    const uint64_t top = bytes[24];
    const uint64_t out[3] = {(w[0] >> 6) | (w[1] << 58), (w[1] >> 6) | (w[2] << 58),
                             (w[2] >> 6) | (top << 58)};
    std::memcpy(f.payload.data(), out, sizeof out);
    return f;
  }
  for (unsigned i = 0; i < kFlitPayloadBytes; ++i)
    f.payload[i] = static_cast<uint8_t>((bytes[i] >> 6) | (bytes[i + 1] << 2));
  return f;
}

std::string_view flit_kind_name(FlitKind k) {
  switch (k) {
    case FlitKind::kBody:
      return "body";
    case FlitKind::kHead:
      return "head";
    case FlitKind::kTail:
      return "tail";
    case FlitKind::kHeadTail:
      return "head+tail";
  }
  return "?";
}

void encode_flits(std::span<const Flit> flits, uint8_t* out) {
  for (size_t i = 0; i < flits.size(); ++i) {
    const FlitBytes b = encode_flit(flits[i]);
    std::memcpy(out + i * kFlitBytes, b.data(), kFlitBytes);
  }
}

}  // namespace galaxy::wire
