// The provider's data path (docs/libfabric.md "Packets"): messages as trains of MPs or, when
// long, read by the receiver (rendezvous); matching in each source's order; RDMA reads and
// writes as glex RDMA; progress that sends, receives and reaps.
#include <sched.h>

#include <chrono>
#include <cstring>

#include "fi_internal.h"

namespace galaxy::fi {
namespace {

uint64_t rts_key(glex_ep_addr_t peer, uint32_t seq) {
  return (peer << 32) ^ seq;
}

// A registration of [buf, buf + len) for one operation: the caller's, when its descriptor
// covers the range, otherwise one made now (and released when the operation completes).
glex_ret_t local_registration(Endpoint* ep, void* desc, const void* buf, size_t len,
                              uint32_t access, glex_mem_handle_t* mh, bool* own) {
  if (desc) {
    const Mr* mr = static_cast<const Mr*>(desc);
    const char* p = static_cast<const char*>(buf);
    if (mr->domain == ep->domain && p >= mr->base && p + len <= mr->base + mr->len) {
      *mh = mr->mh;
      *own = false;
      return GLEX_SUCCESS;
    }
  }
  *own = true;
  return glex_register_mem(ep->domain->dev, const_cast<void*>(buf), len, access, mh);
}

void release(Endpoint* ep, glex_mem_handle_t mh, bool own) {
  if (own) glex_deregister_mem(ep->domain->dev, mh);
}

void queue_mp(Endpoint* ep, glex_ep_addr_t dest, const void* a, size_t alen, const void* b,
              size_t blen, std::shared_ptr<OpDone> done) {
  OutMp& m = ep->out.emplace_back();
  m.dest = dest;
  std::memcpy(m.bytes, a, alen);
  if (blen) std::memcpy(m.bytes + alen, b, blen);
  m.len = static_cast<uint32_t>(alen + blen);
  m.done = std::move(done);
}

// Sends queued MPs in order until one finds its target's MPQ full.
void flush_out(Endpoint* ep) {
  while (!ep->out.empty()) {
    OutMp& m = ep->out.front();
    if (m.dest == Av::kNoAddr) {  // an MP of an operation that already failed
      ep->out.pop_front();
      continue;
    }
    const bool more = ep->out.size() > 1 && ep->out[1].dest == m.dest;
    const glex_ret_t r =
        glex_send_mp(ep->ep, m.dest, m.bytes, m.len, m.flags | (more ? GLEX_FLAG_MORE : 0));
    if (r == GLEX_BUSY) return;
    std::shared_ptr<OpDone> done = std::move(m.done);
    const glex_ep_addr_t dest = m.dest;
    ep->out.pop_front();
    if (r != GLEX_SUCCESS) {
      FI_WARN(provider(), FI_LOG_EP_DATA, "E6601 MP to %#llx failed: %s\n",
              static_cast<unsigned long long>(dest), glex_last_error());
      if (done) {
        // The operation's remaining MPs go nowhere.
        for (OutMp& later : ep->out)
          if (later.done == done) later.done.reset(), later.dest = Av::kNoAddr;
        complete(ep, *done, -fi_error_of(r));
      }
      continue;
    }
    // Every MP of an operation holds it; the last to leave reports it.
    if (done && done.use_count() == 1) complete(ep, *done);
  }
}

bool matches(const Recv& r, const Arrival& a) {
  if (r.from != Av::kNoAddr && r.from != a.src) return false;
  return !a.tagged || ((r.tag ^ a.tag) & ~r.ignore) == 0;
}

void send_fin(Endpoint* ep, glex_ep_addr_t peer, uint32_t seq, uint64_t status) {
  const Head h{static_cast<uint8_t>(Kind::kFin), 0, 0, seq, status};
  queue_mp(ep, peer, &h, sizeof h, nullptr, 0, nullptr);
}

void fail_read(Endpoint* ep, RdmaOp* rd, glex_ret_t ret);

// A matched message into its receive: copied (a short one) or read (a long one).
void deliver(Endpoint* ep, Recv& r, const Arrival& a, const char* bytes) {
  OpDone op = r.op;
  op.src = ep->av ? ep->av->reverse(a.src) : FI_ADDR_NOTAVAIL;
  op.tag = a.tag;
  op.data = a.data;
  if (a.has_data) op.flags |= FI_REMOTE_CQ_DATA;
  const size_t n = a.len < op.len ? a.len : op.len;
  if (!a.rts) {
    if (n) std::memcpy(op.buf, bytes, n);
    op.len = n;
    complete(ep, op, a.len > n ? -FI_ETRUNC : 0, a.len - n);
    return;
  }
  if (n == 0) {
    send_fin(ep, a.src, a.seq, 0);
    op.len = 0;
    complete(ep, op, a.len ? -FI_ETRUNC : 0, a.len);
    return;
  }
  auto* rd = new RdmaOp;
  rd->op = op;
  rd->op.len = n;
  rd->rendezvous = true;
  rd->peer = a.src;
  rd->seq = a.seq;
  rd->truncated_from = a.len > n ? a.len : 0;
  glex_ret_t ret = glex_register_mem(ep->domain->dev, op.buf, n, GLEX_MEM_WRITE, &rd->local_mh);
  rd->own_mh = ret == GLEX_SUCCESS;
  if (ret == GLEX_SUCCESS) {
    glex_rdma_req q{};
    q.target = a.src;
    q.op = GLEX_OP_GET;
    q.flags = GLEX_FLAG_LOCAL_CQ;
    q.local_addr = op.buf;
    q.local_mh = rd->local_mh;
    q.len = n;
    q.remote_addr = a.rts_addr;
    q.remote_mh = a.rts_mh;
    q.cookie = reinterpret_cast<uint64_t>(rd);
    // Behind reads already waiting, in order; a busy NIC makes this one wait too.
    ret = ep->reads_waiting.empty() ? glex_rdma(ep->ep, &q) : GLEX_BUSY;
    if (ret == GLEX_BUSY) {
      ep->reads_waiting.emplace_back(q, rd);
      ret = GLEX_SUCCESS;
    }
  }
  if (ret != GLEX_SUCCESS) return fail_read(ep, rd, ret);
  ++ep->rdma_in_flight;
}

void fail_read(Endpoint* ep, RdmaOp* rd, glex_ret_t ret) {
  FI_WARN(provider(), FI_LOG_EP_DATA, "E6602 reading a long message of %llu bytes from %#llx: %s\n",
          static_cast<unsigned long long>(rd->op.len), static_cast<unsigned long long>(rd->peer),
          glex_last_error());
  release(ep, rd->local_mh, rd->own_mh);
  send_fin(ep, rd->peer, rd->seq, 1);
  complete(ep, rd->op, -fi_error_of(ret));
  delete rd;
}

// The reads a busy NIC refused, posted again in order until it refuses one more.
void flush_reads(Endpoint* ep) {
  while (!ep->reads_waiting.empty()) {
    auto [q, rd] = ep->reads_waiting.front();
    const glex_ret_t ret = glex_rdma(ep->ep, &q);
    if (ret == GLEX_BUSY) return;
    ep->reads_waiting.pop_front();
    if (ret != GLEX_SUCCESS) {
      --ep->rdma_in_flight;
      fail_read(ep, rd, ret);
    }
  }
}

// A complete message, in its source's order: into the first receive it matches, else kept.
void match(Endpoint* ep, std::unique_ptr<Arrival> a) {
  auto& q = ep->posted[a->tagged ? 1 : 0];
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (!matches(*it, *a)) continue;
    Recv r = std::move(*it);
    q.erase(it);
    deliver(ep, r, *a, a->bytes.data());
    return;
  }
  ep->unexpected[a->tagged ? 1 : 0].push_back(std::move(a));
}

bool whole(const Arrival& a) {
  return a.rts || a.have == a.len;
}

// Hands the peer's messages that are whole and next in its order to matching.
void advance(Endpoint* ep, Endpoint::Peer& p) {
  for (;;) {
    auto it = p.arriving.find(p.next_in);
    if (it == p.arriving.end() || !whole(*it->second)) return;
    std::unique_ptr<Arrival> a = std::move(it->second);
    p.arriving.erase(it);
    ++p.next_in;
    match(ep, std::move(a));
  }
}

void malformed(const glex_mp& mp, const char* why) {
  FI_WARN(provider(), FI_LOG_EP_DATA,
          "E6603 dropped a malformed packet of %u bytes from %#llx: %s\n", mp.len,
          static_cast<unsigned long long>(mp.src), why);
}

void on_packet(Endpoint* ep, const glex_mp& mp) {
  Head h;
  if (mp.len < sizeof h) return malformed(mp, "shorter than its head");
  std::memcpy(&h, mp.data, sizeof h);
  const char* body = reinterpret_cast<const char*>(mp.data) + sizeof h;
  const uint32_t body_len = mp.len - sizeof h;
  switch (static_cast<Kind>(h.kind)) {
    case Kind::kMsg: {
      MsgHead m;
      if (body_len < sizeof m) return malformed(mp, "message head cut short");
      std::memcpy(&m, body, sizeof m);
      const uint32_t n = body_len - sizeof m;
      if (m.len > kEagerMax || n > m.len || (n < m.len && n != kMsgFirst))
        return malformed(mp, "message length");
      Endpoint::Peer& p = ep->peers[mp.src];
      if (p.arriving.count(h.seq)) return malformed(mp, "message number repeated");
      const bool tagged = h.flags & kTagged;
      // The common case: a short message, next in order, matching a posted receive, is copied
      // straight from the MP into it.
      if (n == m.len && p.next_in == h.seq) {
        Arrival a;
        a.src = mp.src;
        a.seq = h.seq;
        a.tagged = tagged;
        a.tag = h.word;
        a.data = m.data;
        a.has_data = h.flags & kHasData;
        a.len = m.len;
        a.have = m.len;
        auto& q = ep->posted[tagged ? 1 : 0];
        for (auto it = q.begin(); it != q.end(); ++it) {
          if (!matches(*it, a)) continue;
          Recv r = std::move(*it);
          q.erase(it);
          ++p.next_in;
          deliver(ep, r, a, body + sizeof m);
          advance(ep, p);
          return;
        }
      }
      auto a = std::make_unique<Arrival>();
      a->src = mp.src;
      a->seq = h.seq;
      a->tagged = tagged;
      a->tag = h.word;
      a->data = m.data;
      a->has_data = h.flags & kHasData;
      a->len = m.len;
      a->bytes.resize(m.len);
      if (n) std::memcpy(a->bytes.data(), body + sizeof m, n);
      a->have = n;
      p.arriving.emplace(h.seq, std::move(a));
      advance(ep, p);
      return;
    }
    case Kind::kMore: {
      auto pit = ep->peers.find(mp.src);
      if (pit == ep->peers.end()) return malformed(mp, "continuation of no message");
      auto it = pit->second.arriving.find(h.seq);
      if (it == pit->second.arriving.end() || it->second->rts)
        return malformed(mp, "continuation of no message");
      Arrival& a = *it->second;
      if (h.word > a.len || body_len > a.len - h.word || a.have + body_len > a.len)
        return malformed(mp, "continuation outside its message");
      if (body_len) std::memcpy(a.bytes.data() + h.word, body, body_len);
      a.have += body_len;
      advance(ep, pit->second);
      return;
    }
    case Kind::kRts: {
      RtsBody b;
      if (body_len < sizeof b) return malformed(mp, "long message's head cut short");
      std::memcpy(&b, body, sizeof b);
      if (b.len > kMaxMsgSize) return malformed(mp, "long message's length");
      Endpoint::Peer& p = ep->peers[mp.src];
      if (p.arriving.count(h.seq)) return malformed(mp, "message number repeated");
      auto a = std::make_unique<Arrival>();
      a->src = mp.src;
      a->seq = h.seq;
      a->tagged = h.flags & kTagged;
      a->rts = true;
      a->tag = h.word;
      a->data = b.data;
      a->has_data = h.flags & kHasData;
      a->len = b.len;
      a->rts_addr = b.addr;
      a->rts_mh = b.mh;
      p.arriving.emplace(h.seq, std::move(a));
      advance(ep, p);
      return;
    }
    case Kind::kFin: {
      auto it = ep->rts.find(rts_key(mp.src, h.seq));
      if (it == ep->rts.end()) return malformed(mp, "answer to no long message");
      RtsSend s = std::move(it->second);
      ep->rts.erase(it);
      glex_deregister_mem(ep->domain->dev, s.mh);
      complete(ep, s.op, h.word ? -FI_EIO : 0);
      return;
    }
    case Kind::kWriteData: {
      OpDone op;
      op.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
      op.data = h.word;
      op.src = ep->av ? ep->av->reverse(mp.src) : FI_ADDR_NOTAVAIL;
      if (ep->rx_cq) {
        Completion c;
        c.e.flags = op.flags;
        c.e.data = op.data;
        c.src = op.src;
        ep->rx_cq->done.push_back(c);
      }
      return;
    }
  }
  malformed(mp, "unknown kind");
}

void on_rdma_done(Endpoint* ep, const glex_cq_entry& e) {
  auto* rd = reinterpret_cast<RdmaOp*>(e.cookie);
  --ep->rdma_in_flight;
  release(ep, rd->local_mh, rd->own_mh);
  const int err = e.status == GLEX_SUCCESS ? 0 : -fi_error_of(e.status);
  if (err)
    FI_WARN(provider(), FI_LOG_EP_DATA, "E6604 RDMA %s of %llu bytes failed: E%u %s\n",
            e.op == GLEX_OP_GET ? "read" : "write", static_cast<unsigned long long>(rd->op.len),
            e.error_id, e.reason);
  if (rd->rendezvous) {
    send_fin(ep, rd->peer, rd->seq, err ? 1 : 0);
    if (!err && rd->truncated_from)
      complete(ep, rd->op, -FI_ETRUNC, rd->truncated_from - rd->op.len);
    else
      complete(ep, rd->op, err);
  } else if (rd->then_data && !err) {
    const Head h{static_cast<uint8_t>(Kind::kWriteData), 0, 0, 0, rd->remote_data};
    queue_mp(ep, rd->peer, &h, sizeof h, nullptr, 0, std::make_shared<OpDone>(rd->op));
  } else {
    complete(ep, rd->op, err);
  }
  delete rd;
}

void on_completion(Endpoint* ep, const glex_cq_entry& e) {
  if (e.op == GLEX_OP_PUT || e.op == GLEX_OP_GET) {
    on_rdma_done(ep, e);
  } else if (e.status != GLEX_SUCCESS) {
    // An MP refused after it left (its target's VP closed): no operation waits for it.
    FI_WARN(provider(), FI_LOG_EP_DATA, "E6605 an MP was refused at its target: E%u %s\n",
            e.error_id, e.reason);
  }
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

void take_packet(Endpoint* ep, const glex_mp& mp) {
  on_packet(ep, mp);
}

void progress(Endpoint* ep) {
  if (!ep->enabled) return;
  // The caller's own time since the last call ended: short when it polls in a loop.
  const uint64_t start = now_ns();
  const bool tight = start - ep->last_progress_ns < kPollGapNs;
  bool moved = !ep->out.empty() || !ep->reads_waiting.empty();
  flush_reads(ep);
  flush_out(ep);
  glex_mp mp;
  for (int i = 0; i < 256; ++i) {
    if (glex_recv_mp(ep->ep, 0, &mp) != GLEX_SUCCESS) break;
    on_packet(ep, mp);
    moved = true;
  }
  glex_cq_entry e;
  while (glex_poll_cq(ep->ep, &e) == GLEX_SUCCESS) {
    on_completion(ep, e);
    moved = true;
  }
  flush_out(ep);
  // A caller polling in a loop with nothing arriving yields its core between polls after
  // kYieldAfterNs (the fabric's daemons may need it), and after kIdleBeforeWaitNs waits in the
  // NIC for up to 1 ms per call instead: the core goes to others, and a simulated fabric's
  // clock, which moves while its clients wait, moves.
  uint64_t now = now_ns();
  if (moved || !tight) {
    ep->idle_since_ns = now;
  } else if (now - ep->idle_since_ns >= kIdleBeforeWaitNs) {
    if (ep->rdma_in_flight) {
      moved = glex_wait_cq(ep->ep, 1, &e) == GLEX_SUCCESS;
      if (moved) on_completion(ep, e);
    } else {
      moved = glex_recv_mp(ep->ep, 1, &mp) == GLEX_SUCCESS;
      if (moved) on_packet(ep, mp);
    }
    flush_out(ep);
    now = now_ns();
    if (moved) ep->idle_since_ns = now;
  } else if (now - ep->idle_since_ns >= kYieldAfterNs) {
    sched_yield();
    now = now_ns();
  }
  ep->last_progress_ns = now;
}

ssize_t post_send(Endpoint* ep, const void* buf, size_t len,
                  void* /*desc: not needed, the provider registers what a peer reads*/,
                  fi_addr_t dest, uint64_t tag, bool tagged, uint64_t data, bool has_data,
                  void* context, uint64_t flags) {
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  if (!ep->enabled) return -FI_EOPBADSTATE;
  const glex_ep_addr_t to = ep->av ? ep->av->lookup(dest) : Av::kNoAddr;
  if (to == Av::kNoAddr) return -FI_EINVAL;
  if (len > kMaxMsgSize) return -FI_EMSGSIZE;
  if (len && !buf) return -FI_EINVAL;
  const size_t mps =
      len <= kEagerMax ? 1 + (len > kMsgFirst ? (len - kMsgFirst + kMoreBytes - 1) / kMoreBytes : 0)
                       : 1;
  if (ep->out.size() + mps > kTxSize) {
    progress(ep);
    if (ep->out.size() + mps > kTxSize) return -FI_EAGAIN;
  }
  OpDone op;
  op.context = context;
  op.flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
  op.len = len;
  op.report = !(flags & FI_INJECT) && (!ep->tx_selective || (flags & FI_COMPLETION));
  const uint8_t hflags = (tagged ? kTagged : 0) | (has_data ? kHasData : 0);
  const char* p = static_cast<const char*>(buf);
  if (len > kEagerMax) {
    // The peer reads through a registration of the send's own, released at kFin (a caller's
    // descriptor may be closed before then).
    glex_mem_handle_t mh;
    const glex_ret_t r =
        glex_register_mem(ep->domain->dev, const_cast<void*>(buf), len, GLEX_MEM_READ, &mh);
    if (r != GLEX_SUCCESS) return r == GLEX_NO_RESOURCE ? -FI_EAGAIN : -fi_error_of(r);
    Endpoint::Peer& peer = ep->peers[to];
    const uint32_t seq = peer.next_out++;
    ep->rts[rts_key(to, seq)] = RtsSend{op, mh};
    const Head h{static_cast<uint8_t>(Kind::kRts), hflags, 0, seq, tag};
    const RtsBody b{len, data, reinterpret_cast<uint64_t>(buf), mh};
    queue_mp(ep, to, &h, sizeof h, &b, sizeof b, nullptr);
    flush_out(ep);
    return 0;
  }
  Endpoint::Peer& peer = ep->peers[to];
  const uint32_t seq = peer.next_out++;
  const size_t first = len < kMsgFirst ? len : kMsgFirst;
  // Each MP goes straight to the NIC while nothing waits before it; from the first that finds
  // its target's MPQ full, it and the rest wait in the queue, in order.
  bool direct = ep->out.empty();
  std::shared_ptr<OpDone> queued;  // held by each queued MP of the message
  char mp[GLEX_MP_PAYLOAD];
  for (size_t off = 0, n = first; off == 0 || off < len;
       off += n, n = len - off < kMoreBytes ? len - off : kMoreBytes) {
    size_t head_len;
    if (off == 0) {
      const Head h{static_cast<uint8_t>(Kind::kMsg), hflags, 0, seq, tag};
      const MsgHead m{len, data};
      std::memcpy(mp, &h, sizeof h);
      std::memcpy(mp + sizeof h, &m, sizeof m);
      head_len = sizeof h + sizeof m;
    } else {
      const Head h{static_cast<uint8_t>(Kind::kMore), 0, 0, seq, off};
      std::memcpy(mp, &h, sizeof h);
      head_len = sizeof h;
    }
    if (direct) {
      if (n) std::memcpy(mp + head_len, p + off, n);
      // All but the last MP of the train say more follow: they share datagrams across hosts.
      const glex_ret_t r = glex_send_mp(ep->ep, to, mp, static_cast<uint32_t>(head_len + n),
                                        off + n < len ? GLEX_FLAG_MORE : 0);
      if (r == GLEX_SUCCESS) {
        if (off + n >= len) break;
        continue;
      }
      if (r != GLEX_BUSY) {
        FI_WARN(provider(), FI_LOG_EP_DATA, "E6607 MP to %#llx failed: %s\n",
                static_cast<unsigned long long>(to), glex_last_error());
        if (off == 0) {  // nothing left: the message was not sent
          --peer.next_out;
          return -fi_error_of(r);
        }
        complete(ep, op, -fi_error_of(r));
        return 0;
      }
      direct = false;
    }
    if (!queued) queued = std::make_shared<OpDone>(op);
    queue_mp(ep, to, mp, head_len, p + off, n, queued);
    if (off + n >= len) break;
  }
  if (direct) {
    complete(ep, op);
    return 0;
  }
  queued.reset();
  flush_out(ep);
  return 0;
}

ssize_t post_recv(Endpoint* ep, void* buf, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore,
                  bool tagged, void* context, uint64_t flags) {
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  if (!ep->enabled) return -FI_EOPBADSTATE;
  if (len && !buf && !(flags & (FI_PEEK | FI_DISCARD))) return -FI_EINVAL;
  Recv r;
  r.op.context = context;
  r.op.flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
  r.op.buf = buf;
  r.op.len = len;
  r.op.report = !ep->rx_selective || (flags & FI_COMPLETION);
  r.tag = tag;
  r.ignore = ignore;
  r.tagged = tagged;
  if (src != FI_ADDR_UNSPEC && (ep->caps & FI_DIRECTED_RECV)) {
    r.from = ep->av ? ep->av->lookup(src) : Av::kNoAddr;
    if (r.from == Av::kNoAddr) return -FI_EINVAL;
  }
  auto& unexpected = ep->unexpected[tagged ? 1 : 0];
  if ((flags & FI_CLAIM) && !(flags & FI_PEEK)) {  // what an earlier FI_PEEK | FI_CLAIM held
    if (!context) return -FI_EINVAL;
    auto* held = static_cast<Arrival*>(static_cast<fi_context*>(context)->internal[0]);
    for (auto it = ep->claimed.begin(); it != ep->claimed.end(); ++it) {
      if (it->get() != held) continue;
      std::unique_ptr<Arrival> a = std::move(*it);
      ep->claimed.erase(it);
      if (flags & FI_DISCARD) {
        if (a->rts) send_fin(ep, a->src, a->seq, 0);
        r.op.len = 0;
        complete(ep, r.op);
      } else {
        deliver(ep, r, *a, a->bytes.data());
      }
      flush_out(ep);
      return 0;
    }
    return -FI_EINVAL;
  }
  if (flags & FI_PEEK) {
    progress(ep);
    for (auto it = unexpected.begin(); it != unexpected.end(); ++it) {
      if (!matches(r, **it)) continue;
      OpDone op = r.op;
      op.len = (*it)->len;
      op.tag = (*it)->tag;
      op.data = (*it)->data;
      op.buf = nullptr;
      op.src = ep->av ? ep->av->reverse((*it)->src) : FI_ADDR_NOTAVAIL;
      if ((*it)->has_data) op.flags |= FI_REMOTE_CQ_DATA;
      if (flags & (FI_CLAIM | FI_DISCARD)) {
        std::unique_ptr<Arrival> a = std::move(*it);
        unexpected.erase(it);
        if (flags & FI_DISCARD) {
          if (a->rts) send_fin(ep, a->src, a->seq, 0);
        } else {
          if (!context) return -FI_EINVAL;
          static_cast<fi_context*>(context)->internal[0] = a.get();
          ep->claimed.push_back(std::move(a));
        }
      }
      complete(ep, op);
      return 0;
    }
    OpDone op = r.op;
    op.len = 0;
    complete(ep, op, -FI_ENOMSG);
    return 0;
  }
  for (auto it = unexpected.begin(); it != unexpected.end(); ++it) {
    if (!matches(r, **it)) continue;
    std::unique_ptr<Arrival> a = std::move(*it);
    unexpected.erase(it);
    deliver(ep, r, *a, a->bytes.data());
    flush_out(ep);
    return 0;
  }
  if (ep->posted[tagged ? 1 : 0].size() >= kRxSize) return -FI_EAGAIN;
  ep->posted[tagged ? 1 : 0].push_back(std::move(r));
  return 0;
}

ssize_t cancel_recv(Endpoint* ep, void* context) {
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  for (auto& q : ep->posted) {
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->op.context != context) continue;
      OpDone op = it->op;
      q.erase(it);
      op.len = 0;
      complete(ep, op, -FI_ECANCELED);
      return 0;
    }
  }
  return -FI_ENOENT;
}

