// VIA work queues: posting, the progress engine (packets in, RDMA completions in, descriptors
// started in order), completion in order, Done and Wait (docs/via.md "Work queues").
#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "via/via_internal.h"

namespace galaxy::via {
namespace {

constexpr uint64_t kCookieRecv = uint64_t{1} << 63;

bool reliable(const via_vi* vi) {
  return vi->attrs.ReliabilityLevel != VIP_SERVICE_UNRELIABLE;
}

// Segment i of a descriptor: they follow the control segment, as many as SegCount (DS[2] in
// the type is only the common case).
const VIP_DESCRIPTOR_SEGMENT& segment(const VIP_DESCRIPTOR* d, uint32_t i) {
  const auto* first = reinterpret_cast<const VIP_DESCRIPTOR_SEGMENT*>(
      reinterpret_cast<const uint8_t*>(d) + offsetof(VIP_DESCRIPTOR, DS));
  return first[i];
}

Work* find(WorkQueue& q, uint64_t seq) {
  if (seq < q.head || seq >= q.tail) return nullptr;
  Work& w = q.at(seq);
  return w.seq == seq ? &w : nullptr;
}

void enqueue(WorkQueue& q, VIP_DESCRIPTOR* d) {
  Work w;
  w.d = d;
  w.seq = q.next_seq++;
  if (q.overflow.empty() && !q.ring_full()) {
    q.at(q.tail) = std::move(w);
    ++q.tail;
  } else {
    q.overflow.push_back(std::move(w));
  }
}

void refill(WorkQueue& q) {
  while (!q.overflow.empty() && !q.ring_full()) {
    q.at(q.tail) = std::move(q.overflow.front());
    q.overflow.pop_front();
    ++q.tail;
  }
}

void finish(Work& w, uint32_t status) {
  w.finished = true;
  w.status |= status;
}

bool ready(const Work& w) {
  return w.started && w.issued == w.ops.size() && w.completed == w.ops.size() && !w.awaiting_fin &&
         !w.awaiting_ack && !w.tail && w.mps_to_leave == 0;
}

void maybe_finish(Work& w) {
  if (!w.finished && ready(w)) w.finished = true;
}

// DONE is written last, after the length and immediate, so a poller of Status sees them.
void publish(via_vi* vi, WorkQueue& q, bool recv) {
  while (q.published < q.tail && q.at(q.published).finished) {
    Work& w = q.at(q.published);
    w.d->CS.Length = w.length;
    if (w.status & VIP_STATUS_IMMEDIATE) w.d->CS.ImmediateData = w.imm;
    std::atomic_thread_fence(std::memory_order_release);
    w.d->CS.Status = w.status | VIP_STATUS_DONE;
    ++q.published;
    // A CQ never drops an entry: one that finds EntryCount reached still waits its turn.
    if (via_cq* cq = recv ? vi->recv_cq : vi->send_cq) cq->entries.emplace_back(vi, recv);
  }
}

// A local data segment: registered by this NIC under the VI's tag, and inside its region.
const Region* check_local(via_vi* vi, const VIP_DATA_SEGMENT& s) {
  const Region* r = vi->nic->region(s.Handle);
  if (!r || r->ptag != vi->attrs.Ptag) return nullptr;
  const uintptr_t a = static_cast<uintptr_t>(s.Data.AddressBits);
  if (a < r->addr || a - r->addr > r->len || s.Length > r->len - (a - r->addr)) return nullptr;
  return r;
}

void send_now_or_queue(via_vi* vi, OutMp m);

}  // namespace

uint64_t now_ms(Nic* nic) {
  return glex_time_ps(nic->dev) / 1000000000ull;
}

void flush(via_vi* vi) {
  for (WorkQueue* q : {&vi->sendq, &vi->recvq}) {
    for (uint64_t i = q->published; i < q->tail; ++i)
      if (!q->at(i).finished) finish(q->at(i), VIP_STATUS_DESC_FLUSHED_ERROR);
    for (Work& w : q->overflow) finish(w, VIP_STATUS_DESC_FLUSHED_ERROR);
    q->next = q->tail;
  }
  vi->out.clear();
  vi->assembling = UINT64_MAX;
  vi->skip_more = 0;
  vi->filling = UINT64_MAX;
  vi->fill_skip = 0;
  publish(vi, vi->sendq, false);
  publish(vi, vi->recvq, true);
}

void end_connection(via_vi* vi, Kind why) {
  if (vi->state != VIP_STATE_CONNECTED) return;
  Header h{static_cast<uint8_t>(why), 0, 0, vi->conn_id};
  (void)glex_send_mp(vi->ep, vi->peer, &h, sizeof h, 0);
}

void enter_error(via_vi* vi, VIP_ERROR_CODE code, bool tell_peer) {
  if (vi->state == VIP_STATE_ERROR) return;
  if (tell_peer) end_connection(vi, Kind::kError);
  vi->state = VIP_STATE_ERROR;
  flush(vi);
  vi->nic->report(vi, nullptr, VIP_RESOURCE_VI, code);
}

void to_idle(via_vi* vi) {
  end_connection(vi, Kind::kDisconnect);
  vi->state = VIP_STATE_IDLE;
  flush(vi);
  vi->peer = 0;
  vi->peer_secret = 0;
}

namespace {

// Marks the send an MP finished when it left.
void left(via_vi* vi, const OutMp& m) {
  ++vi->mps_unpolled;
  if (!m.finishes_send) return;
  if (Work* w = find(vi->sendq, *m.finishes_send)) {
    if (w->mps_to_leave) --w->mps_to_leave;
    maybe_finish(*w);
  }
}

// One try; false when the target has no room yet (the MP stays first in line).
bool try_send(via_vi* vi, const OutMp& m) {
  const glex_ret_t r = glex_send_mp(vi->ep, vi->peer, m.bytes.data(),
                                    static_cast<uint32_t>(m.bytes.size()), m.flags);
  if (r == GLEX_SUCCESS) {
    left(vi, m);
    return true;
  }
  if (r == GLEX_BUSY || r == GLEX_NO_RESOURCE) return false;
  enter_error(vi, VIP_ERROR_CONN_LOST, false);  // the peer is gone or unreachable
  return true;
}

// Connected, and the peer has not ended the connection: work may start.
bool open(const via_vi* vi) {
  return vi->state == VIP_STATE_CONNECTED && !vi->peer_ended;
}

void send_now_or_queue(via_vi* vi, OutMp m) {
  if (vi->peer_ended) return;  // nobody reads it: the send it would finish is flushed
  if (vi->out.empty() && try_send(vi, m)) return;
  if (vi->state == VIP_STATE_CONNECTED) vi->out.push_back(std::move(m));
}

void drain_out(via_vi* vi) {
  while (!vi->out.empty() && open(vi)) {
    if (!try_send(vi, vi->out.front())) return;
    if (!vi->out.empty()) vi->out.pop_front();
  }
}

// Starts RDMA pieces in order until the NIC's queue is full.
void issue_ops(via_vi* vi, Work& w, bool recv) {
  while (w.issued < w.ops.size() && open(vi)) {
    const Work::Op& o = w.ops[w.issued];
    glex_rdma_req r{};
    r.target = vi->peer;
    r.op = o.glex_op;
    r.flags = GLEX_FLAG_LOCAL_CQ;
    r.local_addr = o.local;
    r.local_mh = o.local_mh;
    r.len = o.len;
    r.remote_addr = o.remote;
    r.remote_mh = o.remote_mh;
    r.cookie = (recv ? kCookieRecv : 0) | w.seq;
    const glex_ret_t g = glex_rdma(vi->ep, &r);
    if (g == GLEX_BUSY || g == GLEX_NO_RESOURCE) return;
    if (g != GLEX_SUCCESS) {  // refused before it left: nothing more of this descriptor starts
      w.status |= VIP_STATUS_PROTECTION_ERROR;
      w.ops.resize(w.issued);
      w.tail.reset();
      break;
    }
    ++w.issued;
    ++vi->ops_in_flight;
  }
  if (w.tail && w.issued == w.ops.size()) {
    // Fenced: the NIC starts it once the data before it are written.
    OutMp m = std::move(*w.tail);
    w.tail.reset();
    m.flags = GLEX_FLAG_FENCE;
    if (w.ops.empty()) {
      ++w.mps_to_leave;
      m.finishes_send = w.seq;
    }
    send_now_or_queue(vi, std::move(m));
  }
  maybe_finish(w);
}

// A send's segments, one after another, into `dst`.
void gather(const std::vector<std::pair<const VIP_DATA_SEGMENT*, const Region*>>& segs,
            uint8_t* dst) {
  for (auto& [s, r] : segs) {
    std::memcpy(dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(s->Data.AddressBits)),
                s->Length);
    dst += s->Length;
  }
}

// Checks a send descriptor and turns it into MPs and RDMA pieces.
void start_send(via_vi* vi, Work& w) {
  w.started = true;
  VIP_DESCRIPTOR* d = w.d;
  if (vi->state != VIP_STATE_CONNECTED) return finish(w, VIP_STATUS_DESC_FLUSHED_ERROR);
  const uint32_t op = d->CS.Control & VIP_CONTROL_OP_MASK;
  const bool imm = d->CS.Control & VIP_CONTROL_IMMEDIATE;
  const bool rdma = op == VIP_CONTROL_OP_RDMAWRITE || op == VIP_CONTROL_OP_RDMAREAD;
  const uint32_t first = rdma ? 1 : 0;
  auto error = [&](uint32_t status, VIP_ERROR_CODE code) {
    finish(w, status);
    if (reliable(vi)) {
      vi->nic->report(vi, d, VIP_RESOURCE_DESCRIPTOR, code);
      enter_error(vi, VIP_ERROR_CONN_LOST, true);
    }
  };
  w.status = op == VIP_CONTROL_OP_RDMAWRITE  ? VIP_STATUS_OP_RDMA_WRITE
             : op == VIP_CONTROL_OP_RDMAREAD ? VIP_STATUS_OP_RDMA_READ
                                             : VIP_STATUS_OP_SEND;
  if ((d->CS.Control & VIP_CONTROL_RESERVED) || op == VIP_CONTROL_OP_RESERVED ||
      d->CS.SegCount > kMaxSegments || d->CS.SegCount < first ||
      (op == VIP_CONTROL_OP_RDMAREAD && imm))
    return error(VIP_STATUS_FORMAT_ERROR, VIP_ERROR_POST_DESC);
  std::vector<std::pair<const VIP_DATA_SEGMENT*, const Region*>> segs;
  uint64_t total = 0;
  for (uint32_t i = first; i < d->CS.SegCount; ++i) {
    const VIP_DATA_SEGMENT& s = segment(d, i).Local;
    const Region* r = check_local(vi, s);
    if (!r) return error(VIP_STATUS_PROTECTION_ERROR, VIP_ERROR_POST_DESC);
    segs.emplace_back(&s, r);
    total += s.Length;
  }
  if (total > vi->attrs.MaxTransferSize) return error(VIP_STATUS_LENGTH_ERROR, VIP_ERROR_POST_DESC);
  w.length = static_cast<uint32_t>(total);
  w.imm = d->CS.ImmediateData;
  if (rdma) {
    const VIP_ADDRESS_SEGMENT& remote = segment(d, 0).Remote;
    const bool allowed = op == VIP_CONTROL_OP_RDMAWRITE ? vi->peer_attrs.EnableRdmaWrite
                                                        : vi->peer_attrs.EnableRdmaRead;
    if (!allowed)
      return error(VIP_STATUS_RDMA_PROT_ERROR,
                   op == VIP_CONTROL_OP_RDMAWRITE ? VIP_ERROR_RDMAW_PROT : VIP_ERROR_RDMAR_PROT);
    // The peer's handle, unscrambled with its VI's tag secret: the key its NIC checks.
    const glex_mem_handle_t rmh =
        glex_mem_handle_of_key(vi->nic->dev, remote.Handle ^ vi->peer_secret);
    uint64_t at = remote.Data.AddressBits;
    for (auto& [s, r] : segs) {
      if (s->Length)
        w.ops.push_back({op == VIP_CONTROL_OP_RDMAWRITE ? uint32_t{GLEX_OP_PUT} : GLEX_OP_GET,
                         reinterpret_cast<void*>(static_cast<uintptr_t>(s->Data.AddressBits)),
                         r->own_mh, at, rmh, s->Length});
      at += s->Length;
    }
    if (imm) {
      Header t{static_cast<uint8_t>(Kind::kWriteImm), kFlagImmediate, 0, w.imm};
      OutMp m;
      m.bytes.resize(sizeof t + 4);
      std::memcpy(m.bytes.data(), &t, sizeof t);
      std::memcpy(m.bytes.data() + sizeof t, &w.length, 4);
      w.tail = std::move(m);
    }
    return;
  }
  Header h{static_cast<uint8_t>(Kind::kEager), static_cast<uint8_t>(imm ? kFlagImmediate : 0), 0,
           w.imm};
  if (total <= kEagerMax) {
    OutMp m;
    m.bytes.resize(sizeof h + total);
    std::memcpy(m.bytes.data(), &h, sizeof h);
    gather(segs, m.bytes.data() + sizeof h);
    if (vi->attrs.ReliabilityLevel == VIP_SERVICE_RELIABLE_RECEPTION) {
      w.awaiting_ack = true;
    } else {
      ++w.mps_to_leave;
      m.finishes_send = w.seq;
    }
    return send_now_or_queue(vi, std::move(m));
  }
  if (total <= kBounceSlot && vi->peer_bounce && vi->slots_used - vi->slots_freed < kBounceSlots) {
    // Into the next slot of the receiver's bounce ring, then a fenced MP naming the slot.
    const auto slot = static_cast<uint16_t>(vi->slots_used++ % kBounceSlots);
    uint64_t at = vi->peer_bounce + uint64_t{slot} * kBounceSlot;
    for (auto& [s, r] : segs) {
      if (s->Length)
        w.ops.push_back({GLEX_OP_PUT,
                         reinterpret_cast<void*>(static_cast<uintptr_t>(s->Data.AddressBits)),
                         r->own_mh, at, vi->peer_bounce_mh, s->Length});
      at += s->Length;
    }
    h.kind = static_cast<uint8_t>(Kind::kBounce);
    h.aux = slot;
    OutMp m;
    m.bytes.resize(sizeof h + 4);
    const uint32_t len32 = static_cast<uint32_t>(total);
    std::memcpy(m.bytes.data(), &h, sizeof h);
    std::memcpy(m.bytes.data() + sizeof h, &len32, 4);
    w.tail = std::move(m);
    if (vi->attrs.ReliabilityLevel == VIP_SERVICE_RELIABLE_RECEPTION) w.awaiting_ack = true;
    return;
  }
  if (total <= kFragMax) {
    // A train of MPs: the first carries the length. In order on the VP pair, so the receiver
    // fills its receive as they come.
    std::vector<uint8_t> all(4 + total);
    const uint32_t len32 = static_cast<uint32_t>(total);
    std::memcpy(all.data(), &len32, 4);
    gather(segs, all.data() + 4);
    h.kind = static_cast<uint8_t>(Kind::kFrag);
    for (size_t off = 0; off < all.size();) {
      const size_t n = std::min<size_t>(kEagerMax, all.size() - off);
      OutMp m;
      m.bytes.resize(sizeof h + n);
      std::memcpy(m.bytes.data(), &h, sizeof h);
      std::memcpy(m.bytes.data() + sizeof h, all.data() + off, n);
      off += n;
      if (off < all.size()) m.flags |= GLEX_FLAG_MORE;  // the train shares datagrams
      h.kind = static_cast<uint8_t>(Kind::kFragMore);
      if (off == all.size() && vi->attrs.ReliabilityLevel != VIP_SERVICE_RELIABLE_RECEPTION) {
        ++w.mps_to_leave;
        m.finishes_send = w.seq;
      }
      send_now_or_queue(vi, std::move(m));
      if (vi->state != VIP_STATE_CONNECTED) return;
    }
    if (vi->attrs.ReliabilityLevel == VIP_SERVICE_RELIABLE_RECEPTION) w.awaiting_ack = true;
    return;
  }
  // Rendezvous: the receiver reads the segments from this NIC's own registration and answers
  // with a kFin; until then the buffers are the NIC's.
  std::vector<WireSegment> wire;
  for (auto& [s, r] : segs)
    if (s->Length)
      wire.push_back({s->Data.AddressBits, s->Length, glex_mem_key(vi->nic->dev, r->own_mh)});
  h.kind = static_cast<uint8_t>(Kind::kRts);
  h.aux = static_cast<uint16_t>(wire.size());
  w.awaiting_fin = true;
  size_t done = 0;
  for (bool first_mp = true; first_mp || done < wire.size(); first_mp = false) {
    const size_t n =
        std::min<size_t>(wire.size() - done, first_mp ? kRtsFirstSegments : kRtsMoreSegments);
    OutMp m;
    m.bytes.resize(sizeof h + (first_mp ? 8 : 0) + n * sizeof(WireSegment));
    Header hh = h;
    if (!first_mp) hh.kind = static_cast<uint8_t>(Kind::kRtsMore);
    std::memcpy(m.bytes.data(), &hh, sizeof hh);
    size_t at = sizeof hh;
    if (first_mp) {
      const uint32_t seq = static_cast<uint32_t>(w.seq), len = w.length;
      std::memcpy(m.bytes.data() + at, &seq, 4);
      std::memcpy(m.bytes.data() + at + 4, &len, 4);
      at += 8;
    }
    std::memcpy(m.bytes.data() + at, wire.data() + done, n * sizeof(WireSegment));
    done += n;
    send_now_or_queue(vi, std::move(m));
    if (vi->state != VIP_STATE_CONNECTED) return;
  }
}

void issue_sends(via_vi* vi) {
  WorkQueue& q = vi->sendq;
  while (q.next < q.tail && open(vi)) {
    Work& w = q.at(q.next);
    if (w.finished) {  // flushed
      ++q.next;
      continue;
    }
    if (!w.started) {
      // The queue fence: start only when everything before it on this queue is complete.
      if ((w.d->CS.Control & VIP_CONTROL_QFENCE) && q.published < q.next) {
        publish(vi, q, false);
        if (q.published < q.next) return;
      }
      start_send(vi, w);
      if (vi->state != VIP_STATE_CONNECTED) return;
    }
    issue_ops(vi, w, false);
    if (w.issued < w.ops.size() || !vi->out.empty()) return;  // the NIC is full: later
    ++q.next;
  }
}

void issue_recv_ops(via_vi* vi) {
  WorkQueue& q = vi->recvq;
  for (uint64_t i = q.published; i < q.next && open(vi); ++i) {
    Work& w = q.at(i);
    if (!w.finished && w.issued < w.ops.size()) {
      issue_ops(vi, w, true);
      if (w.issued < w.ops.size()) return;
    }
  }
}

void send_control(via_vi* vi, Kind kind, uint16_t aux, const void* body, size_t len) {
  Header h{static_cast<uint8_t>(kind), 0, aux, 0};
  OutMp m;
  m.bytes.resize(sizeof h + len);
  std::memcpy(m.bytes.data(), &h, sizeof h);
  if (len) std::memcpy(m.bytes.data() + sizeof h, body, len);
  send_now_or_queue(vi, std::move(m));
}

void send_fin(via_vi* vi, uint32_t seq, Reason why) {
  send_control(vi, Kind::kFin, static_cast<uint16_t>(why), &seq, 4);
}

// The next posted receive, or what the reliability level says when there is none.
Work* match(via_vi* vi) {
  WorkQueue& q = vi->recvq;
  refill(q);
  while (q.next < q.tail && q.at(q.next).finished) ++q.next;  // flushed
  if (q.next < q.tail) return &q.at(q.next++);
  ++vi->nic->dropped;
  vi->nic->report(vi, nullptr, VIP_RESOURCE_VI, VIP_ERROR_RECVQ_EMPTY);
  if (reliable(vi)) enter_error(vi, VIP_ERROR_CONN_LOST, true);
  return nullptr;
}

// A receive's segments as pieces the NIC writes; nullopt: a segment is not this VI's memory.
std::optional<std::vector<std::pair<const VIP_DATA_SEGMENT*, const Region*>>> receive_segments(
    via_vi* vi, const Work& w, uint64_t* room) {
  std::vector<std::pair<const VIP_DATA_SEGMENT*, const Region*>> out;
  *room = 0;
  if (w.d->CS.SegCount > kMaxSegments) return std::nullopt;
  for (uint32_t i = 0; i < w.d->CS.SegCount; ++i) {
    const VIP_DATA_SEGMENT& s = segment(w.d, i).Local;
    const Region* r = check_local(vi, s);
    if (!r) return std::nullopt;
    out.emplace_back(&s, r);
    *room += s.Length;
  }
  return out;
}

// A receive that cannot take its message: its error, the peer told, the connection broken
// where the level is reliable.
void refuse(via_vi* vi, Work& r, uint32_t status, Reason why, std::optional<uint32_t> fin_seq) {
  finish(r, status);
  if (fin_seq) send_fin(vi, *fin_seq, why);
  if (reliable(vi)) enter_error(vi, VIP_ERROR_CONN_LOST, true);
}

// A receive matched to a message: its kind and immediate data, as the header says.
void begin(Work& r, const Header& h) {
  r.started = true;
  r.status = VIP_STATUS_OP_RECEIVE | ((h.flags & kFlagImmediate) ? VIP_STATUS_IMMEDIATE : 0);
  r.imm = h.imm;
}

// `len` bytes into a receive's segments from byte `at` of the message on; what it copied.
size_t scatter(const std::vector<std::pair<const VIP_DATA_SEGMENT*, const Region*>>& segs,
               size_t at, const uint8_t* src, size_t len) {
  size_t seg_start = 0, done = 0;
  for (auto& [s, reg] : segs) {
    const size_t end = seg_start + s->Length;
    if (at + done < end && done < len) {
      const size_t in = at + done - seg_start;
      const size_t n = std::min<size_t>(s->Length - in, len - done);
      std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(s->Data.AddressBits + in)),
                  src + done, n);
      done += n;
    }
    seg_start = end;
  }
  return done;
}

