#include "engine/live/direct.h"

#include <fmt/format.h>

#include <cstring>

#include "chip/data_vc.h"
#include "chip/forwarding.h"
#include "chip/nic_arrival.h"
#include "chip/refusal.h"
#include "engine/live/mpq_claim.h"
#include "wire/mp.h"

namespace galaxy::live {

wire::DataPacket mp_packet(uint32_t src_node, uint8_t src_vp, uint32_t dest_node, uint8_t dest_vp,
                           uint8_t kind_flags, const void* data, uint8_t length) {
  wire::DataPacket p;
  p.head.kind = wire::PacketKind::kMp;
  p.head.vc = chip::data_vc(p.head.kind);
  p.head.dest_node = static_cast<wire::ChipId>(dest_node);
  p.head.src_node = static_cast<wire::ChipId>(src_node);
  p.head.dest_vp = dest_vp;
  p.head.src_vp = src_vp;
  p.head.bytes = length;
  p.head.flags = (kind_flags & wire::kMpFlagInterrupt) ? wire::kDataFlagInterrupt : 0;
  if (length) std::memcpy(p.payload.data(), data, length);
  return p;
}

bool enters_target_host(Segment& seg, const Forwarded& f, uint32_t dest) {
  if (f.kind != Forwarded::Kind::kLeavesHost || dest >= seg.num_chips()) return false;
  const PeerInfo& entry = seg.peer(f.chip, f.port);
  return entry.chip != kNoChip && entry.chip < seg.num_chips() &&
         seg.chip(entry.chip).host == seg.chip(dest).host;
}

Status leaving_item(const wire::DataPacket& p, const Forwarded& f, std::vector<uint8_t>* out) {
  out->clear();
  return append_leaving_item(p, f, out);
}

Status append_leaving_item(const wire::DataPacket& p, const Forwarded& f,
                           std::vector<uint8_t>* out) {
  const size_t start = out->size();
  out->resize(start + sizeof(ItemHead) + wire::kMaxDataPacketLinkBytes);
  std::span<uint8_t> body(out->data() + start + sizeof(ItemHead), wire::kMaxDataPacketLinkBytes);
  auto n = wire::encode_data_packet_bytes(p, body);
  if (!n.ok()) {
    out->resize(start);
    return make_error(Code::kInvalidArgument, 4890,
                      fmt::format("a data packet leaving chip {} port {} does not encode: {}",
                                  f.chip, f.port, n.error().message));
  }
  out->resize(start + sizeof(ItemHead) + *n);
  const ItemHead h{static_cast<uint16_t>(sizeof(ItemHead) + *n),
                   static_cast<uint8_t>(ItemType::kData), f.port, f.chip};
  std::memcpy(out->data() + start, &h, sizeof h);
  std::span<uint8_t> bytes(out->data() + start + sizeof h, *n);
  wire::set_data_hops(bytes, f.hops_passed);
  set_vc_class(bytes, f.vc_class);
  return {};
}

Arrival arrive_direct(Segment& seg, std::span<const uint8_t> item, ArrivalPaths* paths, Error* why,
                      TransferArrival* transfer) {
  ItemHead h;
  if (!read_data_item_head(item, seg.num_chips(), seg.max_ports(), &h)) {
    *why = make_error(Code::kMalformed, 4891,
                      fmt::format("a direct-path item of {} bytes whose head is malformed or not a "
                                  "data packet",
                                  item.size()));
    return Arrival::kDropped;
  }
  const PeerInfo& entry = seg.peer(h.from_chip, h.from_port);
  if (entry.chip == kNoChip || !seg.is_local(entry.chip)) {
    *why = make_error(Code::kNotFound, 4892,
                      fmt::format("a direct-path item from chip {} port {}, which does not lead "
                                  "into this host",
                                  h.from_chip, h.from_port));
    return Arrival::kDropped;
  }
  // The head routes it, the NIC checks all of it; anything unusual is the daemon's, whose NIC
  // model discards and counts it.
  const std::span<const uint8_t> body = item.subspan(sizeof h);
  const std::optional<wire::DataHead> head = chip::routable_head(body);
  if (!head) return Arrival::kToDaemon;
  const bool mp =
      head->kind == wire::PacketKind::kMp && (head->flags & wire::kDataFlagInTransfer) == 0;
  if (!mp && (!transfer || head->kind == wire::PacketKind::kCp)) return Arrival::kToDaemon;
  PathCounters& path = paths->at(seg, entry.chip, entry.port, head->dest_node, head->hops,
                                 chip::vc_class_of(head->vc));
  if (path.result.kind != Forwarded::Kind::kDelivered) return Arrival::kToDaemon;
  const uint32_t at = path.result.chip;
  NicSlot* nic = seg.nic_of(at);
  if (!nic) return Arrival::kToDaemon;
  wire::DataDefect defect;
  wire::DataPacket p;
  if (!chip::check_arriving_bytes(static_cast<wire::ChipId>(at), body, &p, &defect).ok())
    return Arrival::kToDaemon;  // its NIC model discards and counts it
  if (!mp) {
    if (p.head.kind == wire::PacketKind::kAck && p.ext.address == chip::kMpRefusedAckAddress)
      return Arrival::kToDaemon;  // an NRC's refusal of an MP: the daemon's NIC reports it
    path.add(wire::Traffic{1, p.head.bytes, p.head.length_flits});
    transfer->packet = p;
    transfer->nic = at;
    return Arrival::kTransfer;
  }
  switch (deliver_mp_packet(nic->vps[p.head.dest_vp], p)) {
    case chip::MpqAdmit::kWrite:
      path.add(wire::Traffic{1, 0, p.head.length_flits});
      return Arrival::kDelivered;
    case chip::MpqAdmit::kWait:
      return Arrival::kHold;
    default:
      return Arrival::kToDaemon;  // not open or its owner gone: the daemon refuses it
  }
}

bool item_is_mp(std::span<const uint8_t> item) {
  if (item.size() <= sizeof(ItemHead)) return false;
  const std::optional<wire::DataHead> head = chip::routable_head(item.subspan(sizeof(ItemHead)));
  return head && head->kind == wire::PacketKind::kMp &&
         (head->flags & wire::kDataFlagInTransfer) == 0;
}

}  // namespace galaxy::live