ssize_t post_rma(Endpoint* ep, bool write, void* buf, size_t len, void* desc, fi_addr_t peer,
                 uint64_t addr, uint64_t key, uint64_t data, bool has_data, void* context,
                 uint64_t flags) {
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  if (!ep->enabled) return -FI_EOPBADSTATE;
  const glex_ep_addr_t to = ep->av ? ep->av->lookup(peer) : Av::kNoAddr;
  if (to == Av::kNoAddr) return -FI_EINVAL;
  if (len > kMaxMsgSize) return -FI_EMSGSIZE;
  OpDone op;
  op.context = context;
  op.flags = FI_RMA | (write ? FI_WRITE : FI_READ);
  op.buf = buf;
  op.len = len;
  op.report = !(flags & FI_INJECT) && (!ep->tx_selective || (flags & FI_COMPLETION));
  if (len == 0 && !has_data) {
    complete(ep, op);
    return 0;
  }
  auto rd = std::make_unique<RdmaOp>();
  rd->op = op;
  rd->peer = to;
  rd->then_data = write && has_data;
  rd->remote_data = data;
  if (len == 0) {  // the data alone
    const Head h{static_cast<uint8_t>(Kind::kWriteData), 0, 0, 0, data};
    queue_mp(ep, to, &h, sizeof h, nullptr, 0, std::make_shared<OpDone>(op));
    flush_out(ep);
    return 0;
  }
  if (write && (flags & FI_INJECT)) {  // the caller may reuse buf at once: the NIC reads a copy
    rd->inject_copy = std::make_unique<char[]>(len);
    std::memcpy(rd->inject_copy.get(), buf, len);
    buf = rd->inject_copy.get();
    desc = nullptr;
  }
  glex_ret_t r = local_registration(ep, desc, buf, len, GLEX_MEM_READ | GLEX_MEM_WRITE,
                                    &rd->local_mh, &rd->own_mh);
  if (r != GLEX_SUCCESS) return r == GLEX_NO_RESOURCE ? -FI_EAGAIN : -fi_error_of(r);
  glex_rdma_req q{};
  q.target = to;
  q.op = write ? GLEX_OP_PUT : GLEX_OP_GET;
  q.flags = GLEX_FLAG_LOCAL_CQ;
  q.local_addr = buf;
  q.local_mh = rd->local_mh;
  q.len = len;
  q.remote_addr = addr;
  q.remote_mh = key;
  q.cookie = reinterpret_cast<uint64_t>(rd.get());
  r = glex_rdma(ep->ep, &q);
  if (r != GLEX_SUCCESS) {
    release(ep, rd->local_mh, rd->own_mh);
    if (r == GLEX_BUSY || r == GLEX_NO_RESOURCE) return -FI_EAGAIN;
    FI_WARN(provider(), FI_LOG_EP_DATA, "E6606 RDMA %s refused: %s\n", write ? "write" : "read",
            glex_last_error());
    return -fi_error_of(r);
  }
  rd.release();
  ++ep->rdma_in_flight;
  return 0;
}

