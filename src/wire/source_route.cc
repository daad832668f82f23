#include "wire/source_route.h"

#include <fmt/format.h>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

constexpr unsigned kFieldBits = 5;
constexpr uint8_t kMaxPort = kMaxNarrowRoutePort;
constexpr unsigned kMaxWidePort = kMaxSwitchPorts - 1;

size_t hop_bit(size_t bit_offset, unsigned i) {
  return bit_offset + kFieldBits * (i + 1);
}

}  // namespace

Status SourceRoute::push(uint8_t port) {
  if (hop_num >= kMaxRouteHops) {
    return make_error(Code::kResourceExhausted, 1050,
                      fmt::format("source route: hop_num = {} already at the maximum {}", hop_num,
                                  kMaxRouteHops));
  }
  if (port > kMaxWidePort) {
    return make_error(Code::kOutOfRange, 1051,
                      fmt::format("source route: port = {} exceeds {}", port, kMaxWidePort));
  }
  hops[hop_num++] = port;
  return {};
}

bool SourceRoute::needs_wide() const {
  for (uint8_t h : hops)
    if (h > kMaxPort) return true;
  return false;
}

std::string SourceRoute::to_string() const {
  std::string s = "[";
  for (unsigned i = 0; i < hop_num && i < kMaxRouteHops; ++i) {
    if (i > 0) s += ',';
    s += std::to_string(hops[i]);
  }
  return s + "]";
}

Status encode_source_route(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset,
                           bool ext) {
  if (bit_offset > buf.size() * 8 || buf.size() * 8 - bit_offset < kSourceRouteBits) {
    return make_error(Code::kInvalidArgument, 1052,
                      fmt::format("source route: buffer of {} bytes too small for 105 bits at "
                                  "bit {}",
                                  buf.size(), bit_offset));
  }
  const uint8_t max_hops = ext ? kMaxRouteHops : kFieldRouteHops;
  if (r.hop_num > max_hops) {
    return make_error(Code::kOutOfRange, 1053,
                      fmt::format("source route: hop_num = {} exceeds {}{}", r.hop_num, max_hops,
                                  ext ? "" : " (the long variant carries up to 31)"));
  }
  const unsigned max_port = ext && !r.is_long() ? kMaxWidePort : kMaxPort;
  for (unsigned i = 0; i < kMaxRouteHops; ++i) {
    if (r.hops[i] > max_port) {
      return make_error(Code::kOutOfRange, 1054,
                        fmt::format("source route: hop{} = {} exceeds {}{}", i, r.hops[i], max_port,
                                    !ext          ? " (the wide variant names up to 127)"
                                    : r.is_long() ? " (a route of more than 20 hops names ports "
                                                    "up to 31 only)"
                                                  : ""));
    }
    if (i >= r.hop_num && r.hops[i] != 0) {
      return make_error(Code::kInvalidArgument, 1055,
                        fmt::format("source route: unused hop{} = {}, expected 0 (hop_num = {})", i,
                                    r.hops[i], r.hop_num));
    }
  }
  put_bits(buf, bit_offset, kFieldBits, r.hop_num);
  for (unsigned i = 0; i < kFieldRouteHops; ++i)
    put_bits(buf, hop_bit(bit_offset, i), kFieldBits, r.hops[i] & kMaxPort);
  return {};
}

void encode_source_route_ext(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset) {
  if (r.is_long()) {
    for (unsigned i = 0; i < kSourceRouteExtBits / kLongHopBits; ++i)
      put_bits(buf, bit_offset + kLongHopBits * i, kLongHopBits,
               kFieldRouteHops + i < kMaxRouteHops ? r.hops[kFieldRouteHops + i] : 0);
    return;
  }
  for (unsigned i = 0; i < kFieldRouteHops; ++i)
    put_bits(buf, bit_offset + kRouteHighBits * i, kRouteHighBits, r.hops[i] >> kFieldBits);
}

Status decode_source_route_ext(SourceRoute& r, std::span<const uint8_t> buf, size_t bit_offset) {
  if (r.is_long()) {
    for (unsigned i = 0; i < kSourceRouteExtBits / kLongHopBits; ++i) {
      const unsigned hop = kFieldRouteHops + i;
      const auto port =
          static_cast<uint8_t>(get_bits(buf, bit_offset + kLongHopBits * i, kLongHopBits));
      if (hop >= r.hop_num && port != 0)
        return make_error(Code::kMalformed, 1061,
                          fmt::format("source route: unused hop{} = {} in the extension, expected "
                                      "0 (hop_num = {})",
                                      hop, port, r.hop_num));
      if (hop < kMaxRouteHops) r.hops[hop] = port;
    }
    return {};
  }
  for (unsigned i = 0; i < kFieldRouteHops; ++i) {
    auto high =
        static_cast<uint8_t>(get_bits(buf, bit_offset + kRouteHighBits * i, kRouteHighBits));
    if (high != 0 && i >= r.hop_num) {
      return make_error(Code::kMalformed, 1059,
                        fmt::format("source route: unused hop{} has high bits {}, expected 0 "
                                    "(hop_num = {})",
                                    i, high, r.hop_num));
    }
    r.hops[i] = static_cast<uint8_t>(r.hops[i] | (high << kFieldBits));
    if (r.hops[i] > kMaxWidePort) {
      return make_error(
          Code::kMalformed, 1060,
          fmt::format("source route: hop{} = {} exceeds {}", i, r.hops[i], kMaxWidePort));
    }
  }
  return {};
}

Result<SourceRoute> decode_source_route(std::span<const uint8_t> buf, size_t bit_offset) {
  if (bit_offset > buf.size() * 8 || buf.size() * 8 - bit_offset < kSourceRouteBits) {
    return make_error(Code::kMalformed, 1056,
                      fmt::format("source route: length = {} bytes too short for 105 bits at "
                                  "bit {}",
                                  buf.size(), bit_offset));
  }
  SourceRoute r;
  r.hop_num = static_cast<uint8_t>(get_bits(buf, bit_offset, kFieldBits));
  static_assert(kMaxRouteHops == (1u << kFieldBits) - 1, "HopNum's 5 bits name every length");
  for (unsigned i = 0; i < kFieldRouteHops; ++i) {
    r.hops[i] = static_cast<uint8_t>(get_bits(buf, hop_bit(bit_offset, i), kFieldBits));
    if (i >= r.hop_num && r.hops[i] != 0) {
      return make_error(Code::kMalformed, 1058,
                        fmt::format("source route: unused hop{} = {}, expected 0 (hop_num = {})", i,
                                    r.hops[i], r.hop_num));
    }
  }
  return r;
}

uint8_t source_route_hop(std::span<const uint8_t> buf, size_t field_bit, size_t ext_bit,
                         uint8_t hop_num, uint8_t i) {
  if (i >= kFieldRouteHops)
    return ext_bit == SIZE_MAX
               ? 0
               : static_cast<uint8_t>(
                     get_bits(buf, ext_bit + kLongHopBits * (i - kFieldRouteHops), kLongHopBits));
  auto port = static_cast<uint8_t>(get_bits(buf, hop_bit(field_bit, i), kFieldBits));
  if (ext_bit != SIZE_MAX && hop_num <= kFieldRouteHops)  // wide: the high bits
    port = static_cast<uint8_t>(port |
                                (get_bits(buf, ext_bit + kRouteHighBits * i, kRouteHighBits) << 5));
  return port;
}

}  // namespace galaxy::wire
