// The direct path between processes of different hosts (docs/live.md "The direct path"): an MP
// whose path leaves the sender's host straight into the host of its target crosses as one link
// item from the sender's process to the target VP's owner, over a Link (engine/live/link.h)
// between the two processes' own datagram sockets, instead of through both hosts' daemons. Each
// side executes its own host's part of the path with the same functions the daemons use: the
// sender forwards to where the packet leaves its host (forward), the receiver forwards from
// where it enters (forward_arrived), makes the NIC's arrival checks (chip/nic_arrival.h) and
// writes the MPQ (deliver_mp_packet). Whatever is not a clean MP for an open VP of the
// receiver's host goes to its daemon (EgressKind::kArrived), which handles it as if its own
// link had delivered it: refusals, discards and their counters stay where they are written.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/live/forward.h"
#include "engine/live/items.h"
#include "engine/live/segment.h"
#include "wire/data_packet.h"

namespace galaxy::live {

// An item of the direct path fits an egress cell (it may have to go to the daemon).
static_assert(sizeof(ItemHead) + wire::kMaxDataPacketFlits * wire::kFlitBytes <=
              sizeof(EgressItem));

// The MP as the wire carries it (docs/system.md 1.1): a data packet of kind MP. `kind_flags` as
// EgressMp's (wire::kMpFlagInterrupt in its low bits).
wire::DataPacket mp_packet(uint32_t src_node, uint8_t src_vp, uint32_t dest_node, uint8_t dest_vp,
                           uint8_t kind_flags, const void* data, uint8_t length);

// Whether a packet leaving the host where `f` says (Forwarded::Kind::kLeavesHost) enters the host
// of its target `dest` straight from there: only such a path goes direct (a longer one crosses a
// third host, whose daemon carries it on).
bool enters_target_host(Segment& seg, const Forwarded& f, uint32_t dest);

// A data packet leaving the host where `f` (Forwarded::Kind::kLeavesHost) says, as the link item
// that crosses: the item head naming the chip and port it leaves from, then its encoded flits
// with the NRCs passed so far and in the VC class of that link. Replaces *out. E4890: the packet
// does not encode.
Status leaving_item(const wire::DataPacket& p, const Forwarded& f, std::vector<uint8_t>* out);
// The same appended to *out (a frame's worth of items built in place). With `run`, the payload
// of the transfer's packets that follow `p` (chip::rdma_run_bytes), one kDataRun item.
Status append_leaving_item(const wire::DataPacket& p, const Forwarded& f, std::vector<uint8_t>* out,
                           std::span<const uint8_t> run = {});
// The bytes of a run item beside its packet's (ItemHead, the packet's flits, RunHead).
inline constexpr size_t kRunItemOverhead =
    sizeof(ItemHead) + wire::kMaxDataPacketLinkBytes + sizeof(RunHead);

enum class Arrival : uint8_t {
  kDelivered,  // written into the target VP's MPQ, the ports it passed counted
  kHold,       // the target's MPQ is full: try it again later, in order
  kToDaemon,   // anything but a clean MP for an open VP or a transfer's packet: the daemon's
  kDropped,    // not an item of the direct path at all (*why says so)
  kTransfer,   // a clean packet of a direct transfer (glex/direct_rdma.h): in *transfer
};

// A packet of an RDMA transfer between processes (put, immediate and get data, notices, read
// requests, acks) that passed the NIC's arrival checks at local NIC `nic`.
struct TransferArrival {
  wire::DataPacket packet;
  std::span<const uint8_t> run;  // the run's payload after it (a kDataRun item), in the item
  uint32_t nic = 0;
};

// A link item that arrived on a process's direct path, handled as the process's host would:
// E4891 the item's head is malformed or not a data packet, E4892 the chip and port it left from
// do not lead into this host. The ports it passed count in `paths` once it is delivered.
// With `transfer`, a transfer's packet is kTransfer (the process runs the NIC's rules on it);
// without, the daemon's. A run is a transfer's or dropped (it does not fit the daemon's egress
// cell; its transfer times out at its initiator, as any whose packet the daemon takes): E2082
// its head is wrong, E2083 it is no transfer's or does not end at this host's NIC.
Arrival arrive_direct(Segment& seg, std::span<const uint8_t> item, ArrivalPaths* paths, Error* why,
                      TransferArrival* transfer = nullptr);

// Whether an item of the direct path carries an MP (its head's kind; false for a malformed one):
// only MPs are handed to the daemon when a link gives up (a transfer's packets fail with it).
bool item_is_mp(std::span<const uint8_t> item);

}  // namespace galaxy::live
