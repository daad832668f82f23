#include "engine/live/direct.h"

#include <fmt/format.h>

#include <cstring>

#include "chip/data_vc.h"
#include "chip/forwarding.h"
#include "chip/nic_arrival.h"
#include "chip/rdma_transfer.h"
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

Status append_leaving_item(const wire::DataPacket& p, const Forwarded& f, std::vector<uint8_t>* out,
                           std::span<const uint8_t> run) {
  const size_t start = out->size();
  const size_t extra = run.empty() ? 0 : sizeof(RunHead) + run.size();
  if (sizeof(ItemHead) + wire::kMaxDataPacketLinkBytes + extra > 0xFFFF)
    return make_error(Code::kInvalidArgument, 4895,
                      fmt::format("a run of {} bytes does not fit a link item", run.size()));
  out->reserve(start + sizeof(ItemHead) + wire::kMaxDataPacketLinkBytes + extra);
  out->resize(start + sizeof(ItemHead) + wire::kMaxDataPacketLinkBytes);
  std::span<uint8_t> body(out->data() + start + sizeof(ItemHead), wire::kMaxDataPacketLinkBytes);
  auto n = wire::encode_data_packet_bytes(p, body);
  if (!n.ok()) {
    out->resize(start);
    return make_error(Code::kInvalidArgument, 4890,
                      fmt::format("a data packet leaving chip {} port {} does not encode: {}",
                                  f.chip, f.port, n.error().message));
  }
  const size_t length = sizeof(ItemHead) + *n + extra;
  const ItemType type = run.empty() ? ItemType::kData : ItemType::kDataRun;
  const ItemHead h{static_cast<uint16_t>(length), static_cast<uint8_t>(type), f.port, f.chip};
  std::memcpy(out->data() + start, &h, sizeof h);
  std::span<uint8_t> bytes(out->data() + start + sizeof h, *n);
  wire::set_data_hops(bytes, f.hops_passed);
  set_vc_class(bytes, f.vc_class);
  out->resize(start + sizeof h + *n);
  if (!run.empty()) {  // appended, not zeroed first: a run is kilobytes
    const RunHead r{static_cast<uint32_t>(run.size()), 0};
    const auto* head = reinterpret_cast<const uint8_t*>(&r);
    out->insert(out->end(), head, head + sizeof r);
    out->insert(out->end(), run.begin(), run.end());
  }
  return {};
}

namespace {

// A kDataRun item's body: its packet's flits (as many as the packet's head says), then the run
// (RunHead, payload).
Status split_run(std::span<const uint8_t> body, std::span<const uint8_t>* packet,
                 std::span<const uint8_t>* run) {
  const std::optional<wire::DataHead> head =
      body.size() >= wire::kFlitBytes ? wire::decode_data_head_bytes(body.first(wire::kFlitBytes))
                                      : std::nullopt;
  const size_t flits_bytes = head ? size_t{head->length_flits} * wire::kFlitBytes : 0;
  RunHead r{};
  if (!head || !read_struct(body, flits_bytes, &r) || r.reserved != 0 || r.bytes == 0 ||
      flits_bytes + sizeof r + r.bytes != body.size())
    return make_error(
        Code::kMalformed, 2082,
        fmt::format("a direct link's run item of {} bytes is malformed", body.size()));
  *packet = body.first(flits_bytes);
  *run = body.subspan(flits_bytes + sizeof r);
  return {};
}

}  // namespace

Arrival arrive_direct(Segment& seg, std::span<const uint8_t> item, ArrivalPaths* paths, Error* why,
                      TransferArrival* transfer) {
  ItemHead h;
  if (!read_direct_item_head(item, seg.num_chips(), seg.max_ports(), &h)) {
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
  std::span<const uint8_t> body = item.subspan(sizeof h);
  std::span<const uint8_t> run;
  if (h.type == static_cast<uint8_t>(ItemType::kDataRun)) {
    const Status st = split_run(body, &body, &run);
    if (!st.ok()) {
      *why = st.error();
      return Arrival::kDropped;
    }
  }
  // A run that is not a clean transfer's packet at this host's NIC: see direct.h.
  auto no_run = [&](const char* what) {
    *why = make_error(Code::kNotFound, 2083,
                      fmt::format("a run of {} bytes on a direct link from chip {} port {} {}: "
                                  "dropped (its transfer times out at its initiator)",
                                  run.size(), h.from_chip, h.from_port, what));
    return Arrival::kDropped;
  };
  const std::optional<wire::DataHead> head = chip::routable_head(body);
  if (!head) return run.empty() ? Arrival::kToDaemon : no_run("whose packet is malformed");
  const bool mp =
      head->kind == wire::PacketKind::kMp && (head->flags & wire::kDataFlagInTransfer) == 0;
  if (!run.empty() && (mp || !transfer)) return no_run("that is no transfer's");
  if (!mp && (!transfer || head->kind == wire::PacketKind::kCp)) return Arrival::kToDaemon;
  PathCounters& path = paths->at(seg, entry.chip, entry.port, head->dest_node, head->hops,
                                 chip::vc_class_of(head->vc));
  const uint32_t at = path.result.chip;
  NicSlot* nic = path.result.kind == Forwarded::Kind::kDelivered ? seg.nic_of(at) : nullptr;
  if (!nic) return run.empty() ? Arrival::kToDaemon : no_run("that does not end at this host");
  wire::DataDefect defect;
  wire::DataPacket p;
  if (!chip::check_arriving_bytes(static_cast<wire::ChipId>(at), body, &p, &defect).ok())
    return run.empty() ? Arrival::kToDaemon  // its NIC model discards and counts it
                       : no_run("whose packet fails the NIC's checks");
  if (!mp) {
    if (p.head.kind == wire::PacketKind::kAck && p.ext.address == chip::kMpRefusedAckAddress)
      return Arrival::kToDaemon;  // an NRC's refusal of an MP: the daemon's NIC reports it
    path.add(chip::rdma_run_traffic(p, run.size()));
    transfer->packet = p;
    transfer->run = run;
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