// A receive complete with `len` bytes; reliable reception tells the sender it is placed.
void received(via_vi* vi, Work& r, uint32_t len) {
  r.length = len;
  finish(r, 0);
  if (vi->attrs.ReliabilityLevel == VIP_SERVICE_RELIABLE_RECEPTION)
    send_control(vi, Kind::kAck, 0, nullptr, 0);
}

// A whole message (an MP's payload or a bounce slot) into the next posted receive.
void place(via_vi* vi, const Header& h, const uint8_t* data, size_t len) {
  Work* r = match(vi);
  if (!r) return;
  begin(*r, h);
  uint64_t room = 0;
  auto segs = receive_segments(vi, *r, &room);
  if (!segs) return refuse(vi, *r, VIP_STATUS_PROTECTION_ERROR, Reason::kProtection, {});
  if (room < len) return refuse(vi, *r, VIP_STATUS_LENGTH_ERROR, Reason::kLength, {});
  scatter(*segs, 0, data, len);
  received(vi, *r, static_cast<uint32_t>(len));
}

// A bounce slot emptied: handed back to the sender in batches.
void empty_slot(via_vi* vi) {
  if (++vi->slots_emptied - vi->credit_sent < kCreditBatch) return;
  vi->credit_sent = vi->slots_emptied;
  send_control(vi, Kind::kCredit, 0, &vi->slots_emptied, 4);
}

