// What a chip does with a data packet it cannot pass on, written once for both engines and
// every path (the simulator's NRCs and NICs, the live daemon's, a live sender's same-host path,
// which hands such an MP to its daemon).
//
// The one semantic: the packet is discarded where it stands and counted there (an NRC: the input
// port's DIRTY_DISCARDS, chip::Nrc::route_data's E2031). When it is an MP, that chip answers its
// sender with a refusal: an ack that names no transfer (kMpRefusedAckAddress) and carries the
// error id, which the sender's NIC turns into an error completion in the MP owner's CQ
// (Nic::rx_ack). So no MP is lost without its owner told, whichever engine runs it and wherever
// on the path it dies: at the sender's own NIC (its port is down, E2035), at an NRC (no usable
// output, E2031; or the packet has passed kMaxDataHops NRCs, a routing loop, E2037), or at the
// target (its VP not open or its owner gone). Nothing else is
// answered: an RDMA transfer completes at its source by its ack or its timeout, and an ack or a
// refusal that is itself discarded gets no answer, so a dead path cannot start a storm.
#pragma once

#include <cstdint>
#include <optional>

#include "chip/data_vc.h"
#include "wire/data_packet.h"

namespace galaxy::chip {

// The extension address of an ack that refuses an MP; its error id is in ext.offset. The acks
// of transfers carry the transfer's address.
inline constexpr uint64_t kMpRefusedAckAddress = UINT64_MAX;

// The refusals' error ids (docs/glex.md: GLEX_UNREACHABLE in the owner's CQ).
inline constexpr uint16_t kErrNoUsableRoute =
    2031;                                          // an NRC had no usable output (Nrc::route_data)
inline constexpr uint16_t kErrNicPortDown = 2035;  // the sender's own NIC port is down
inline constexpr uint16_t kErrHopLimit = 2037;     // passed kMaxDataHops NRCs (chip/forwarding.h)

// Whether a discarded packet is answered: an MP on its own (not the trailing MP of a transfer),
// or a collective's control packet (chip/coll.h), whose sender's collective then fails at once.
constexpr bool answers_discard(const wire::DataHead& h) {
  return (h.kind == wire::PacketKind::kMp || h.kind == wire::PacketKind::kCp) &&
         (h.flags & wire::kDataFlagInTransfer) == 0;
}

// The refusal chip `at` sends for the MP whose head is `mp`, refused with `error_id`.
inline wire::DataPacket mp_refusal(const wire::DataHead& mp, wire::ChipId at, uint16_t error_id) {
  wire::DataPacket a;
  a.head.kind = wire::PacketKind::kAck;
  a.head.vc = data_vc(a.head.kind);
  a.head.dest_node = mp.src_node;
  a.head.src_node = at;
  a.head.dest_vp = mp.src_vp;
  a.head.src_vp = mp.dest_vp;
  a.ext.address = kMpRefusedAckAddress;
  a.ext.offset = error_id;
  a.head.tag = static_cast<uint16_t>(mp.kind);  // which of the sender's descriptors it was
  return a;
}

// The answer to a discarded packet, if it gets one (see above).
inline std::optional<wire::DataPacket> refusal_of(const wire::DataHead& h, wire::ChipId at,
                                                  uint16_t error_id) {
  if (!answers_discard(h)) return std::nullopt;
  return mp_refusal(h, at, error_id);
}

}  // namespace galaxy::chip
