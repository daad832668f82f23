// The 512-bit management descriptor submitted to an SDQ, and its 1024-bit wide variant
// (docs/system.md 2.2; docs/protocol.md).
#include <fmt/format.h>

#include <algorithm>

#include "base/bits.h"
#include "wire/mgmt.h"
#include "wire/nmp_data.h"

namespace galaxy::wire {
namespace {

constexpr std::string_view kFormat = "mgmt descriptor";

constexpr size_t kHeadBit = 0;
constexpr size_t kFenBit = 1;
constexpr size_t kErrBit = 2;
constexpr size_t kRtTypeBit = 3;
constexpr size_t kTypeBit = 4;  // 2 bits
constexpr size_t kSmBit = 6;
constexpr size_t kInstBit = 7;  // 3 bits
constexpr size_t kLintBit = 10;
constexpr size_t kRintBit = 11;
constexpr size_t kDestTypeBit = 12;
constexpr size_t kNmpTypeBit = 13;        // 6 bits
constexpr size_t kDestVpBit = 19;         // 6 bits
constexpr size_t kSrcVpBit = 25;          // 6 bits
constexpr size_t kWideBit = 31;           // 1: 128 bytes, the routes' high bits follow
constexpr size_t kDestIdBit = 32;         // 16 bits
constexpr size_t kTransactionIdBit = 48;  // 16 bits
constexpr size_t kMKeyBit = 64;           // 64 bits
constexpr size_t kForwardRouteBit = 128;
constexpr size_t kBackwardRouteBit = 233;
constexpr size_t kNmpDataBit = 338;
constexpr size_t kDestIdHighBit = 506;  // bit 16 of dest_id
constexpr size_t kReserved1Bit = 507;   // 5 bits
// The wide variant's second 64 bytes.
constexpr size_t kForwardRouteExtBit = 512;                         // 60 bits
constexpr size_t kBackwardRouteExtBit = 512 + kSourceRouteExtBits;  // 60 bits
constexpr size_t kReserved2Bit = 512 + 2 * kSourceRouteExtBits;     // to the end
constexpr size_t kReserved2Bits = 8 * kMgmtWideDescriptorBytes - kReserved2Bit;

constexpr uint8_t kMaxVp = 63;

Error prefixed(std::string_view field, const Error& e) {
  return make_error(e.code, e.id, fmt::format("{}: {}: {}", kFormat, field, e.message));
}

}  // namespace

Result<MgmtDescriptorBytes> encode_mgmt_descriptor(const MgmtDescriptor& d) {
  struct Limit {
    const char* name;
    unsigned value;
    unsigned max;
  };
  const Limit limits[] = {{"dest_id", d.dest_id, kChipIdMask},
                          {"dest_vp", d.dest_vp, kMaxVp},
                          {"src_vp", d.src_vp, kMaxVp},
                          {"dest_type", static_cast<unsigned>(d.dest_type), 1},
                          {"rt_type", d.rt_type, 1},
                          {"type", d.type, 3},
                          {"sm", d.sm, 1},
                          {"inst", d.inst, 7}};
  for (const Limit& l : limits) {
    if (l.value > l.max) {
      return make_error(Code::kOutOfRange, 1200,
                        fmt::format("mgmt descriptor: {} = {} exceeds {}", l.name, l.value, l.max));
    }
  }
  if (!d.head) {
    return make_error(Code::kInvalidArgument, 1201, "mgmt descriptor: head = 0, expected 1");
  }
  if (!is_valid_nmp_type(static_cast<uint8_t>(d.nmp_type))) {
    return make_error(Code::kInvalidArgument, 1202,
                      fmt::format("mgmt descriptor: nmp_type = {:#x} is not an NMP type",
                                  static_cast<unsigned>(d.nmp_type)));
  }
  const bool wide = d.forward_route.needs_ext() || d.backward_route.needs_ext();
  MgmtDescriptorBytes b(wide ? kMgmtWideDescriptorBytes : kMgmtDescriptorBytes);
  put_bits(b, kHeadBit, 1, d.head);
  put_bits(b, kFenBit, 1, d.fen);
  put_bits(b, kErrBit, 1, d.err);
  put_bits(b, kRtTypeBit, 1, d.rt_type);
  put_bits(b, kTypeBit, 2, d.type);
  put_bits(b, kSmBit, 1, d.sm);
  put_bits(b, kInstBit, 3, d.inst);
  put_bits(b, kLintBit, 1, d.lint);
  put_bits(b, kRintBit, 1, d.rint);
  put_bits(b, kDestTypeBit, 1, static_cast<uint8_t>(d.dest_type));
  put_bits(b, kNmpTypeBit, 6, static_cast<uint8_t>(d.nmp_type));
  put_bits(b, kDestVpBit, 6, d.dest_vp);
  put_bits(b, kSrcVpBit, 6, d.src_vp);
  put_bits(b, kDestIdBit, 16, chip_id_low(d.dest_id));
  put_bits(b, kDestIdHighBit, 1, chip_id_high(d.dest_id));
  put_bits(b, kTransactionIdBit, 16, d.transaction_id);
  put_bits(b, kMKeyBit, 64, d.m_key);
  if (Status s = encode_source_route(d.forward_route, b, kForwardRouteBit, wide); !s.ok()) {
    return prefixed("forward_route", s.error());
  }
  if (Status s = encode_source_route(d.backward_route, b, kBackwardRouteBit, wide); !s.ok()) {
    return prefixed("backward_route", s.error());
  }
  if (wide) {
    put_bits(b, kWideBit, 1, 1);
    encode_source_route_ext(d.forward_route, b, kForwardRouteExtBit);
    encode_source_route_ext(d.backward_route, b, kBackwardRouteExtBit);
  }
  GALAXY_TRY(encode_nmp_data(kFormat, d.nmp_type, d.data, b, kNmpDataBit));
  return b;
}

Result<MgmtDescriptor> decode_mgmt_descriptor(std::span<const uint8_t> b) {
  if (b.size() != kMgmtDescriptorBytes && b.size() != kMgmtWideDescriptorBytes) {
    return make_error(Code::kMalformed, 1210,
                      fmt::format("mgmt descriptor: length = {} bytes, expected {} or {} (wide)",
                                  b.size(), kMgmtDescriptorBytes, kMgmtWideDescriptorBytes));
  }
  const bool wide = get_bits(b, kWideBit, 1) != 0;
  if (wide != (b.size() == kMgmtWideDescriptorBytes)) {
    return make_error(
        Code::kMalformed, 1213,
        fmt::format("mgmt descriptor: wide = {} but length = {} bytes (expected {})", wide ? 1 : 0,
                    b.size(), wide ? kMgmtWideDescriptorBytes : kMgmtDescriptorBytes));
  }
  if (get_bits(b, kHeadBit, 1) != 1) {
    return make_error(Code::kMalformed, 1211, "mgmt descriptor: head = 0, expected 1");
  }
  auto type = static_cast<uint8_t>(get_bits(b, kNmpTypeBit, 6));
  if (!is_valid_nmp_type(type)) {
    return make_error(Code::kMalformed, 1212,
                      fmt::format("mgmt descriptor: nmp_type = {:#x} is not an NMP type", type));
  }
  GALAXY_TRY(check_zero_bits(kFormat, b, kReserved1Bit, 5));
  if (wide) GALAXY_TRY(check_zero_bits(kFormat, b, kReserved2Bit, kReserved2Bits));
  MgmtDescriptor d;
  d.head = true;
  d.nmp_type = static_cast<NmpType>(type);
  d.fen = get_bits(b, kFenBit, 1) != 0;
  d.err = get_bits(b, kErrBit, 1) != 0;
  d.rt_type = static_cast<uint8_t>(get_bits(b, kRtTypeBit, 1));
  d.type = static_cast<uint8_t>(get_bits(b, kTypeBit, 2));
  d.sm = static_cast<uint8_t>(get_bits(b, kSmBit, 1));
  d.inst = static_cast<uint8_t>(get_bits(b, kInstBit, 3));
  d.lint = get_bits(b, kLintBit, 1) != 0;
  d.rint = get_bits(b, kRintBit, 1) != 0;
  d.dest_type = static_cast<ChipType>(get_bits(b, kDestTypeBit, 1));
  d.dest_vp = static_cast<uint8_t>(get_bits(b, kDestVpBit, 6));
  d.src_vp = static_cast<uint8_t>(get_bits(b, kSrcVpBit, 6));
  d.dest_id = chip_id_of(get_bits(b, kDestIdBit, 16), get_bits(b, kDestIdHighBit, 1));
  d.transaction_id = static_cast<uint16_t>(get_bits(b, kTransactionIdBit, 16));
  d.m_key = get_bits(b, kMKeyBit, 64);
  auto forward = decode_source_route(b, kForwardRouteBit);
  if (!forward.ok()) return prefixed("forward_route", forward.error());
  d.forward_route = *forward;
  auto backward = decode_source_route(b, kBackwardRouteBit);
  if (!backward.ok()) return prefixed("backward_route", backward.error());
  d.backward_route = *backward;
  if (!wide && (d.forward_route.is_long() || d.backward_route.is_long()))
    return make_error(Code::kMalformed, 1215,
                      fmt::format("mgmt descriptor: a route of {} hops without the extension "
                                  "(wide = 0, 64 bytes)",
                                  std::max(d.forward_route.hop_num, d.backward_route.hop_num)));
  if (wide) {
    if (Status s = decode_source_route_ext(d.forward_route, b, kForwardRouteExtBit); !s.ok())
      return prefixed("forward_route", s.error());
    if (Status s = decode_source_route_ext(d.backward_route, b, kBackwardRouteExtBit); !s.ok())
      return prefixed("backward_route", s.error());
    if (!d.forward_route.needs_ext() && !d.backward_route.needs_ext()) {
      return make_error(Code::kMalformed, 1214,
                        "mgmt descriptor: wide = 1 but no route names a port above 31 or has "
                        "more than 20 hops");
    }
  }
  auto data = decode_nmp_data(kFormat, d.nmp_type, b, kNmpDataBit);
  if (!data.ok()) return data.error();
  d.data = *data;
  return d;
}

}  // namespace galaxy::wire