void on_bounce(via_vi* vi, const Header& h, const uint8_t* body, size_t len) {
  uint32_t total = 0;
  if (len < 4 || h.aux >= kBounceSlots || !vi->bounce) return void(++vi->nic->dropped);
  std::memcpy(&total, body, 4);
  if (total > kBounceSlot) return void(++vi->nic->dropped);
  const uint8_t* data = static_cast<const uint8_t*>(vi->bounce) + uint64_t{h.aux} * kBounceSlot;
  place(vi, h, data, total);
  if (vi->state == VIP_STATE_CONNECTED) empty_slot(vi);
}

// Bytes of a kFrag train into the receive being filled.
void fill(via_vi* vi, const uint8_t* body, size_t len) {
  if (vi->fill_skip) {  // a train that matched no receive
    vi->fill_skip -= static_cast<uint32_t>(std::min<size_t>(vi->fill_skip, len));
    return;
  }
  Work* r = find(vi->recvq, vi->filling);
  if (!r) return;
  len = std::min<size_t>(len, vi->fill_total - vi->fill_at);
  uint64_t room = 0;
  auto segs = receive_segments(vi, *r, &room);  // checked at the train's first MP
  if (!segs) return;
  vi->fill_at += static_cast<uint32_t>(scatter(*segs, vi->fill_at, body, len));
  if (vi->fill_at < vi->fill_total) return;
  vi->filling = UINT64_MAX;
  received(vi, *r, vi->fill_total);
}