void drain_and_release(Endpoint* ep) {
  // Give the NIC up to a second to finish what it holds, so no transfer writes into memory the
  // user may free once fi_close returns.
  for (int i = 0; i < 1000 && (ep->rdma_in_flight || !ep->out.empty()); ++i) {
    progress(ep);
    if (ep->rdma_in_flight || !ep->out.empty()) glex_fence(ep->ep, 1);
  }
  for (auto& [q, rd] : ep->reads_waiting) {  // never posted: nothing of them is in the NIC
    release(ep, rd->local_mh, rd->own_mh);
    delete rd;
  }
  ep->reads_waiting.clear();
  for (auto& [key, s] : ep->rts) glex_deregister_mem(ep->domain->dev, s.mh);
  ep->rts.clear();
  ep->out.clear();
  for (auto& q : ep->posted) q.clear();
  for (auto& q : ep->unexpected) q.clear();
  ep->peers.clear();
  ep->claimed.clear();
}

int fi_error_of(glex_ret_t r) {
  switch (r) {
    case GLEX_SUCCESS:
      return 0;
    case GLEX_INVALID_PARAM:
      return FI_EINVAL;
    case GLEX_NO_RESOURCE:
      return FI_ENOMEM;
    case GLEX_TIMEOUT:
      return FI_ETIMEDOUT;
    case GLEX_DESCRIPTOR_ERROR:
      return FI_EINVAL;
    case GLEX_BUSY:
      return FI_EAGAIN;
    case GLEX_NO_ENTRY:
      return FI_EAGAIN;
    case GLEX_ACCESS_ERROR:
      return FI_EACCES;
    case GLEX_UNREACHABLE:
      return FI_EHOSTUNREACH;
    case GLEX_PEER_DEAD:
      return FI_ECONNRESET;
    case GLEX_UNSUPPORTED:
      return FI_ENOSYS;
  }
  return FI_EIO;
}

