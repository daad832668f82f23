// Head flit of a table-routed data packet (SYSTEM.md 1.1, 1.2; docs/protocol.md).
#include "wire/data_packet.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

// Offsets in the head flit's 192-bit payload.
constexpr size_t kKindBit = 0;       // 4 bits
constexpr size_t kDestVpBit = 4;     // 6 bits
constexpr size_t kSrcVpBit = 10;     // 6 bits
constexpr size_t kDestNodeBit = 16;  // 16 bits
constexpr size_t kSrcNodeBit = 32;   // 16 bits
constexpr size_t kLengthBit = 48;    // 7 bits
constexpr size_t kReservedBit = 55;  // 137 bits
constexpr uint8_t kMaxVp = 63;
constexpr uint16_t kMaxLengthFlits = 64;

}  // namespace

Result<Flit> encode_data_head(const DataHead& h, bool single_flit) {
  if (static_cast<uint8_t>(h.kind) > kMaxPacketKind) {
    return make_error(Code::kInvalidArgument, 1700,
                      fmt::format("data head: kind = {} exceeds {}", static_cast<unsigned>(h.kind),
                                  kMaxPacketKind));
  }
  if (h.vc >= kNumVcs || h.vc == kMgmtVc) {
    return make_error(
        Code::kInvalidArgument, 1701,
        fmt::format("data head: vc = {}, expected 0-5 but not {} (management)", h.vc, kMgmtVc));
  }
  if (h.dest_vp > kMaxVp || h.src_vp > kMaxVp) {
    bool dest = h.dest_vp > kMaxVp;
    return make_error(Code::kOutOfRange, 1702,
                      fmt::format("data head: {} = {} exceeds {}", dest ? "dest_vp" : "src_vp",
                                  dest ? h.dest_vp : h.src_vp, kMaxVp));
  }
  if (h.length_flits < 1 || h.length_flits > kMaxLengthFlits) {
    return make_error(Code::kOutOfRange, 1703,
                      fmt::format("data head: length_flits = {}, expected 1-{}", h.length_flits,
                                  kMaxLengthFlits));
  }
  if (single_flit != (h.length_flits == 1)) {
    return make_error(Code::kInvalidArgument, 1704,
                      fmt::format("data head: length_flits = {} with single_flit = {}",
                                  h.length_flits, single_flit));
  }
  Flit f;
  f.kind = single_flit ? FlitKind::kHeadTail : FlitKind::kHead;
  f.vc = h.vc;
  put_bits(f.payload, kKindBit, 4, static_cast<uint8_t>(h.kind));
  put_bits(f.payload, kDestVpBit, 6, h.dest_vp);
  put_bits(f.payload, kSrcVpBit, 6, h.src_vp);
  put_bits(f.payload, kDestNodeBit, 16, h.dest_node);
  put_bits(f.payload, kSrcNodeBit, 16, h.src_node);
  put_bits(f.payload, kLengthBit, 7, h.length_flits);
  return f;
}

Result<DataHead> decode_data_head(const Flit& f) {
  if (f.kind != FlitKind::kHead && f.kind != FlitKind::kHeadTail) {
    return make_error(Code::kMalformed, 1710,
                      fmt::format("data head: flit kind = {}, expected head or head+tail",
                                  flit_kind_name(f.kind)));
  }
  if (f.vc >= kNumVcs || f.vc == kMgmtVc) {
    return make_error(
        Code::kMalformed, 1711,
        fmt::format("data head: vc = {}, expected 0-5 but not {} (management)", f.vc, kMgmtVc));
  }
  DataHead h;
  h.vc = f.vc;
  auto kind = static_cast<uint8_t>(get_bits(f.payload, kKindBit, 4));
  if (kind > kMaxPacketKind) {
    return make_error(Code::kMalformed, 1712,
                      fmt::format("data head: kind = {} exceeds {}", kind, kMaxPacketKind));
  }
  h.kind = static_cast<PacketKind>(kind);
  h.dest_vp = static_cast<uint8_t>(get_bits(f.payload, kDestVpBit, 6));
  h.src_vp = static_cast<uint8_t>(get_bits(f.payload, kSrcVpBit, 6));
  h.dest_node = static_cast<uint16_t>(get_bits(f.payload, kDestNodeBit, 16));
  h.src_node = static_cast<uint16_t>(get_bits(f.payload, kSrcNodeBit, 16));
  h.length_flits = static_cast<uint16_t>(get_bits(f.payload, kLengthBit, 7));
  if (h.length_flits < 1 || h.length_flits > kMaxLengthFlits) {
    return make_error(Code::kMalformed, 1713,
                      fmt::format("data head: length_flits = {}, expected 1-{}", h.length_flits,
                                  kMaxLengthFlits));
  }
  bool single_flit = f.kind == FlitKind::kHeadTail;
  if (single_flit != (h.length_flits == 1)) {
    return make_error(Code::kMalformed, 1714,
                      fmt::format("data head: length_flits = {} in a {} flit", h.length_flits,
                                  flit_kind_name(f.kind)));
  }
  for (size_t off = kReservedBit; off < kFlitPayloadBits; off += 64) {
    unsigned w = static_cast<unsigned>(std::min<size_t>(64, kFlitPayloadBits - off));
    if (uint64_t v = get_bits(f.payload, off, w); v != 0) {
      return make_error(Code::kMalformed, 1715,
                        fmt::format("data head: reserved payload bits {}-{} = {:#x}, expected 0",
                                    off, off + w - 1, v));
    }
  }
  return h;
}

}  // namespace galaxy::wire