void on_frag(via_vi* vi, const Header& h, const uint8_t* body, size_t len) {
  if (len < 4) return;
  uint32_t total;
  std::memcpy(&total, body, 4);
  body += 4;
  len -= 4;
  Work* r = match(vi);
  if (!r) {
    vi->fill_skip = total;
    return fill(vi, body, len);
  }
  begin(*r, h);
  uint64_t room = 0;
  auto segs = receive_segments(vi, *r, &room);
  if (!segs || room < total) {
    refuse(vi, *r, !segs ? VIP_STATUS_PROTECTION_ERROR : VIP_STATUS_LENGTH_ERROR,
           !segs ? Reason::kProtection : Reason::kLength, {});
    vi->fill_skip = total;
    return fill(vi, body, len);
  }
  vi->filling = r->seq;
  vi->fill_at = 0;
  vi->fill_total = total;
  fill(vi, body, len);
}

// A kRts whose segments are all in: the receive reads them from the sender.
void pull(via_vi* vi, Work& r) {
  uint64_t room = 0;
  auto segs = receive_segments(vi, r, &room);
  if (!segs) return refuse(vi, r, VIP_STATUS_PROTECTION_ERROR, Reason::kProtection, r.rts_seq);
  if (room < r.rts_len) return refuse(vi, r, VIP_STATUS_LENGTH_ERROR, Reason::kLength, r.rts_seq);
  size_t si = 0, soff = 0;
  for (auto& [s, reg] : *segs) {
    uint64_t doff = 0;
    while (doff < s->Length && si < r.rts.size()) {
      const WireSegment& src = r.rts[si];
      const uint64_t n = std::min<uint64_t>(s->Length - doff, src.len - soff);
      r.ops.push_back(
          {GLEX_OP_GET, reinterpret_cast<void*>(static_cast<uintptr_t>(s->Data.AddressBits + doff)),
           reg->own_mh, src.addr + soff, glex_mem_handle_of_key(vi->nic->dev, src.key), n});
      doff += n;
      soff += n;
      if (soff == src.len) ++si, soff = 0;
    }
  }
  r.length = r.rts_len;
  issue_ops(vi, r, true);
}

