#include "wire/source_route.h"

#include <fmt/format.h>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

constexpr unsigned kFieldBits = 5;
constexpr uint8_t kMaxPort = 31;

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
  if (port > kMaxPort) {
    return make_error(Code::kOutOfRange, 1051,
                      fmt::format("source route: port = {} exceeds {}", port, kMaxPort));
  }
  hops[hop_num++] = port;
  return {};
}

std::string SourceRoute::to_string() const {
  std::string s = "[";
  for (unsigned i = 0; i < hop_num && i < kMaxRouteHops; ++i) {
    if (i > 0) s += ',';
    s += std::to_string(hops[i]);
  }
  return s + "]";
}

Status encode_source_route(const SourceRoute& r, std::span<uint8_t> buf, size_t bit_offset) {
  if (bit_offset > buf.size() * 8 || buf.size() * 8 - bit_offset < kSourceRouteBits) {
    return make_error(Code::kInvalidArgument, 1052,
                      fmt::format("source route: buffer of {} bytes too small for 105 bits at "
                                  "bit {}",
                                  buf.size(), bit_offset));
  }
  if (r.hop_num > kMaxRouteHops) {
    return make_error(
        Code::kOutOfRange, 1053,
        fmt::format("source route: hop_num = {} exceeds {}", r.hop_num, kMaxRouteHops));
  }
  for (unsigned i = 0; i < kMaxRouteHops; ++i) {
    if (r.hops[i] > kMaxPort) {
      return make_error(Code::kOutOfRange, 1054,
                        fmt::format("source route: hop{} = {} exceeds {}", i, r.hops[i], kMaxPort));
    }
    if (i >= r.hop_num && r.hops[i] != 0) {
      return make_error(Code::kInvalidArgument, 1055,
                        fmt::format("source route: unused hop{} = {}, expected 0 (hop_num = {})", i,
                                    r.hops[i], r.hop_num));
    }
  }
  put_bits(buf, bit_offset, kFieldBits, r.hop_num);
  for (unsigned i = 0; i < kMaxRouteHops; ++i) put_bits(buf, hop_bit(bit_offset, i), 5, r.hops[i]);
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
  if (r.hop_num > kMaxRouteHops) {
    return make_error(
        Code::kMalformed, 1057,
        fmt::format("source route: hop_num = {} exceeds {}", r.hop_num, kMaxRouteHops));
  }
  for (unsigned i = 0; i < kMaxRouteHops; ++i) {
    r.hops[i] = static_cast<uint8_t>(get_bits(buf, hop_bit(bit_offset, i), kFieldBits));
    if (i >= r.hop_num && r.hops[i] != 0) {
      return make_error(Code::kMalformed, 1058,
                        fmt::format("source route: unused hop{} = {}, expected 0 (hop_num = {})", i,
                                    r.hops[i], r.hop_num));
    }
  }
  return r;
}

}  // namespace galaxy::wire
