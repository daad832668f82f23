// The 4-flit management packet and its extended variant (wide or long routes)
// (docs/system.md 2.2, 2.4; layout in docs/protocol.md).
#include <fmt/format.h>

#include <algorithm>

#include "base/bits.h"
#include "wire/crc16.h"
#include "wire/mgmt.h"
#include "wire/nmp_data.h"

namespace galaxy::wire {
namespace {

constexpr std::string_view kFormat = "mgmt packet";

// Bit of the 100-byte packet that holds payload bit `off` of flit `flit`; no field crosses a
// flit boundary, so a field is contiguous in the packet.
constexpr size_t pbit(unsigned flit, size_t off) {
  return flit * kFlitBits + flit * 2 + 6 + off;
}

// Flit 0 (head).
constexpr size_t kLengthBit = pbit(0, 0);    // 5 bits, not covered by the CRC
constexpr size_t kHopCountBit = pbit(0, 5);  // 5 bits, not covered by the CRC
constexpr size_t kDestIdBit = pbit(0, 10);
constexpr size_t kDestTypeBit = pbit(0, 26);
constexpr size_t kSrcIdBit = pbit(0, 27);
constexpr size_t kSrcTypeBit = pbit(0, 43);
constexpr size_t kDestVpBit = pbit(0, 44);
constexpr size_t kSrcVpBit = pbit(0, 50);
constexpr size_t kLintBit = pbit(0, 56);
constexpr size_t kRintBit = pbit(0, 57);
constexpr size_t kNmpTypeBit = pbit(0, 58);
constexpr size_t kTransactionIdBit = pbit(0, 64);
constexpr size_t kForwardRouteBit = pbit(0, 80);
constexpr size_t kWideBit = pbit(0, 185);        // ext: 1 = the routes' extensions (wide or long)
constexpr size_t kDestIdHighBit = pbit(0, 186);  // bit 16 of dest_id
constexpr size_t kSrcIdHighBit = pbit(0, 187);   // bit 16 of src_id
constexpr size_t kReserved0Bit = pbit(0, 188);   // 4 bits
// Flit 1 (body).
constexpr size_t kBackwardRouteBit = pbit(1, 0);
constexpr size_t kReserved1Bit = pbit(1, 105);  // 23 bits
constexpr size_t kMKeyBit = pbit(1, 128);
// Flit 2 (body).
constexpr size_t kNmpDataBit = pbit(2, 0);
constexpr size_t kReserved2Bit = pbit(2, 168);  // 24 bits
// Flit 3 (tail). With ext = 1 it carries the routes' extensions; reserved otherwise.
constexpr size_t kForwardRouteExtBit = pbit(3, 0);                      // 60 bits
constexpr size_t kBackwardRouteExtBit = pbit(3, kSourceRouteExtBits);   // 60 bits
constexpr size_t kReserved3WideBit = pbit(3, 2 * kSourceRouteExtBits);  // 56 bits
constexpr size_t kReserved3Bit = pbit(3, 0);                            // 176 bits
constexpr size_t kCrcBit = pbit(3, 176);

constexpr uint8_t kMaxVp = 63;
constexpr FlitKind kFlitKinds[kMgmtPacketFlits] = {FlitKind::kHead, FlitKind::kBody,
                                                   FlitKind::kBody, FlitKind::kTail};

// CRC over every payload bit but the head's length and hop count and the CRC itself.
uint16_t packet_crc(std::span<const uint8_t> b) {
  uint16_t crc = crc16_bits(b, pbit(0, 10), kFlitPayloadBits - 10);
  crc = crc16_bits(b, pbit(1, 0), kFlitPayloadBits, crc);
  crc = crc16_bits(b, pbit(2, 0), kFlitPayloadBits, crc);
  return crc16_bits(b, pbit(3, 0), kFlitPayloadBits - 16, crc);
}

Error prefixed(std::string_view field, const Error& e) {
  return make_error(e.code, e.id, fmt::format("{}: {}: {}", kFormat, field, e.message));
}

// Size, flit framing (kinds, VC, reserved and padding bits) and the length field: what both
// decode and peek check.
Status check_frame(std::span<const uint8_t> b) {
  if (b.size() != kMgmtPacketBytes) {
    return make_error(
        Code::kMalformed, 1110,
        fmt::format("mgmt packet: length = {} bytes, expected {}", b.size(), kMgmtPacketBytes));
  }
  for (unsigned k = 0; k < kMgmtPacketFlits; ++k) {
    size_t base = k * 8 * kFlitBytes;
    auto kind = static_cast<FlitKind>(get_bits(b, base, 2));
    if (kind != kFlitKinds[k]) {
      return make_error(Code::kMalformed, 1111,
                        fmt::format("mgmt packet: flit {} kind = {}, expected {}", k,
                                    flit_kind_name(kind), flit_kind_name(kFlitKinds[k])));
    }
    uint64_t vc = get_bits(b, base + 2, 3);
    if (vc != kMgmtVc) {
      return make_error(Code::kMalformed, 1112,
                        fmt::format("mgmt packet: flit {} vc = {}, expected {}", k, vc, kMgmtVc));
    }
    if (get_bits(b, base + 5, 1) != 0 || get_bits(b, base + kFlitBits, 2) != 0) {
      return make_error(Code::kMalformed, 1113,
                        fmt::format("mgmt packet: flit {} reserved bits 5/198/199 set", k));
    }
  }
  uint64_t length = get_bits(b, kLengthBit, 5);
  if (length != kMgmtPacketFlits) {
    return make_error(
        Code::kMalformed, 1114,
        fmt::format("mgmt packet: length_flits = {}, expected {}", length, kMgmtPacketFlits));
  }
  return {};
}

// hop_count, NMPType and the active route's hop_num, validated.
struct Routing {
  uint8_t hop_count;
  NmpType nmp_type;
  uint8_t hop_num;
  size_t route_bit;
  size_t route_ext_bit;  // where the active route's extension is (wide or long)
  bool wide;             // the packet carries the routes' extensions
};

Result<Routing> read_routing(std::span<const uint8_t> b) {
  Routing r{};
  r.hop_count = static_cast<uint8_t>(get_bits(b, kHopCountBit, 5));
  auto type = static_cast<uint8_t>(get_bits(b, kNmpTypeBit, 6));
  if (!is_valid_nmp_type(type)) {
    return make_error(Code::kMalformed, 1115,
                      fmt::format("mgmt packet: nmp_type = {:#x} is not an NMP type", type));
  }
  r.nmp_type = static_cast<NmpType>(type);
  r.route_bit = is_request(r.nmp_type) ? kForwardRouteBit : kBackwardRouteBit;
  r.route_ext_bit = is_request(r.nmp_type) ? kForwardRouteExtBit : kBackwardRouteExtBit;
  r.wide = get_bits(b, kWideBit, 1) != 0;
  r.hop_num = static_cast<uint8_t>(get_bits(b, r.route_bit, 5));
  if (r.hop_num > kFieldRouteHops && !r.wide) {
    return make_error(
        Code::kMalformed, 1116,
        fmt::format("mgmt packet: {} route hop_num = {} exceeds {} without the extension (ext = 0)",
                    is_request(r.nmp_type) ? "forward" : "backward", r.hop_num, kFieldRouteHops));
  }
  if (r.hop_count > r.hop_num) {
    return make_error(Code::kMalformed, 1117,
                      fmt::format("mgmt packet: hop_count = {} exceeds the active route's "
                                  "hop_num = {}",
                                  r.hop_count, r.hop_num));
  }
  return r;
}

}  // namespace

Result<MgmtPacketBytes> encode_mgmt_packet(const MgmtPacket& p) {
  if (p.vc != kMgmtVc) {
    return make_error(Code::kInvalidArgument, 1100,
                      fmt::format("mgmt packet: vc = {}, expected {}", p.vc, kMgmtVc));
  }
  if (p.length_flits != kMgmtPacketFlits) {
    return make_error(Code::kInvalidArgument, 1101,
                      fmt::format("mgmt packet: length_flits = {}, expected {}", p.length_flits,
                                  kMgmtPacketFlits));
  }
  if (!is_valid_nmp_type(static_cast<uint8_t>(p.nmp_type))) {
    return make_error(Code::kInvalidArgument, 1102,
                      fmt::format("mgmt packet: nmp_type = {:#x} is not an NMP type",
                                  static_cast<unsigned>(p.nmp_type)));
  }
  if (p.hop_count > p.active_route().hop_num) {
    return make_error(Code::kOutOfRange, 1103,
                      fmt::format("mgmt packet: hop_count = {} exceeds the active route's "
                                  "hop_num = {}",
                                  p.hop_count, p.active_route().hop_num));
  }
  if (p.dest_vp > kMaxVp || p.src_vp > kMaxVp) {
    bool dest = p.dest_vp > kMaxVp;
    return make_error(Code::kOutOfRange, 1104,
                      fmt::format("mgmt packet: {} = {} exceeds {}", dest ? "dest_vp" : "src_vp",
                                  dest ? p.dest_vp : p.src_vp, kMaxVp));
  }
  if (static_cast<uint8_t>(p.dest_type) > 1 || static_cast<uint8_t>(p.src_type) > 1) {
    return make_error(
        Code::kInvalidArgument, 1105,
        fmt::format("mgmt packet: dest_type/src_type = {}/{}, expected 0 or 1",
                    static_cast<unsigned>(p.dest_type), static_cast<unsigned>(p.src_type)));
  }
  if (auto why = chip_id_refusal(kFormat, {{"dest_id", p.dest_id}, {"src_id", p.src_id}}))
    return make_error(Code::kOutOfRange, 1106, *why);
  const bool wide = p.forward_route.needs_ext() || p.backward_route.needs_ext();
  MgmtPacketBytes b{};
  for (unsigned k = 0; k < kMgmtPacketFlits; ++k) {
    put_bits(b, k * 8 * kFlitBytes, 2, static_cast<uint8_t>(kFlitKinds[k]));
    put_bits(b, k * 8 * kFlitBytes + 2, 3, kMgmtVc);
  }
  put_bits(b, kLengthBit, 5, p.length_flits);
  put_bits(b, kHopCountBit, 5, p.hop_count);
  put_bits(b, kDestIdBit, 16, chip_id_low(p.dest_id));
  put_bits(b, kDestIdHighBit, 1, chip_id_high(p.dest_id));
  put_bits(b, kDestTypeBit, 1, static_cast<uint8_t>(p.dest_type));
  put_bits(b, kSrcIdBit, 16, chip_id_low(p.src_id));
  put_bits(b, kSrcIdHighBit, 1, chip_id_high(p.src_id));
  put_bits(b, kSrcTypeBit, 1, static_cast<uint8_t>(p.src_type));
  put_bits(b, kDestVpBit, 6, p.dest_vp);
  put_bits(b, kSrcVpBit, 6, p.src_vp);
  put_bits(b, kLintBit, 1, p.lint);
  put_bits(b, kRintBit, 1, p.rint);
  put_bits(b, kNmpTypeBit, 6, static_cast<uint8_t>(p.nmp_type));
  put_bits(b, kTransactionIdBit, 16, p.transaction_id);
  if (Status s = encode_source_route(p.forward_route, b, kForwardRouteBit, wide); !s.ok()) {
    return prefixed("forward_route", s.error());
  }
  if (Status s = encode_source_route(p.backward_route, b, kBackwardRouteBit, wide); !s.ok()) {
    return prefixed("backward_route", s.error());
  }
  if (wide) {
    put_bits(b, kWideBit, 1, 1);
    encode_source_route_ext(p.forward_route, b, kForwardRouteExtBit);
    encode_source_route_ext(p.backward_route, b, kBackwardRouteExtBit);
  }
  put_bits(b, kMKeyBit, 64, p.m_key);
  GALAXY_TRY(encode_nmp_data(kFormat, p.nmp_type, p.data, b, kNmpDataBit));
  put_bits(b, kCrcBit, 16, packet_crc(b));
  return b;
}

Result<MgmtPacket> decode_mgmt_packet(std::span<const uint8_t> b) {
  GALAXY_TRY(check_frame(b));
  uint16_t crc = static_cast<uint16_t>(get_bits(b, kCrcBit, 16));
  if (uint16_t computed = packet_crc(b); crc != computed) {
    return make_error(Code::kCrcMismatch, 1118,
                      fmt::format("mgmt packet: crc = {:#06x}, computed {:#06x}", crc, computed));
  }
  auto routing = read_routing(b);
  if (!routing.ok()) return routing.error();
  GALAXY_TRY(check_zero_bits(kFormat, b, kReserved0Bit, 4));
  GALAXY_TRY(check_zero_bits(kFormat, b, kReserved1Bit, 23));
  GALAXY_TRY(check_zero_bits(kFormat, b, kReserved2Bit, 24));
  if (routing->wide) {
    GALAXY_TRY(check_zero_bits(kFormat, b, kReserved3WideBit, 176 - 2 * kSourceRouteExtBits));
  } else {
    GALAXY_TRY(check_zero_bits(kFormat, b, kReserved3Bit, 176));
  }
  MgmtPacket p;
  p.length_flits = kMgmtPacketFlits;
  p.hop_count = routing->hop_count;
  p.nmp_type = routing->nmp_type;
  p.dest_id = chip_id_of(get_bits(b, kDestIdBit, 16), get_bits(b, kDestIdHighBit, 1));
  p.dest_type = static_cast<ChipType>(get_bits(b, kDestTypeBit, 1));
  p.src_id = chip_id_of(get_bits(b, kSrcIdBit, 16), get_bits(b, kSrcIdHighBit, 1));
  p.src_type = static_cast<ChipType>(get_bits(b, kSrcTypeBit, 1));
  p.dest_vp = static_cast<uint8_t>(get_bits(b, kDestVpBit, 6));
  p.src_vp = static_cast<uint8_t>(get_bits(b, kSrcVpBit, 6));
  p.lint = get_bits(b, kLintBit, 1) != 0;
  p.rint = get_bits(b, kRintBit, 1) != 0;
  p.transaction_id = static_cast<uint16_t>(get_bits(b, kTransactionIdBit, 16));
  auto forward = decode_source_route(b, kForwardRouteBit);
  if (!forward.ok()) return prefixed("forward_route", forward.error());
  p.forward_route = *forward;
  auto backward = decode_source_route(b, kBackwardRouteBit);
  if (!backward.ok()) return prefixed("backward_route", backward.error());
  p.backward_route = *backward;
  if (!routing->wide && (p.forward_route.is_long() || p.backward_route.is_long()))
    return make_error(Code::kMalformed, 1120,
                      fmt::format("mgmt packet: a route of {} hops without the extension (ext = 0)",
                                  std::max(p.forward_route.hop_num, p.backward_route.hop_num)));
  if (routing->wide) {
    if (Status s = decode_source_route_ext(p.forward_route, b, kForwardRouteExtBit); !s.ok())
      return prefixed("forward_route", s.error());
    if (Status s = decode_source_route_ext(p.backward_route, b, kBackwardRouteExtBit); !s.ok())
      return prefixed("backward_route", s.error());
    // One encoding per packet: the extension only where a route needs it.
    if (!p.forward_route.needs_ext() && !p.backward_route.needs_ext()) {
      return make_error(Code::kMalformed, 1119,
                        "mgmt packet: ext = 1 but no route names a port above 31 or has more "
                        "than 20 hops");
    }
  }
  p.m_key = get_bits(b, kMKeyBit, 64);
  auto data = decode_nmp_data(kFormat, p.nmp_type, b, kNmpDataBit);
  if (!data.ok()) return data.error();
  p.data = *data;
  return p;
}

Result<MgmtHead> peek_mgmt_head(std::span<const uint8_t> b) {
  GALAXY_TRY(check_frame(b));
  auto routing = read_routing(b);
  if (!routing.ok()) return routing.error();
  MgmtHead h;
  h.hop_count = routing->hop_count;
  h.nmp_type = routing->nmp_type;
  h.route_hop_num = routing->hop_num;
  if (h.hop_count < h.route_hop_num)
    h.next_port =
        source_route_hop(b, routing->route_bit, routing->wide ? routing->route_ext_bit : SIZE_MAX,
                         h.route_hop_num, h.hop_count);
  return h;
}

void set_mgmt_hop_count(std::span<uint8_t> bytes, uint8_t hop_count) {
  if (bytes.size() < kMgmtPacketBytes) return;
  put_bits(bytes, kHopCountBit, 5, hop_count & 0x1F);
}

}  // namespace galaxy::wire