void add_segments(via_vi* vi, Work& r, const uint8_t* p, size_t bytes) {
  const size_t n = std::min<size_t>(bytes / sizeof(WireSegment), r.rts_segments - r.rts.size());
  for (size_t i = 0; i < n; ++i) {
    WireSegment s;
    std::memcpy(&s, p + i * sizeof s, sizeof s);
    r.rts.push_back(s);
  }
  if (r.rts.size() == r.rts_segments) {
    vi->assembling = UINT64_MAX;
    pull(vi, r);
  }
}

void on_rts(via_vi* vi, const Header& h, const uint8_t* body, size_t len) {
  if (len < 8) return;
  uint32_t seq, total;
  std::memcpy(&seq, body, 4);
  std::memcpy(&total, body + 4, 4);
  const uint32_t nseg = h.aux;
  const uint32_t here = std::min<uint32_t>(nseg, kRtsFirstSegments);
  Work* r = match(vi);
  if (!r) {
    vi->skip_more = nseg - here;
    if (vi->state == VIP_STATE_CONNECTED) send_fin(vi, seq, Reason::kRecvQueueEmpty);
    return;
  }
  begin(*r, h);
  r->rts_seq = seq;
  r->rts_len = total;
  r->rts_segments = nseg;
  r->awaiting_fin = false;
  vi->assembling = r->seq;
  add_segments(vi, *r, body + 8, len - 8);
}

