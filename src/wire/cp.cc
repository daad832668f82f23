#include "wire/cp.h"

#include <fmt/format.h>

namespace galaxy::wire {
namespace {

constexpr uint8_t kFlagInterrupt = 0x1;
constexpr uint8_t kFlagWriteToMpq = 0x2;
constexpr uint8_t kFlagReplaceData = 0x4;
constexpr uint8_t kFlagReserved = 0x8;

}  // namespace

Result<MpBytes> encode_cp(const Cp& c) {
  if (c.increment == 0) {
    return make_error(Code::kOutOfRange, 1500, "cp: increment = 0, expected 1-65535");
  }
  Mp m;
  m.kind = MpKind::kCp;
  m.flags = static_cast<uint8_t>((c.interrupt ? kFlagInterrupt : 0) |
                                 (c.write_to_mpq ? kFlagWriteToMpq : 0) |
                                 (c.replace_data ? kFlagReplaceData : 0));
  m.target_vp = c.target_vp;
  m.src_vp = c.src_vp;
  m.src_node = c.src_node;
  m.length = c.length;
  m.tag = c.increment;
  m.payload = c.data;
  auto b = encode_mp(m);
  if (!b.ok()) {
    const Error& e = b.error();
    return make_error(e.code, e.id, fmt::format("cp: {}", e.message));
  }
  return b;
}

Result<Cp> decode_cp(std::span<const uint8_t> bytes) {
  auto m = decode_mp(bytes);
  if (!m.ok()) {
    const Error& e = m.error();
    return make_error(e.code, e.id, fmt::format("cp: {}", e.message));
  }
  if (m->kind != MpKind::kCp) {
    return make_error(Code::kMalformed, 1510,
                      fmt::format("cp: kind = {}, expected {} (cp)", static_cast<unsigned>(m->kind),
                                  static_cast<unsigned>(MpKind::kCp)));
  }
  if (m->flags & kFlagReserved) {
    return make_error(Code::kMalformed, 1511,
                      fmt::format("cp: flags = {:#x} has reserved bit 3 set", m->flags));
  }
  if (m->tag == 0) {
    return make_error(Code::kMalformed, 1512, "cp: increment = 0, expected 1-65535");
  }
  Cp c;
  c.interrupt = m->flags & kFlagInterrupt;
  c.write_to_mpq = m->flags & kFlagWriteToMpq;
  c.replace_data = m->flags & kFlagReplaceData;
  c.target_vp = m->target_vp;
  c.src_vp = m->src_vp;
  c.src_node = m->src_node;
  c.length = m->length;
  c.increment = m->tag;
  c.data = m->payload;
  return c;
}

}  // namespace galaxy::wire
