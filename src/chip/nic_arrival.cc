#include "chip/nic_arrival.h"

#include <fmt/format.h>

#include "chip/nic.h"

namespace galaxy::chip {

Status decode_arriving_flits(std::span<const uint8_t> bytes, LinkFlits* out,
                             wire::DataDefect* defect) {
  out->count = 0;
  const size_t max = out->flits.size();
  const size_t n = bytes.size() / wire::kFlitBytes;
  if (n == 0 || bytes.size() % wire::kFlitBytes != 0 || n > max) {
    *defect = n > max ? wire::DataDefect::kTooLong : wire::DataDefect::kDataError;
    return make_error(Code::kMalformed, 2078,
                      fmt::format("data packet of {} bytes is not 1-{} whole flits of {} bytes",
                                  bytes.size(), max, wire::kFlitBytes));
  }
  for (size_t i = 0; i < n; ++i) {
    auto f = wire::decode_flit(bytes.subspan(i * wire::kFlitBytes, wire::kFlitBytes));
    if (!f.ok()) {  // bits that no flit has: the link delivered corrupt data
      *defect = wire::DataDefect::kDataError;
      return f.error();
    }
    out->flits[i] = *f;
  }
  out->count = n;
  return {};
}

namespace {

// The checks after decoding: the packet is for this NIC and one of its VPs.
Status check_destination(wire::ChipId chip_id, const wire::DataHead& h, wire::DataDefect* defect) {
  if (h.dest_node != chip_id) {
    *defect = wire::DataDefect::kMisrouted;
    return make_error(
        Code::kNotFound, 2050,
        fmt::format("data packet for node {} reached NIC {} (misrouted)", h.dest_node, chip_id));
  }
  if (h.dest_vp >= kNumVps) {
    *defect = wire::DataDefect::kMalformed;
    return make_error(Code::kOutOfRange, 2051,
                      fmt::format("data packet for vp {}: the NIC has {}", h.dest_vp, kNumVps));
  }
  *defect = wire::DataDefect::kNone;
  return {};
}

}  // namespace

Status check_arriving_bytes(wire::ChipId chip_id, std::span<const uint8_t> bytes,
                            wire::DataPacket* out, wire::DataDefect* defect) {
  if (wire::decode_clean_data_packet(bytes, out))
    return check_destination(chip_id, out->head, defect);
  LinkFlits flits;  // only a packet with something wrong is decoded flit by flit
  if (Status s = decode_arriving_flits(bytes, &flits, defect); !s.ok()) return s;
  auto p = wire::decode_data_packet(flits.view());
  if (!p.ok()) {
    *defect = wire::data_defect_of(p.error());
    return p.error();
  }
  *out = *p;
  return check_destination(chip_id, out->head, defect);
}

Result<wire::DataPacket> check_arriving(wire::ChipId chip_id, std::span<const wire::Flit> flits,
                                        wire::DataDefect* defect) {
  auto p = wire::decode_data_packet(flits);
  if (!p.ok()) {
    *defect = wire::data_defect_of(p.error());
    return p.error();
  }
  GALAXY_TRY(check_destination(chip_id, p->head, defect));
  return p;
}

}  // namespace galaxy::chip