void on_fin(via_vi* vi, const Header& h, const uint8_t* body, size_t len) {
  if (len < 4) return;
  uint32_t seq;
  std::memcpy(&seq, body, 4);
  WorkQueue& q = vi->sendq;
  // The sequence carries the low 32 bits; the send is among those in the ring.
  for (uint64_t i = q.head; i < q.tail; ++i) {
    Work& w = q.at(i);
    if (static_cast<uint32_t>(w.seq) != seq || !w.awaiting_fin) continue;
    w.awaiting_fin = false;
    const auto why = static_cast<Reason>(h.aux);
    if (why == Reason::kLength || why == Reason::kProtection)
      w.status |= VIP_STATUS_REMOTE_DESC_ERROR;
    else if (why == Reason::kTransport)
      w.status |= VIP_STATUS_TRANSPORT_ERROR;
    maybe_finish(w);
    return;
  }
}

void on_ack(via_vi* vi) {
  WorkQueue& q = vi->sendq;
  for (uint64_t i = q.head; i < q.tail; ++i) {
    Work& w = q.at(i);
    if (!w.awaiting_ack) continue;
    w.awaiting_ack = false;
    maybe_finish(w);
    return;
  }
}

void on_write_imm(via_vi* vi, const Header& h, const uint8_t* body, size_t len) {
  Work* r = match(vi);
  if (!r) return;
  r->started = true;
  r->status = VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE;
  r->imm = h.imm;
  if (len >= 4) std::memcpy(&r->length, body, 4);
  finish(*r, 0);
}

void on_peer_end(via_vi* vi);

void handle_mp(via_vi* vi, const glex_mp& mp) {
  Header h;
  if (mp.len < sizeof h) {
    ++vi->nic->dropped;
    return;
  }
  std::memcpy(&h, mp.data, sizeof h);
  const auto kind = static_cast<Kind>(h.kind);
  if (kind == Kind::kConnAccept || kind == Kind::kConnReject || kind == Kind::kPeerAccept)
    return handle_connection_mp(vi, mp);
  if (vi->state != VIP_STATE_CONNECTED || mp.src != vi->peer) {
    ++vi->nic->dropped;  // from no peer of this VI: an earlier connection's, or a stranger's
    return;
  }
  const uint8_t* body = mp.data + sizeof h;
  const size_t len = mp.len - sizeof h;
  switch (kind) {
    case Kind::kEager:
      return place(vi, h, body, len);
    case Kind::kFrag:
      return on_frag(vi, h, body, len);
    case Kind::kBounce:
      return on_bounce(vi, h, body, len);
    case Kind::kCredit:
      if (len >= 4) {
        uint32_t emptied;
        std::memcpy(&emptied, body, 4);
        vi->slots_freed += static_cast<uint32_t>(emptied - static_cast<uint32_t>(vi->slots_freed));
      }
      return;
    case Kind::kFragMore:
      return fill(vi, body, len);
    case Kind::kRts:
      return on_rts(vi, h, body, len);
    case Kind::kRtsMore:
      if (vi->skip_more) {
        vi->skip_more -= std::min<uint32_t>(vi->skip_more, kRtsMoreSegments);
      } else if (Work* r = find(vi->recvq, vi->assembling)) {
        add_segments(vi, *r, body, len);
      }
      return;
    case Kind::kFin:
      return on_fin(vi, h, body, len);
    case Kind::kAck:
      return on_ack(vi);
    case Kind::kWriteImm:
      return on_write_imm(vi, h, body, len);
    case Kind::kDisconnect:
    case Kind::kError:
      // Only this connection's: a VP reused by a later connection between the same two VPs
      // may still meet the end of an earlier one.
      if (h.imm != vi->conn_id) return void(++vi->nic->dropped);
      return on_peer_end(vi);
    default:
      ++vi->nic->dropped;
      return;
  }
}

