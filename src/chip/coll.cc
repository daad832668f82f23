#include "chip/coll.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace galaxy::chip {

const char* combine_op_name(CombineOp op) {
  switch (op) {
    case CombineOp::kNone:
      return "none";
    case CombineOp::kSumI64:
      return "sum-int64";
    case CombineOp::kMinI64:
      return "min-int64";
    case CombineOp::kMaxI64:
      return "max-int64";
    case CombineOp::kSumF64:
      return "sum-double";
    case CombineOp::kMinF64:
      return "min-double";
    case CombineOp::kMaxF64:
      return "max-double";
  }
  return "?";
}

namespace {

template <class T, class F>
void fold(std::span<uint8_t> acc, std::span<const uint8_t> in, F f) {
  const size_t n = std::min(acc.size(), in.size()) / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, acc.data() + i * sizeof(T), sizeof(T));
    std::memcpy(&b, in.data() + i * sizeof(T), sizeof(T));
    a = f(a, b);
    std::memcpy(acc.data() + i * sizeof(T), &a, sizeof(T));
  }
}

// Integer sums wrap (two's complement, as the NIC's adder does), never undefined behaviour.
int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

}  // namespace

void combine(CombineOp op, std::span<uint8_t> acc, std::span<const uint8_t> in) {
  switch (op) {
    case CombineOp::kNone:
      return;
    case CombineOp::kSumI64:
      return fold<int64_t>(acc, in, wrapping_add);
    case CombineOp::kMinI64:
      return fold<int64_t>(acc, in, [](int64_t a, int64_t b) { return std::min(a, b); });
    case CombineOp::kMaxI64:
      return fold<int64_t>(acc, in, [](int64_t a, int64_t b) { return std::max(a, b); });
    case CombineOp::kSumF64:
      return fold<double>(acc, in, [](double a, double b) { return a + b; });
    case CombineOp::kMinF64:
      return fold<double>(acc, in, [](double a, double b) { return b < a ? b : a; });
    case CombineOp::kMaxF64:
      return fold<double>(acc, in, [](double a, double b) { return b > a ? b : a; });
  }
}

Status check_coll_descriptor(const CollDescriptor& d) {
  if (static_cast<uint8_t>(d.kind) > static_cast<uint8_t>(CollDescriptor::Kind::kMp))
    return make_error(Code::kInvalidArgument, 2100,
                      fmt::format("collective descriptor: kind = {}, expected 0 (cp), 1 (local) "
                                  "or 2 (mp)",
                                  static_cast<unsigned>(d.kind)));
  if (static_cast<uint8_t>(d.data_from) > kMaxCollData)
    return make_error(Code::kInvalidArgument, 2101,
                      fmt::format("collective descriptor: data_from = {} exceeds {}",
                                  static_cast<unsigned>(d.data_from), kMaxCollData));
  if (static_cast<uint8_t>(d.op) > kMaxCombineOp)
    return make_error(Code::kInvalidArgument, 2102,
                      fmt::format("collective descriptor: op = {} exceeds {}",
                                  static_cast<unsigned>(d.op), kMaxCombineOp));
  if (d.length > wire::kMpPayloadBytes)
    return make_error(Code::kOutOfRange, 2103,
                      fmt::format("collective descriptor: length = {} exceeds {} bytes", d.length,
                                  wire::kMpPayloadBytes));
  if (static_cast<uint8_t>(d.cp_op) > kMaxCombineOp)
    return make_error(Code::kInvalidArgument, 2120,
                      fmt::format("collective descriptor: cp_op = {} exceeds {}",
                                  static_cast<unsigned>(d.cp_op), kMaxCombineOp));
  if ((d.cp_op != CombineOp::kNone || d.data_from == CollData::kCombined) &&
      d.length % kCombineElementBytes != 0)
    return make_error(Code::kInvalidArgument, 2104,
                      fmt::format("collective descriptor: length = {} with op {}: combined data "
                                  "are whole {}-byte elements",
                                  d.length, combine_op_name(d.op), kCombineElementBytes));
  if (d.data_from == CollData::kCombined && d.op == CombineOp::kNone)
    return make_error(Code::kInvalidArgument, 2105,
                      "collective descriptor: data_from = combined needs an op");
  if (d.kind == CollDescriptor::Kind::kMp && (d.cp_flags & ~kCpFlagInterrupt))
    return make_error(Code::kInvalidArgument, 2121,
                      fmt::format("collective descriptor: cp_flags = {:#x} on an MP: only the "
                                  "interrupt ({:#x})",
                                  d.cp_flags, kCpFlagInterrupt));
  if (d.sends() && d.dest_vp > wire::mp_word::kMaxVp)
    return make_error(Code::kOutOfRange, 2108,
                      fmt::format("collective descriptor: dest_vp = {} exceeds {}", d.dest_vp,
                                  wire::mp_word::kMaxVp));
  if (d.kind == CollDescriptor::Kind::kCp) {
    if (d.increment == 0)
      return make_error(Code::kOutOfRange, 2106,
                        "collective descriptor: increment = 0, expected 1-65535");
    if (d.cp_flags & ~kCpFlagsMask)
      return make_error(
          Code::kInvalidArgument, 2107,
          fmt::format("collective descriptor: cp_flags = {:#x} has bits outside {:#x}", d.cp_flags,
                      kCpFlagsMask));
  }
  return {};
}

Result<CpFields> cp_fields(const wire::DataPacket& p) {
  CpFields f;
  f.increment = p.head.tag;
  f.flags = p.head.flags;
  if (f.increment == 0)
    return make_error(Code::kMalformed, 2109, "CP packet: increment (tag) = 0, expected 1-65535");
  if (f.flags & ~kCpFlagsMask)
    return make_error(
        Code::kMalformed, 2110,
        fmt::format("CP packet: flags = {:#x} has bits outside {:#x}", f.flags, kCpFlagsMask));
  if (p.ext.key > kMaxCombineOp || p.ext.address != 0 || p.ext.offset != 0 || p.ext.length != 0)
    return make_error(
        Code::kMalformed, 2111,
        fmt::format("CP packet: extension (op {}, address {:#x}, offset {}, length "
                    "{}) is not an op 0-{} with the rest 0",
                    p.ext.key, p.ext.address, p.ext.offset, p.ext.length, kMaxCombineOp));
  f.op = static_cast<CombineOp>(p.ext.key);
  if (f.op != CombineOp::kNone && p.head.bytes % kCombineElementBytes != 0)
    return make_error(Code::kMalformed, 2112,
                      fmt::format("CP packet: {} bytes to combine by {}: not whole {}-byte "
                                  "elements",
                                  p.head.bytes, combine_op_name(f.op), kCombineElementBytes));
  if (p.head.bytes > wire::kMpPayloadBytes)
    return make_error(
        Code::kMalformed, 2113,
        fmt::format("CP packet: {} bytes exceed {}", p.head.bytes, wire::kMpPayloadBytes));
  return f;
}

bool stays_on_chip(const wire::DataHead& h) {
  return h.kind == wire::PacketKind::kCp && (h.flags & ~kCpFlagsMask) == 0 &&
         (h.flags & kCpFlagToMpq) == 0;
}

}  // namespace galaxy::chip
