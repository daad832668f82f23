// RDMA between processes of different hosts on their direct links (docs/live.md "RDMA on the
// direct path"): the initiator's process runs its NIC's part of a transfer (the start checks,
// the packets cut at the destination's 128-byte boundaries, the notice, completion on the
// target's ack or on a get's last response) and the target VP's owner runs the target NIC's
// part (chip::RdmaTarget: the whole transfer checked before a byte is written, the notice once
// the data are written, one ack; a get's responses read from its host's memory), each through
// its own host's ATT and memory port (live::SegmentAtt, live::SegmentHostMemory) as the daemons'
// NIC models do. Transfers of at most kMaxBytes go this way; larger ones, triggered ones and
// trailing MPs go through the daemons' NICs.
//
// A transfer fails, never hangs: if its link gives up (the peer gone) it completes with
// live::kErrDirectPeerGone, and one unanswered for kTimeoutNs (a reply path that does not come
// straight back) with live::kErrDirectNoAnswer.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/function_ref.h"
#include "chip/nic.h"
#include "chip/rdma_transfer.h"
#include "engine/live/direct.h"
#include "engine/live/forward.h"
#include "engine/live/items.h"
#include "engine/live/nic_host.h"
#include "engine/live/segment.h"
#include "wire/rdma_descriptor.h"

namespace galaxy::glex {

class DirectRdma {
 public:
  // Largest transfer that goes direct. Larger ones stream through the daemons' NICs, whose
  // frames carry more per datagram (measured: docs/live.md).
  static constexpr uint64_t kMaxBytes = 256 * 1024;
  // A transfer with no answer this long fails (as the daemon's operation timeout).
  static constexpr uint64_t kTimeoutNs = 5'000'000'000;
  // Bytes of transfers (a put's data, a get's response) in flight to one peer: beyond, a start
  // is busy before anything is read or encoded, so what waits is the caller's descriptor, not
  // megabytes of packets in either process (the link's window is 2 MiB of frames).
  static constexpr uint64_t kMaxPeerBytes = 1 << 20;

  DirectRdma(live::Segment& seg, live::NicSlot& nic, uint32_t node);
  DirectRdma(const DirectRdma&) = delete;
  DirectRdma& operator=(const DirectRdma&) = delete;

  // What the initiator's completion needs of the request.
  struct Request {
    uint8_t vp = 0;
    live::OpCode op = live::OpCode::kPut;
    uint32_t flags = 0;  // GLEX_FLAG_*
    uint64_t cookie = 0;
    uint64_t length = 0;
  };
  // Sends a transfer's packets through `send` (all of them, or none: false, also when the
  // peer has kMaxPeerBytes in flight), `d` having passed
  // chip::check_rdma_start, on the link to the process at address key `peer`. Reads the
  // initiator's memory as the NIC's DMA engine 0 does; a read that fails completes the
  // descriptor with its error, as the NIC's does.
  using SendFn = FunctionRef<bool(std::span<const uint8_t> items, size_t count)>;
  bool start(const Request& r, const wire::RdmaDescriptor& d, const live::Forwarded& leaving,
             uint64_t peer, SendFn send);

  // A transfer's packet that arrived on the link from `peer` (the direct path's lock held);
  // what it answers (acks, read responses) goes back through `reply`.
  using ReplyFn = FunctionRef<void(const wire::DataPacket& p, uint32_t from_nic)>;
  void arrived(const live::TransferArrival& a, uint64_t peer, ReplyFn reply);
  // The link to `peer` gave up: its transfers fail (E6167), what it was sending is forgotten.
  void peer_gone(uint64_t peer);
  // Timeouts, and completions that waited for room in their CQ.
  void service(uint64_t now);

 private:
  struct Tx {
    bool used = false;
    uint8_t generation = 0;
    Request r;
    wire::RdmaDescriptor d;
    uint64_t peer = 0;
    uint64_t deadline = 0;
    uint64_t received = 0;  // get: response packets written
    uint16_t error_id = 0;  // get: the first failure writing the response
  };
  struct Completion {
    Request r;
    uint16_t error_id = 0;
  };
  // The target side of one NIC of this host (the one a transfer's packets arrive at).
  struct TargetNic {
    explicit TargetNic(live::NicSlot& n) : slot(n), att(n), memory(n) {}
    live::NicSlot& slot;
    live::SegmentAtt att;
    live::SegmentHostMemory memory;
  };
  struct TargetHost;

  Tx* tx_by_tag(uint16_t tag);
  void finish(uint16_t slot, uint16_t error_id);  // mu_ held
  void complete(const Completion& c);             // mu_ held
  bool push(const Completion& c);                 // mu_ held; false: the CQ is full
  TargetNic& target_nic(uint32_t nic);            // mu_ held
  void answer_get(TargetNic& t, chip::RdmaReadJob j, uint32_t nic, ReplyFn reply);
  void on_response(const wire::DataPacket& p);
  void on_ack(const wire::DataPacket& p);

  live::Segment& seg_;
  live::NicSlot& nic_;
  uint32_t node_;
  mutable std::mutex mu_;  // everything below
  std::vector<Tx> tx_;
  std::vector<uint16_t> free_;
  live::SegmentAtt own_att_;
  live::SegmentHostMemory own_memory_;
  std::unordered_map<uint64_t, chip::RdmaTarget> targets_;  // by peer: what each sends us
  std::unordered_map<uint64_t, uint64_t> peer_bytes_;       // by peer: bytes of Tx in flight
  std::unordered_map<uint32_t, std::unique_ptr<TargetNic>> target_nics_;
  std::deque<Completion> waiting_;  // completions that found their CQ full
  uint64_t next_timeout_check_ = 0;
  std::vector<uint8_t> items_;
};

}  // namespace galaxy::glex
