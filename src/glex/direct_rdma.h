// RDMA between processes of different hosts on their direct links (docs/live.md "RDMA on the
// direct path"): the initiator's process runs its NIC's part of a transfer (the start checks,
// the packets cut at the destination's 128-byte boundaries, the notice, completion on the
// target's ack or on a get's last response) and the target VP's owner runs the target NIC's
// part (chip::RdmaTarget: the whole transfer checked before a byte is written, the notice once
// the data are written, one ack; a get's responses read from its host's memory), each through
// its own host's ATT and memory port (live::SegmentAtt, live::SegmentHostMemory) as the daemons'
// NIC models do. Transfers of any size go this way, cut a piece at a time as the link takes
// them (DMA engine 0's order: one transfer at a time, in start order); triggered ones and
// trailing MPs go through the daemons' NICs.
//
// A transfer fails, never hangs: if its link gives up (the peer gone) it completes with
// live::kErrDirectPeerGone, and one unanswered for kTimeoutNs (a reply path that does not come
// straight back) with live::kErrDirectNoAnswer.
#pragma once

#include <atomic>
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
  // A transfer with nothing from its target this long fails (as the daemon's operation
  // timeout); each piece sent or answer received starts the wait again.
  static constexpr uint64_t kTimeoutNs = 5'000'000'000;
  // Bytes of transfers (a put's data, a get's response) in flight to one peer: beyond, a start
  // is busy before anything is read or encoded, so what waits is the caller's descriptor, not
  // megabytes of packets in either process.
  static constexpr uint64_t kMaxPeerBytes = 2 << 20;

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
  // Starts a transfer, `d` having passed chip::check_rdma_start, to the process at address key
  // `peer`: DMA engine 0 (pump) reads the initiator's memory, cuts its packets and hands them
  // to `send` a piece at a time, as `send` has room (false: none now; the engine waits, as the
  // NIC's waits for its link). A read that fails completes the descriptor with its error, as
  // the NIC's does. A put's packets go as runs (chip::rdma_run_bytes) of at most `run_room`
  // payload bytes after each item's first packet: the link's frames hold several such items.
  // One that cannot start yet (kMaxPeerBytes in flight to that peer, every tag in flight) or
  // that would pass one waiting waits, in order, in this NIC's queue of kMaxQueued descriptors,
  // and starts from service as room comes. False (busy) only when that queue is full.
  // `send` may take the items' buffer (leaving an empty one in its place).
  using SendFn = FunctionRef<bool(uint64_t peer, const live::Forwarded& leaving,
                                  std::vector<uint8_t>* items, size_t count)>;
  static constexpr size_t kMaxQueued = chip::kDefaultSdqDepth;
  bool start(const Request& r, const wire::RdmaDescriptor& d, const live::Forwarded& leaving,
             uint64_t peer, size_t run_room, SendFn send);

  // A transfer's packet (and the run after it) that arrived on the link from `peer` (the direct
  // path's lock held); what it answers (acks, read responses and their runs) goes back through
  // `reply`.
  using ReplyFn =
      FunctionRef<void(const wire::DataPacket& p, std::span<const uint8_t> run, uint32_t from_nic)>;
  void arrived(const live::TransferArrival& a, uint64_t peer, ReplyFn reply);
  // Answers the gets of `peer` in arrival order, as the NIC's DMA engine 1 does, with at most
  // `packets` response packets through `reply`, in runs of at most `run_room` bytes after each
  // first packet (the link's owner calls it while the link has room). True while more remain.
  bool answer(uint64_t peer, size_t packets, size_t run_room, ReplyFn reply);
  // Whether gets of any peer wait to be answered, or transfers to be cut.
  bool answering() const { return answering_.load(std::memory_order_relaxed) != 0; }
  // (Not while the engine waits for a link to take its piece: the link's acks or timers wake
  // whoever drives it.)
  bool sending() const {
    return sending_.load(std::memory_order_relaxed) != 0 &&
           !stalled_.load(std::memory_order_relaxed);
  }
  // The link to `peer` gave up: its transfers fail (E6167), what it was sending is forgotten.
  void peer_gone(uint64_t peer);
  // Timeouts, completions that waited for room in their CQ, the transfers being cut and queued
  // transfers that can start (through `send`).
  void service(uint64_t now, SendFn send);

 private:
  struct Tx {
    bool used = false;
    uint8_t generation = 0;
    Request r;
    wire::RdmaDescriptor d;
    uint64_t peer = 0;
    live::Forwarded leaving;
    size_t run_room = 0;
    uint64_t deadline = 0;
    uint64_t sent = 0;       // put: bytes cut
    bool data_done = false;  // put: every data packet cut (the notice may follow)
    uint64_t received = 0;   // get: response packets written
    uint16_t error_id = 0;   // get: the first failure writing the response
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

  struct Queued {
    Request r;
    wire::RdmaDescriptor d;
    live::Forwarded leaving;
    uint64_t peer = 0;
    size_t run_room = 0;
  };
  // Whether a transfer of `length` bytes to `peer` may start now (a tag free, room to the peer).
  bool room(uint64_t peer, uint64_t length);  // mu_ held
  // Takes a tag for it and hands it to DMA engine 0 (mu_ held).
  void launch(const Queued& q);
  // DMA engine 0: the transfers' packets, in start order, while `send` takes them (mu_ held).
  void pump(SendFn send);
  // The next piece of transfer `slot` into items_ (about a frame): false when it is all cut;
  // *error_id when a read fails.
  bool cut(uint16_t slot, size_t* count, uint16_t* error_id);  // mu_ held
  Tx* tx_by_tag(uint16_t tag);
  void finish(uint16_t slot, uint16_t error_id);  // mu_ held
  void complete(const Completion& c);             // mu_ held
  bool push(const Completion& c);                 // mu_ held; false: the CQ is full
  TargetNic& target_nic(uint32_t nic);            // mu_ held
  struct Answer {
    chip::RdmaReadJob job;
    uint32_t nic = 0;
  };
  void on_response(const wire::DataPacket& p, std::span<const uint8_t> run);
  void on_ack(const wire::DataPacket& p);

  live::Segment& seg_;
  live::NicSlot& nic_;
  uint32_t node_;
  mutable std::mutex mu_;  // everything below
  std::vector<Tx> tx_;
  std::vector<uint16_t> free_;
  live::SegmentAtt own_att_;
  live::SegmentHostMemory own_memory_;
  std::unordered_map<uint64_t, chip::RdmaTarget> targets_;    // by peer: what each sends us
  std::unordered_map<uint64_t, uint64_t> peer_bytes_;         // by peer: bytes of Tx in flight
  std::unordered_map<uint64_t, std::deque<Answer>> answers_;  // by peer: gets to answer
  std::atomic<size_t> answering_{0};                          // gets in answers_
  std::deque<uint16_t> engine_;       // DMA engine 0: transfers being cut, in start order
  std::atomic<size_t> sending_{0};    // transfers in engine_
  std::atomic<bool> stalled_{false};  // the engine's piece found no room at its last pump
  std::unordered_map<uint32_t, std::unique_ptr<TargetNic>> target_nics_;
  std::deque<Completion> waiting_;  // completions that found their CQ full
  std::deque<Queued> queued_;       // transfers waiting to start, in order
  uint64_t next_timeout_check_ = 0;
  std::vector<uint8_t> items_;
  std::vector<uint8_t> run_;  // a run's payload being read
};

}  // namespace galaxy::glex