void complete(Endpoint* ep, const OpDone& op, int err, size_t olen) {
  const bool tx = op.flags & (FI_SEND | FI_WRITE | FI_READ);
  Cq* cq = tx ? ep->tx_cq : ep->rx_cq;
  Cntr* cntr = (op.flags & FI_SEND)    ? ep->send_cntr
               : (op.flags & FI_RECV)  ? ep->recv_cntr
               : (op.flags & FI_WRITE) ? ep->write_cntr
                                       : ep->read_cntr;
  if (err) {
    if (cntr) ++cntr->errors;
    if (cq && (op.report || op.context)) {
      fi_cq_err_entry e{};
      e.op_context = op.context;
      e.flags = op.flags;
      e.len = op.len;
      e.buf = op.buf;
      e.data = op.data;
      e.tag = op.tag;
      e.olen = olen;
      e.err = -err;
      e.prov_errno = -err;
      cq->errors.push_back(e);
    }
    return;
  }
  if (cntr) ++cntr->value;
  if (!cq || !op.report) return;
  Completion c;
  c.e.op_context = op.context;
  c.e.flags = op.flags;
  c.e.len = op.len;
  c.e.buf = (op.flags & FI_RECV) ? op.buf : nullptr;
  c.e.data = op.data;
  c.e.tag = op.tag;
  c.src = op.src;
  cq->done.push_back(c);
}

}  // namespace galaxy::fi