void take_cqe(via_vi* vi, const glex_cq_entry& e) {
  if (e.op == GLEX_OP_MP) {  // an MP refused on its way: the peer is gone
    if (e.status == GLEX_SUCCESS) return;
    if (vi->state == VIP_STATE_CONNECT_PENDING)
      vi->unreachable = true;  // no connection manager there
    else
      enter_error(vi, VIP_ERROR_CONN_LOST, false);
    return;
  }
  if (vi->ops_in_flight) --vi->ops_in_flight;
  const bool recv = e.cookie & kCookieRecv;
  Work* w = find(recv ? vi->recvq : vi->sendq, e.cookie & ~kCookieRecv);
  if (!w || w->finished) return;  // flushed meanwhile
  ++w->completed;
  if (e.status != GLEX_SUCCESS) {
    const bool prot = e.status == GLEX_ACCESS_ERROR;
    w->status |= recv   ? VIP_STATUS_TRANSPORT_ERROR
                 : prot ? VIP_STATUS_RDMA_PROT_ERROR
                        : VIP_STATUS_TRANSPORT_ERROR;
    w->ops.resize(w->issued);  // nothing more of it starts
    w->tail.reset();
  }
  if (w->completed == w->ops.size() && w->issued == w->ops.size()) {
    if (recv)
      send_fin(vi, w->rts_seq,
               w->status & VIP_STATUS_ERROR_MASK ? Reason::kTransport : Reason::kNone);
    maybe_finish(*w);
    if (w->finished && (w->status & VIP_STATUS_ERROR_MASK) && reliable(vi)) {
      const bool prot = w->status & VIP_STATUS_RDMA_PROT_ERROR;
      const bool write = (w->status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RDMA_WRITE;
      vi->nic->report(
          vi, w->d, VIP_RESOURCE_DESCRIPTOR,
          prot ? (write ? VIP_ERROR_RDMAW_PROT : VIP_ERROR_RDMAR_PROT) : VIP_ERROR_RDMA_TRANSPORT);
      publish(vi, recv ? vi->recvq : vi->sendq, recv);
      enter_error(vi, VIP_ERROR_CONN_LOST, true);
    }
  }
}

void handle_cqe(via_vi* vi, const glex_cq_entry& e) {
  take_cqe(vi, e);
  if (vi->peer_ended && !vi->ops_in_flight) enter_error(vi, VIP_ERROR_CONN_LOST, false);
}

// The peer disconnected or failed. A send's fenced MP reaches the peer before the completions of
// its puts come back here, so the peer may have taken a message and left while this side still
// waits for them: the connection is lost once they are in, and a send the peer took completes
// as done rather than flushed.
void on_peer_end(via_vi* vi) {
  glex_cq_entry e;
  while (vi->ops_in_flight && glex_poll_cq(vi->ep, &e) == GLEX_SUCCESS) take_cqe(vi, e);
  if (vi->state != VIP_STATE_CONNECTED) return;
  vi->peer_ended = true;
  vi->out.clear();
  if (!vi->ops_in_flight) enter_error(vi, VIP_ERROR_CONN_LOST, false);
}

}  // namespace

void deliver(via_vi* vi, const glex_mp& mp) {
  handle_mp(vi, mp);
}

void progress(via_vi* vi) {
  glex_mp mp;
  while (glex_recv_mp(vi->ep, 0, &mp) == GLEX_SUCCESS) handle_mp(vi, mp);
  // The CQ holds RDMA completions, and an MP refused on its way (a peer gone between hosts):
  // read it while RDMA is in flight, every 64 MPs, and when a wait finds nothing (wait_slice).
  if (vi->ops_in_flight || vi->mps_unpolled >= 64 || vi->state == VIP_STATE_CONNECT_PENDING) {
    vi->mps_unpolled = 0;
    glex_cq_entry e;
    while (glex_poll_cq(vi->ep, &e) == GLEX_SUCCESS) handle_cqe(vi, e);
  }
  drain_out(vi);
  issue_sends(vi);
  issue_recv_ops(vi);
  publish(vi, vi->sendq, false);
  publish(vi, vi->recvq, true);
}

bool wait_slice(via_vi* vi, int32_t slice_ms) {
  if (!vi->out.empty()) {
    // MPs wait for room at the target: look for what arrived and come back to retry them; the
    // target frees room as it takes MPs, with no word to this side.
    glex_mp mp;
    if (glex_recv_mp(vi->ep, 0, &mp) == GLEX_SUCCESS) {
      handle_mp(vi, mp);
    } else {
      sched_yield();
    }
    return true;
  }
  if (vi->ops_in_flight) {
    glex_cq_entry e;
    if (glex_wait_cq(vi->ep, slice_ms, &e) != GLEX_SUCCESS) return false;
    handle_cqe(vi, e);
    return true;
  }
  glex_mp mp;
  // Polls first, for a few microseconds of this host's time (a poll reads no clock; a call on a
  // simulated fabric takes about as long as the whole spin, so there it polls once or twice).
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
  for (uint32_t i = 1;; ++i) {
    if (glex_recv_mp(vi->ep, 0, &mp) == GLEX_SUCCESS) {
      handle_mp(vi, mp);
      return true;
    }
    const bool look = (i & (i - 1)) == 0 || i % 64 == 0;  // the clock at 1, 2, 4 .. 64, 128, ..
    if (look && std::chrono::steady_clock::now() > spin_until) break;
  }
  if (glex_recv_mp(vi->ep, slice_ms, &mp) != GLEX_SUCCESS) {
    if (vi->mps_unpolled) {
      vi->mps_unpolled = 0;
      glex_cq_entry e;
      while (glex_poll_cq(vi->ep, &e) == GLEX_SUCCESS) handle_cqe(vi, e);
    }
    return false;
  }
  handle_mp(vi, mp);
  return true;
}

