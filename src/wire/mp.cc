#include "wire/mp.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

constexpr size_t kKindBit = 0;        // 4 bits
constexpr size_t kFlagsBit = 4;       // 4 bits
constexpr size_t kTargetVpBit = 8;    // 6 bits
constexpr size_t kSrcVpBit = 14;      // 6 bits
constexpr size_t kReserved0Bit = 20;  // 4 bits
constexpr size_t kSrcNodeBit = 24;    // 16 bits
constexpr size_t kLengthBit = 40;     // 7 bits
constexpr size_t kReserved1Bit = 47;  // 1 bit
constexpr size_t kTagBit = 48;        // 16 bits
constexpr uint8_t kMaxVp = 63;

}  // namespace

Result<MpBytes> encode_mp(const Mp& m) {
  struct Limit {
    const char* name;
    unsigned value;
    unsigned max;
  };
  const Limit limits[] = {{"kind", static_cast<unsigned>(m.kind), kMaxMpKind},
                          {"flags", m.flags, 15},
                          {"target_vp", m.target_vp, kMaxVp},
                          {"src_vp", m.src_vp, kMaxVp},
                          {"length", m.length, kMpPayloadBytes}};
  for (const Limit& l : limits) {
    if (l.value > l.max) {
      return make_error(Code::kOutOfRange, 1300,
                        fmt::format("mp: {} = {} exceeds {}", l.name, l.value, l.max));
    }
  }
  MpBytes b{};
  put_bits(b, kKindBit, 4, static_cast<uint8_t>(m.kind));
  put_bits(b, kFlagsBit, 4, m.flags);
  put_bits(b, kTargetVpBit, 6, m.target_vp);
  put_bits(b, kSrcVpBit, 6, m.src_vp);
  put_bits(b, kSrcNodeBit, 16, m.src_node);
  put_bits(b, kLengthBit, 7, m.length);
  put_bits(b, kTagBit, 16, m.tag);
  std::copy(m.payload.begin(), m.payload.end(), b.begin() + kMpHeaderBytes);
  return b;
}

Result<Mp> decode_mp(std::span<const uint8_t> b) {
  if (b.size() != kMpBytes) {
    return make_error(Code::kMalformed, 1310,
                      fmt::format("mp: length = {} bytes, expected {}", b.size(), kMpBytes));
  }
  Mp m;
  auto kind = static_cast<uint8_t>(get_bits(b, kKindBit, 4));
  if (kind > kMaxMpKind) {
    return make_error(Code::kMalformed, 1311,
                      fmt::format("mp: kind = {} exceeds {}", kind, kMaxMpKind));
  }
  m.kind = static_cast<MpKind>(kind);
  if (uint64_t r = get_bits(b, kReserved0Bit, 4) | get_bits(b, kReserved1Bit, 1); r != 0) {
    return make_error(Code::kMalformed, 1312, "mp: reserved header bits 20-23/47 set, expected 0");
  }
  m.length = static_cast<uint8_t>(get_bits(b, kLengthBit, 7));
  if (m.length > kMpPayloadBytes) {
    return make_error(Code::kMalformed, 1313,
                      fmt::format("mp: length = {} exceeds {}", m.length, kMpPayloadBytes));
  }
  m.flags = static_cast<uint8_t>(get_bits(b, kFlagsBit, 4));
  m.target_vp = static_cast<uint8_t>(get_bits(b, kTargetVpBit, 6));
  m.src_vp = static_cast<uint8_t>(get_bits(b, kSrcVpBit, 6));
  m.src_node = static_cast<uint16_t>(get_bits(b, kSrcNodeBit, 16));
  m.tag = static_cast<uint16_t>(get_bits(b, kTagBit, 16));
  std::copy(b.begin() + kMpHeaderBytes, b.end(), m.payload.begin());
  return m;
}

}  // namespace galaxy::wire
