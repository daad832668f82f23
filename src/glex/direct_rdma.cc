#include "glex/direct_rdma.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/log.h"
#include "engine/live/daemon.h"

namespace galaxy::glex {

namespace {

// Whether a packet moves a transfer's data or notice into the target (a put's, an immediate's).
bool is_target_write(const wire::DataPacket& p) {
  switch (p.head.kind) {
    case wire::PacketKind::kRdmaWrite:
    case wire::PacketKind::kImmediate:
    case wire::PacketKind::kEvent:
      return true;
    case wire::PacketKind::kMp:
      return (p.head.flags & wire::kDataFlagInTransfer) != 0;
    default:
      return false;
  }
}

}  // namespace

// A NIC's host side as chip::RdmaTarget uses it, in this process: the host's ATT and memory
// port for the NIC the packet arrived at; answers go back on the link it came by.
struct DirectRdma::TargetHost {
  TargetNic& t;
  uint32_t nic;
  ReplyFn reply;
  const chip::AttTable& att() const { return t.att; }
  uint16_t write(uint32_t key, uint64_t vaddr, std::span<const uint8_t> data, uint32_t access) {
    Status st = t.att.translate_pieces(key, vaddr, data.size(), access,
                                       [&](uint64_t phys, uint64_t off, uint64_t n) {
                                         return t.memory.write(phys, data.subspan(off, n));
                                       });
    return st.ok() ? 0 : st.error().id;
  }
  uint16_t read(uint32_t key, uint64_t vaddr, std::span<uint8_t> out, uint32_t access) {
    Status st = t.att.translate_pieces(key, vaddr, out.size(), access,
                                       [&](uint64_t phys, uint64_t off, uint64_t n) {
                                         return t.memory.read(phys, out.subspan(off, n));
                                       });
    return st.ok() ? 0 : st.error().id;
  }
  uint16_t flush() {
    Status st = t.memory.flush();
    return st.ok() ? 0 : st.error().id;
  }
  // Trailing MPs are not sent direct (DirectRdma::start): one here is not this path's.
  bool mp(const wire::DataHead&, std::span<const uint8_t>) { return false; }
  void ack(wire::ChipId dest, uint8_t vp, uint16_t tag, uint16_t error_id, uint64_t bytes) {
    wire::DataPacket a;
    chip::rdma_ack_packet(dest, vp, tag, error_id, bytes, a);
    if (chip::seal_data_packet(a, nic).ok()) reply(a, {}, nic);
  }
  void discard(const Error& why) {
    log::warn(why.id, "a transfer's packet on a direct link discarded: {}", why.message);
  }
  void written(uint64_t) {}
};

DirectRdma::DirectRdma(live::Segment& seg, live::NicSlot& nic, uint32_t node)
    : seg_(seg), nic_(nic), node_(node), own_att_(nic), own_memory_(nic) {}

DirectRdma::Tx* DirectRdma::tx_by_tag(uint16_t tag) {
  const size_t slot = chip::rdma_tag_slot(tag);
  if (slot >= tx_.size()) return nullptr;
  Tx& t = tx_[slot];
  if (!t.used || !chip::rdma_tag_generation_is(tag, t.generation)) return nullptr;
  return &t;
}

bool DirectRdma::room(uint64_t peer, uint64_t length) {
  if (free_.empty() && tx_.size() < chip::kRdmaTagSlots) {
    const size_t old = tx_.size();
    tx_.resize(std::min<size_t>(chip::kRdmaTagSlots, std::max<size_t>(16, old * 2)));
    for (size_t i = tx_.size(); i > old; --i) free_.push_back(static_cast<uint16_t>(i - 1));
  }
  if (free_.empty()) return false;  // every tag in flight
  const auto it = peer_bytes_.find(peer);
  return it == peer_bytes_.end() || it->second == 0 || it->second + length <= kMaxPeerBytes;
}

bool DirectRdma::start(const Request& r, const wire::RdmaDescriptor& d,
                       const live::Forwarded& leaving, uint64_t peer, size_t run_room,
                       SendFn send) {
  std::lock_guard<std::mutex> g(mu_);
  Queued q{r, d, leaving, peer, run_room};
  if (queued_.empty() && room(peer, d.length)) {
    launch(q);
    pump(send);
    return true;
  }
  if (queued_.size() >= kMaxQueued) return false;
  queued_.push_back(q);
  nic_.vps[r.vp].outstanding.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void DirectRdma::launch(const Queued& q) {
  const uint16_t slot = free_.back();
  free_.pop_back();
  Tx& t = tx_[slot];
  t.used = true;
  t.r = q.r;
  t.d = q.d;
  t.peer = q.peer;
  t.leaving = q.leaving;
  t.run_room = q.run_room;
  t.deadline = live::monotonic_ns() + kTimeoutNs;
  t.sent = 0;
  t.data_done = false;
  t.received = 0;
  t.error_id = 0;
  peer_bytes_[q.peer] += q.d.length;
  nic_.vps[q.r.vp].outstanding.fetch_add(1, std::memory_order_relaxed);
  engine_.push_back(slot);
  sending_.fetch_add(1, std::memory_order_relaxed);
}

bool DirectRdma::cut(uint16_t slot, size_t* count, uint16_t* error_id) {
  Tx& t = tx_[slot];
  const wire::RdmaDescriptor& d = t.d;
  const uint16_t tag = chip::rdma_tag(slot, t.generation);
  wire::DataPacket p;
  // 0, or why a packet does not encode (a field out of range: it never leaves, as the NIC's).
  auto add = [&](std::span<const uint8_t> run) -> uint16_t {
    Status st = chip::seal_data_packet(p, node_);
    if (st.ok()) st = live::append_leaving_item(p, t.leaving, &items_, run);
    if (!st.ok()) return st.error().id;
    *count += 1 + chip::rdma_run_packets(p.ext, p.head.bytes, run.size());
    return 0;
  };
  // The source as DMA engine 0 reads it: through this NIC's ATT, as it is now.
  auto read = [&](uint64_t offset, std::span<uint8_t> out) -> uint16_t {
    Status st =
        own_att_.translate_pieces(d.local_key, d.local_address + offset, out.size(),
                                  chip::kAccessNone, [&](uint64_t phys, uint64_t off, uint64_t k) {
                                    return own_memory_.read(phys, out.subspan(off, k));
                                  });
    return st.ok() ? 0 : st.error().id;
  };
  if (d.op == wire::RdmaOp::kRead) {  // a get: its one request
    chip::rdma_read_request_packet(d, t.r.vp, tag, p);
    *error_id = add({});
    return false;
  }
  // A put's or an immediate's data, then its notice; about a frame's worth.
  own_memory_.begin_round();
  own_memory_.set_time(live::monotonic_ns());
  const size_t piece = 4 * (live::kRunItemOverhead + t.run_room);
  while (!t.data_done && items_.size() < piece) {
    run_.resize(t.run_room);
    uint64_t m = 0;
    if ((*error_id = chip::rdma_put_step(d, t.r.vp, tag, t.sent, read, p, run_, &m)) != 0 ||
        (*error_id = add(std::span<const uint8_t>(run_.data(), m))) != 0)
      return false;
    t.data_done = t.sent >= d.length;
  }
  if (!t.data_done) return true;
  if (d.completion != wire::Completion::kNone) {
    chip::rdma_notice_packet(d, t.r.vp, tag, p);
    *error_id = add({});
  }
  return false;
}

// DMA engine 0, as the NIC's (chip::Nic::next_local_packet): one transfer at a time, in start
// order; a piece that the link has no room for waits, and the engine with it.
void DirectRdma::pump(SendFn send) {
  stalled_.store(false, std::memory_order_relaxed);
  while (!engine_.empty()) {
    const uint16_t slot = engine_.front();
    Tx& t = tx_[slot];
    const uint64_t sent = t.sent;
    const bool data_done = t.data_done;
    items_.clear();
    size_t count = 0;
    uint16_t error_id = 0;
    const bool more = cut(slot, &count, &error_id);
    if (error_id != 0) {  // the pieces sent before stay sent, as the NIC's packets do
      finish(slot, error_id);
      continue;
    }
    if (!send(t.peer, t.leaving, &items_, count)) {  // no room: the same piece later
      t.sent = sent;
      t.data_done = data_done;
      stalled_.store(true, std::memory_order_relaxed);
      return;
    }
    t.deadline = live::monotonic_ns() + kTimeoutNs;
    if (more) continue;
    engine_.pop_front();
    sending_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void DirectRdma::finish(uint16_t slot, uint16_t error_id) {
  Tx& t = tx_[slot];
  if (error_id == 0 && t.d.op == wire::RdmaOp::kRead) {  // the data, then the CQ
    Status st = own_memory_.flush();
    if (!st.ok()) error_id = st.error().id;
  }
  const Completion c{t.r, error_id};
  // A transfer that ends while DMA engine 0 still cuts it (its peer gone, a read failed) leaves
  // the engine.
  if (const auto it = std::find(engine_.begin(), engine_.end(), slot); it != engine_.end()) {
    engine_.erase(it);
    sending_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (auto it = peer_bytes_.find(t.peer); it != peer_bytes_.end()) {
    it->second -= std::min<uint64_t>(it->second, t.d.length);
    if (it->second == 0) peer_bytes_.erase(it);
  }
  t.used = false;
  ++t.generation;
  free_.push_back(slot);
  complete(c);
}

// The rule of every descriptor (chip::completes_locally) and the daemon's words for a failure
// (live::rdma_failure). The VP's count of outstanding descriptors, which fences wait on, drops
// at once; a CQ entry that finds its CQ full waits, in order, for its owner to poll (service),
// as the daemon holds its completions back.
void DirectRdma::complete(const Completion& c) {
  const Request& r = c.r;
  live::VpSlot& vp = nic_.vps[r.vp];
  if (chip::completes_locally((r.flags & live::kFlagLocalCq) != 0, c.error_id != 0) &&
      (!waiting_.empty() || !push(c)))
    waiting_.push_back(c);
  vp.outstanding.fetch_sub(1, std::memory_order_release);
  live::futex_wake(&vp.cq.futex);
}

bool DirectRdma::push(const Completion& c) {
  const Request& r = c.r;
  live::VpSlot& vp = nic_.vps[r.vp];
  if (c.error_id == 0)
    return live::push_completion(vp, r.op, live::OpStatus::kSuccess, r.cookie, r.length, 0, "");
  const live::RdmaFailure f = live::rdma_failure(c.error_id, r.op);
  return live::push_completion(vp, r.op, f.status, r.cookie, 0, c.error_id, f.reason);
}

DirectRdma::TargetNic& DirectRdma::target_nic(uint32_t nic) {
  auto& t = target_nics_[nic];
  if (!t) t = std::make_unique<TargetNic>(*seg_.nic_of(nic));
  return *t;
}

void DirectRdma::arrived(const live::TransferArrival& a, uint64_t peer, ReplyFn reply) {
  const wire::DataPacket& p = a.packet;
  std::lock_guard<std::mutex> g(mu_);
  if (p.head.kind == wire::PacketKind::kAck) return on_ack(p);
  if (p.head.kind == wire::PacketKind::kRdmaReadResponse) return on_response(p, a.run);
  TargetNic& t = target_nic(a.nic);
  t.memory.begin_round();
  t.memory.set_time(live::monotonic_ns());
  TargetHost host{t, a.nic, reply};
  chip::RdmaTarget& target = targets_[peer];
  if (is_target_write(p)) {
    (void)target.write(p, host, a.run);
  } else if (p.head.kind == wire::PacketKind::kRdmaReadRequest) {
    if (std::optional<chip::RdmaReadJob> j = target.read_request(p, host)) {
      answers_[peer].push_back({*j, a.nic});
      answering_.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    log::warn(6169, "a packet of kind {} on a direct link is no part of a transfer: dropped",
              static_cast<unsigned>(p.head.kind));
  }
}

// DMA engine 1's work, as the NIC does it (chip::RdmaTarget::answer_step): each get's responses
// in order, a piece at a time.
bool DirectRdma::answer(uint64_t peer, size_t packets, size_t run_room, ReplyFn reply) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = answers_.find(peer);
  if (it == answers_.end()) return false;
  std::deque<Answer>& q = it->second;
  wire::DataPacket p;
  while (!q.empty() && packets > 0) {
    Answer& a = q.front();
    chip::RdmaReadJob& j = a.job;
    TargetNic& t = target_nic(a.nic);
    t.memory.begin_round();
    t.memory.set_time(live::monotonic_ns());
    TargetHost host{t, a.nic, reply};
    bool done = false;
    while (!done && packets > 0) {
      run_.resize(std::min<size_t>(run_room, (packets - 1) * wire::kDataPacketBytes));
      uint64_t m = 0;
      if (!chip::RdmaTarget::answer_step(j, host, p, run_, &m)) {  // acked with the failure
        done = true;
        break;
      }
      done = j.sent >= j.length;
      const std::span<const uint8_t> run(run_.data(), m);
      if (chip::seal_data_packet(p, static_cast<wire::ChipId>(a.nic)).ok()) reply(p, run, a.nic);
      packets -= std::min<size_t>(packets, 1 + chip::rdma_run_packets(p.ext, p.head.bytes, m));
    }
    if (!done) break;
    q.pop_front();
    answering_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (q.empty()) {
    answers_.erase(it);
    return false;
  }
  return true;
}

void DirectRdma::on_response(const wire::DataPacket& p, std::span<const uint8_t> run) {
  Tx* t = tx_by_tag(p.head.tag);
  const uint64_t packets = 1 + chip::rdma_run_packets(p.ext, p.head.bytes, run.size());
  const uint64_t total = t ? wire::packets_for(t->d.local_address, t->d.length) : 0;
  if (!t || !chip::rdma_response_answers(t->d, p, run.size()) || t->received + packets > total) {
    log::warn(6185,
              "a read response (tag {:#x}, from node {}, {} bytes and a run of {} at offset {}) "
              "on a direct link answers no get of this process: dropped",
              p.head.tag, p.head.src_node, p.head.bytes, run.size(), p.ext.offset);
    return;
  }
  // DMA engine 2 writes the payload where the get's local side says (the run follows at once).
  auto write = [&](uint64_t offset, std::span<const uint8_t> data) {
    Status st =
        own_att_.translate_pieces(t->d.local_key, t->d.local_address + offset, data.size(),
                                  chip::kAccessNone, [&](uint64_t phys, uint64_t off, uint64_t n) {
                                    return own_memory_.write(phys, data.subspan(off, n));
                                  });
    if (!st.ok()) t->error_id = st.error().id;
  };
  if (t->error_id == 0) write(p.ext.offset, p.data());
  if (t->error_id == 0 && !run.empty()) write(uint64_t{p.ext.offset} + p.head.bytes, run);
  t->deadline = live::monotonic_ns() + kTimeoutNs;  // it moves
  t->received += packets;
  if (t->received == total) finish(chip::rdma_tag_slot(p.head.tag), t->error_id);
}

void DirectRdma::on_ack(const wire::DataPacket& p) {
  Tx* t = tx_by_tag(p.head.tag);
  const uint16_t err = static_cast<uint16_t>(p.ext.offset);
  if (!t || p.head.src_node != t->d.remote_node || p.ext.offset > 0xFFFF ||
      (t->d.op == wire::RdmaOp::kRead && err == 0)) {
    log::warn(6213,
              "an ack (tag {:#x}, from node {}) on a direct link for no transfer of this "
              "process: dropped",
              p.head.tag, p.head.src_node);
    return;
  }
  finish(chip::rdma_tag_slot(p.head.tag), err);
}

void DirectRdma::peer_gone(uint64_t peer) {
  std::lock_guard<std::mutex> g(mu_);
  targets_.erase(peer);
  for (auto it = queued_.begin(); it != queued_.end();) {
    if (it->peer != peer) {
      ++it;
      continue;
    }
    complete({it->r, live::kErrDirectPeerGone});  // counted outstanding when it queued
    it = queued_.erase(it);
  }
  if (auto it = answers_.find(peer); it != answers_.end()) {
    answering_.fetch_sub(it->second.size(), std::memory_order_relaxed);
    answers_.erase(it);
  }
  for (size_t slot = 0; slot < tx_.size(); ++slot)
    if (tx_[slot].used && tx_[slot].peer == peer)
      finish(static_cast<uint16_t>(slot), live::kErrDirectPeerGone);
}

void DirectRdma::service(uint64_t now, SendFn send) {
  std::lock_guard<std::mutex> g(mu_);
  while (!waiting_.empty() && push(waiting_.front())) waiting_.pop_front();
  pump(send);
  while (!queued_.empty() && room(queued_.front().peer, queued_.front().d.length)) {
    const Queued q = queued_.front();
    queued_.pop_front();
    nic_.vps[q.r.vp].outstanding.fetch_sub(1, std::memory_order_relaxed);  // launch counts it
    launch(q);
  }
  pump(send);
  if (now < next_timeout_check_) return;
  next_timeout_check_ = now + 100'000'000;
  for (size_t slot = 0; slot < tx_.size(); ++slot) {
    if (!tx_[slot].used || now <= tx_[slot].deadline) continue;
    // One that waits for DMA engine 0 behind another has not started: its wait is not yet.
    if (engine_.size() > 1 &&
        std::find(engine_.begin() + 1, engine_.end(), slot) != engine_.end()) {
      tx_[slot].deadline = now + kTimeoutNs;
      continue;
    }
    finish(static_cast<uint16_t>(slot), live::kErrDirectNoAnswer);
  }
}

}  // namespace galaxy::glex
