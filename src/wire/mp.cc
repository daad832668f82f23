#include "wire/mp.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

using namespace mp_word;

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
                          {"src_node", m.src_node, kChipIdMask},
                          {"length", m.length, kMpPayloadBytes}};
  for (const Limit& l : limits) {
    if (l.value > l.max) {
      return make_error(Code::kOutOfRange, 1300,
                        fmt::format("mp: {} = {} exceeds {}", l.name, l.value, l.max));
    }
  }
  MpBytes b{};
  const uint64_t w = make(m.kind, m.flags, m.target_vp, m.src_vp, m.src_node, m.length, m.tag);
  put_bits(b, 0, 64, w);
  std::copy(m.payload.begin(), m.payload.end(), b.begin() + kMpHeaderBytes);
  return b;
}

Result<Mp> decode_mp(std::span<const uint8_t> b) {
  if (b.size() != kMpBytes) {
    return make_error(Code::kMalformed, 1310,
                      fmt::format("mp: length = {} bytes, expected {}", b.size(), kMpBytes));
  }
  Mp m;
  const uint64_t w = get_bits(b, 0, 64);
  if (kind(w) > kMaxMpKind) {
    return make_error(Code::kMalformed, 1311,
                      fmt::format("mp: kind = {} exceeds {}", kind(w), kMaxMpKind));
  }
  m.kind = static_cast<MpKind>(kind(w));
  if ((w & kReservedMask) != 0) {
    return make_error(Code::kMalformed, 1312, "mp: reserved header bits 20-23 set, expected 0");
  }
  m.length = length(w);
  if (m.length > kMpPayloadBytes) {
    return make_error(Code::kMalformed, 1313,
                      fmt::format("mp: length = {} exceeds {}", m.length, kMpPayloadBytes));
  }
  m.flags = flags(w);
  m.target_vp = target_vp(w);
  m.src_vp = src_vp(w);
  m.src_node = src_node(w);
  m.tag = tag(w);
  std::copy(b.begin() + kMpHeaderBytes, b.end(), m.payload.begin());
  return m;
}

}  // namespace galaxy::wire