VIP_RETURN take_completed(via_vi* vi, VIP_DESCRIPTOR** out, bool recv) {
  WorkQueue& q = recv ? vi->recvq : vi->sendq;
  if (q.head == q.published) {
    *out = nullptr;
    return VIP_NOT_DONE;
  }
  *out = q.at(q.head).d;
  ++q.head;
  refill(q);
  return ((*out)->CS.Status & VIP_STATUS_ERROR_MASK) ? VIP_DESCRIPTOR_ERROR : VIP_SUCCESS;
}

}  // namespace galaxy::via

using namespace galaxy::via;

namespace {

VIP_RETURN post(VIP_VI_HANDLE vi, VIP_DESCRIPTOR* d, VIP_MEM_HANDLE mh, bool recv) {
  const char* call = recv ? "VipPostRecv" : "VipPostSend";
  if (!vi || !d)
    return fail(VIP_INVALID_PARAMETER, fmt::format("E6530 {}: a handle is NULL", call));
  std::lock_guard lock(vi->nic->mu);
  if (reinterpret_cast<uintptr_t>(d) % VIP_DESCRIPTOR_ALIGNMENT)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6531 {}: descriptor {} is not {}-byte aligned", call,
                            static_cast<void*>(d), VIP_DESCRIPTOR_ALIGNMENT));
  const Region* r = vi->nic->region(mh);
  const auto a = reinterpret_cast<uintptr_t>(d);
  if (!r || a < r->addr || a - r->addr + sizeof(VIP_CONTROL_SEGMENT) > r->len)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6532 {}: MemoryHandle = {:#x} does not hold descriptor {}", call, mh,
                            static_cast<void*>(d)));
  WorkQueue& q = recv ? vi->recvq : vi->sendq;
  if (q.posted() >= kMaxQueued)
    return fail(VIP_ERROR_RESOURCE,
                fmt::format("E6533 {}: {} descriptors are queued", call, kMaxQueued));
  d->CS.Status = 0;
  enqueue(q, d);
  // In the error state descriptors complete flushed; so do sends before a connection (receives
  // wait for one).
  if (vi->state == VIP_STATE_ERROR || (!recv && vi->state != VIP_STATE_CONNECTED)) {
    Work& w = q.overflow.empty() ? q.at(q.tail - 1) : q.overflow.back();
    finish(w, VIP_STATUS_DESC_FLUSHED_ERROR);
    publish(vi, q, recv);
    return VIP_SUCCESS;
  }
  if (!recv) progress(vi);
  return VIP_SUCCESS;
}

VIP_RETURN done(VIP_VI_HANDLE vi, VIP_DESCRIPTOR** d, bool recv) {
  if (!vi || !d)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6534 {}: a handle is NULL", recv ? "VipRecvDone" : "VipSendDone"));
  std::lock_guard lock(vi->nic->mu);
  progress(vi);
  return take_completed(vi, d, recv);
}

VIP_RETURN wait(VIP_VI_HANDLE vi, VIP_ULONG timeout, VIP_DESCRIPTOR** d, bool recv) {
  if (!vi || !d)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6535 {}: a handle is NULL", recv ? "VipRecvWait" : "VipSendWait"));
  std::lock_guard lock(vi->nic->mu);
  WorkQueue& q = recv ? vi->recvq : vi->sendq;
  if (!wait_until(vi, timeout, [&] { return q.head != q.published; })) {
    *d = nullptr;
    return VIP_TIMEOUT;
  }
  return take_completed(vi, d, recv);
}

}  // namespace

extern "C" {

VIP_RETURN VipPostSend(VIP_VI_HANDLE vi, VIP_DESCRIPTOR* d, VIP_MEM_HANDLE mh) {
  return post(vi, d, mh, false);
}
VIP_RETURN VipPostRecv(VIP_VI_HANDLE vi, VIP_DESCRIPTOR* d, VIP_MEM_HANDLE mh) {
  return post(vi, d, mh, true);
}
VIP_RETURN VipSendDone(VIP_VI_HANDLE vi, VIP_DESCRIPTOR** d) {
  return done(vi, d, false);
}
VIP_RETURN VipRecvDone(VIP_VI_HANDLE vi, VIP_DESCRIPTOR** d) {
  return done(vi, d, true);
}
VIP_RETURN VipSendWait(VIP_VI_HANDLE vi, VIP_ULONG timeout, VIP_DESCRIPTOR** d) {
  return wait(vi, timeout, d, false);
}
VIP_RETURN VipRecvWait(VIP_VI_HANDLE vi, VIP_ULONG timeout, VIP_DESCRIPTOR** d) {
  return wait(vi, timeout, d, true);
}

}  // extern "C"
