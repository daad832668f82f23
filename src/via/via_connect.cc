// VIA connections, client-server (VIA 1.0 section 2.5): a request from a VI to a NIC's
// connection manager, matched by discriminator, accepted by a VI of the server or rejected
// (docs/via.md "Connections").
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "via/via_internal.h"

namespace galaxy::via {
namespace {

// The attributes a VI tells its peer, and its tag's secret.
struct WireAttrs {
  uint16_t level;
  uint8_t write, read;
  uint32_t mtu;
  uint32_t secret;
};
static_assert(sizeof(WireAttrs) == 12);

WireAttrs wire_attrs(const via_vi* vi) {
  return {vi->attrs.ReliabilityLevel, static_cast<uint8_t>(vi->attrs.EnableRdmaWrite ? 1 : 0),
          static_cast<uint8_t>(vi->attrs.EnableRdmaRead ? 1 : 0),
          static_cast<uint32_t>(vi->attrs.MaxTransferSize), vi->attrs.Ptag->secret};
}

VIP_VI_ATTRIBUTES from_wire(const WireAttrs& w) {
  VIP_VI_ATTRIBUTES a{};
  a.ReliabilityLevel = w.level;
  a.MaxTransferSize = w.mtu;
  a.EnableRdmaWrite = w.write ? VIP_TRUE : VIP_FALSE;
  a.EnableRdmaRead = w.read ? VIP_TRUE : VIP_FALSE;
  return a;  // the peer's tag means nothing here
}

// A request: header, id, attributes, the discriminator asked for, the requester's address.
struct WireRequest {
  uint32_t id;
  WireAttrs attrs;
  uint8_t disc_len;
  uint8_t disc[VIP_MAX_DISCRIMINATOR_LEN];
  uint8_t local_disc_len;
  uint8_t local_disc[VIP_MAX_DISCRIMINATOR_LEN];
  uint8_t pad[2];
  uint64_t local_host;
  uint64_t bounce;  // the VI's bounce ring (0: none) and its key
  uint32_t bounce_key, pad2;
};
static_assert(sizeof(Header) + sizeof(WireRequest) <= GLEX_MP_PAYLOAD);

struct WireAccept {
  uint32_t id;
  WireAttrs attrs;
  uint64_t bounce;
  uint32_t bounce_key, pad;
};
static_assert(sizeof(Header) + sizeof(WireAccept) <= GLEX_MP_PAYLOAD);

// A peer connection made: the sender's own request, the receiver's request it matched, and
// what the receiver needs of the sender's VI. The connection's id is the two ids' XOR.
struct WirePeerAccept {
  uint32_t id;
  uint32_t matched;
  WireAttrs attrs;
  uint64_t bounce;
  uint32_t bounce_key, pad;
};
static_assert(sizeof(Header) + sizeof(WirePeerAccept) <= GLEX_MP_PAYLOAD);

uint64_t bounce_of(const via_vi* vi) {
  return reinterpret_cast<uint64_t>(vi->bounce);
}
uint32_t bounce_key_of(const via_vi* vi) {
  return vi->bounce ? glex_mem_key(vi->nic->dev, vi->bounce_mh) : 0;
}

}  // namespace

// The VI is connected to `peer`: what it learnt of it, and fresh bounce accounts.
void connect_to(via_vi* vi, glex_ep_addr_t peer, const VIP_VI_ATTRIBUTES& attrs, uint32_t secret,
                uint32_t id, uint64_t bounce, uint32_t bounce_key) {
  vi->peer = peer;
  vi->peer_attrs = attrs;
  vi->peer_secret = secret;
  vi->conn_id = id;
  vi->peer_bounce = bounce;
  vi->peer_bounce_mh = bounce ? glex_mem_handle_of_key(vi->nic->dev, bounce_key) : 0;
  vi->slots_used = vi->slots_freed = 0;
  vi->slots_emptied = vi->credit_sent = 0;
  vi->peer_ended = false;
  vi->state = VIP_STATE_CONNECTED;
}

namespace {

// An MP from `ep` that must go (the target's MPQ may be full for a moment).
glex_ret_t send_within(Nic* nic, glex_ep_handle_t ep, glex_ep_addr_t to, const void* p, size_t n,
                       uint64_t limit_ms) {
  const uint64_t start = now_ms(nic);
  for (uint64_t tries = 0;; ++tries) {
    const glex_ret_t r = glex_send_mp(ep, to, p, static_cast<uint32_t>(n), 0);
    if (r != GLEX_BUSY || now_ms(nic) - start >= limit_ms || tries > 1000000) return r;
  }
}

template <class T>
std::vector<uint8_t> packet(Kind kind, const T& body) {
  Header h{static_cast<uint8_t>(kind), 0, 0, 0};
  std::vector<uint8_t> out(sizeof h + sizeof body);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, &body, sizeof body);
  return out;
}

// Takes request `id` of `vi` back from the connection manager at `manager`.
void cancel_request(via_vi* vi, glex_ep_addr_t manager, uint32_t id) {
  const auto cancel = packet(Kind::kConnCancel, id);
  (void)glex_send_mp(vi->ep, manager, cancel.data(), static_cast<uint32_t>(cancel.size()), 0);
}

// What the connection manager received: a request to hold, or the cancellation of a held one.
void on_manager_mp(Nic* nic, const glex_mp& mp) {
  Header h;
  WireRequest w{};
  if (mp.len < sizeof h) return void(++nic->dropped);
  std::memcpy(&h, mp.data, sizeof h);
  const size_t len = mp.len - sizeof h;
  if (h.kind == static_cast<uint8_t>(Kind::kConnCancel) && len >= 4) {
    uint32_t id;
    std::memcpy(&id, mp.data + sizeof h, 4);
    for (auto* held : {&nic->pending, &nic->peer_pending})
      std::erase_if(*held, [&](const PendingConn& p) { return p.from == mp.src && p.id == id; });
    return;
  }
  const bool peer = h.kind == static_cast<uint8_t>(Kind::kPeerRequest);
  if ((h.kind != static_cast<uint8_t>(Kind::kConnRequest) && !peer) || len < sizeof w)
    return void(++nic->dropped);
  std::memcpy(&w, mp.data + sizeof h, sizeof w);
  if (w.disc_len > VIP_MAX_DISCRIMINATOR_LEN || w.local_disc_len > VIP_MAX_DISCRIMINATOR_LEN)
    return void(++nic->dropped);
  PendingConn p;
  p.from = mp.src;
  p.id = w.id;
  p.attrs = from_wire(w.attrs);
  p.secret = w.attrs.secret;
  p.local_disc.assign(w.disc, w.disc + w.disc_len);
  p.remote_host = w.local_host;
  p.remote_disc.assign(w.local_disc, w.local_disc + w.local_disc_len);
  p.bounce = w.bounce;
  p.bounce_key = w.bounce_key;
  if (peer) {
    const auto taken =
        std::find(nic->peer_taken.begin(), nic->peer_taken.end(), std::pair{mp.src, w.id});
    if (taken != nic->peer_taken.end()) return void(nic->peer_taken.erase(taken));
    // A request sent again (its first may have arrived after all) is held once.
    std::erase_if(nic->peer_pending,
                  [&](const PendingConn& q) { return q.from == mp.src && q.id == w.id; });
  }
  std::deque<PendingConn>& held = peer ? nic->peer_pending : nic->pending;
  if (held.size() >= kMaxHeldRequests) {  // the oldest goes: its requester times out
    held.pop_front();
    ++nic->dropped;
  }
  held.push_back(std::move(p));
}

// The peer request (requester VI, id) is answered: dropped here, or when it comes.
void forget_peer_request(Nic* nic, glex_ep_addr_t from, uint32_t id) {
  const auto n = std::erase_if(nic->peer_pending,
                               [&](const PendingConn& p) { return p.from == from && p.id == id; });
  if (n) return;
  if (nic->peer_taken.size() >= 256) nic->peer_taken.erase(nic->peer_taken.begin());
  nic->peer_taken.emplace_back(from, id);
}

}  // namespace

void deliver_to_manager(Nic* nic, const glex_mp& mp) {
  on_manager_mp(nic, mp);
}

void handle_connection_mp(via_vi* vi, const glex_mp& mp) {
  Header h;
  std::memcpy(&h, mp.data, sizeof h);
  const size_t len = mp.len - sizeof h;
  if (h.kind == static_cast<uint8_t>(Kind::kConnAccept) && len >= sizeof(WireAccept)) {
    WireAccept a;
    std::memcpy(&a, mp.data + sizeof h, sizeof a);
    if (vi->state == VIP_STATE_CONNECT_PENDING && a.id == vi->conn_id) {
      // Connected now: what the server sends next may follow in the same drain.
      connect_to(vi, mp.src, from_wire(a.attrs), a.attrs.secret, a.id, a.bounce, a.bounce_key);
      vi->accepted = true;
      return;
    }
    // An acceptance of a request given up: the accepting VI learns it has no peer.
    Header d{static_cast<uint8_t>(Kind::kDisconnect), 0, 0, a.id};
    (void)glex_send_mp(vi->ep, mp.src, &d, sizeof d, 0);
    return;
  }
  if (h.kind == static_cast<uint8_t>(Kind::kPeerAccept) && len >= sizeof(WirePeerAccept)) {
    WirePeerAccept a;
    std::memcpy(&a, mp.data + sizeof h, sizeof a);
    const uint32_t id = a.id ^ a.matched;
    if (vi->state == VIP_STATE_CONNECT_PENDING && vi->peer_ask && a.matched == vi->peer_ask->id) {
      // The peer matched this VI's request first; its own request is held here or on its way.
      forget_peer_request(vi->nic, mp.src, a.id);
      vi->peer_ask.reset();
      connect_to(vi, mp.src, from_wire(a.attrs), a.attrs.secret, id, a.bounce, a.bounce_key);
      return;
    }
    if (vi->state == VIP_STATE_CONNECTED && mp.src == vi->peer && vi->conn_id == id)
      return;  // both sides matched the other's request at once
    Header d{static_cast<uint8_t>(Kind::kDisconnect), 0, 0, id};  // a request given up
    (void)glex_send_mp(vi->ep, mp.src, &d, sizeof d, 0);
    return;
  }
  if (h.kind == static_cast<uint8_t>(Kind::kConnReject) && len >= 4) {
    uint32_t id;
    std::memcpy(&id, mp.data + sizeof h, 4);
    if (vi->state == VIP_STATE_CONNECT_PENDING && id == vi->conn_id) {
      vi->rejected = true;
      vi->reject_code = h.aux;  // a peer request's: why (VIP_INVALID_RELIABILITY_LEVEL, ..)
    }
    return;
  }
  ++vi->nic->dropped;
}

namespace {

// A request of `vi` from `local` (NULL: the NIC's address, no discriminator) to `remote`.
WireRequest request_of(const via_vi* vi, const VIP_NET_ADDRESS* local,
                       const VIP_NET_ADDRESS* remote) {
  WireRequest w{};
  w.id = random_u32();
  w.attrs = wire_attrs(vi);
  w.bounce = bounce_of(vi);
  w.bounce_key = bounce_key_of(vi);
  w.disc_len = static_cast<uint8_t>(remote->DiscriminatorLen);
  std::memcpy(w.disc, remote->HostAddress + VIP_HOST_ADDRESS_LEN, w.disc_len);
  if (local) {
    w.local_host = host_of(local);
    w.local_disc_len = static_cast<uint8_t>(local->DiscriminatorLen);
    std::memcpy(w.local_disc, local->HostAddress + VIP_HOST_ADDRESS_LEN, w.local_disc_len);
  } else {
    std::memcpy(&w.local_host, vi->nic->address.data(), sizeof w.local_host);
  }
  return w;
}

void give_up(via_vi* vi) {
  vi->peer_ask.reset();
  vi->state = VIP_STATE_IDLE;
}

// Gives the request up and takes it back from the peer's connection manager.
void withdraw(via_vi* vi) {
  cancel_request(vi, vi->peer_ask->remote_host, vi->peer_ask->id);
  give_up(vi);
}

// One step of a peer connection (VIA 1.0 section 2.5: each side asks for the other; the
// connection is made when the two requests meet). Each VI sends its kPeerRequest to the other
// NIC's connection manager, which holds it. A VI that finds its peer's request held at its own
// NIC answers the peer VI with a kPeerAccept and is connected; a VI that gets a kPeerAccept
// first is connected by it. The peer's data follow its kPeerAccept on the same VP pair.
VIP_RETURN peer_step(via_vi* vi, VIP_VI_ATTRIBUTES* remote_attrs, const char* call) {
  Nic* nic = vi->nic;
  if (vi->peer_ask) progress(vi);  // a kPeerAccept, or a refusal of the request on its way
  if (!vi->peer_ask) {
    if (vi->state != VIP_STATE_CONNECTED)
      return fail(VIP_INVALID_STATE,
                  fmt::format("E6581 {}: no peer connection is asked for on this VI", call));
    if (remote_attrs) *remote_attrs = vi->peer_attrs;
    return VIP_SUCCESS;
  }
  PeerAsk& a = *vi->peer_ask;
  if (vi->rejected) {  // the peer found the two VIs do not agree
    const auto why = static_cast<VIP_RETURN>(vi->reject_code);
    give_up(vi);
    if (why == VIP_INVALID_RELIABILITY_LEVEL || why == VIP_INVALID_MTU)
      return fail(why,
                  fmt::format("E6596 {}: the peer's VI has another {}", call,
                              why == VIP_INVALID_MTU ? "MaxTransferSize" : "ReliabilityLevel"));
    return fail(VIP_REJECT, fmt::format("E6597 {}: the peer refused the connection", call));
  }
  glex_mp mp;
  while (glex_recv_mp(nic->cm, 0, &mp) == GLEX_SUCCESS) on_manager_mp(nic, mp);
  auto it =
      std::find_if(nic->peer_pending.begin(), nic->peer_pending.end(), [&](const PendingConn& p) {
        return p.local_disc == a.local_disc && p.remote_disc == a.remote_disc &&
               p.remote_host == a.remote_host;
      });
  if (it != nic->peer_pending.end()) {
    const PendingConn p = std::move(*it);
    nic->peer_pending.erase(it);
    const uint32_t mine = a.id;
    // VIs that do not agree: the peer VI is told why (its own request may not have reached
    // this NIC yet), and this side's request is withdrawn.
    const bool level = p.attrs.ReliabilityLevel != vi->attrs.ReliabilityLevel;
    if (level || p.attrs.MaxTransferSize != vi->attrs.MaxTransferSize) {
      const VIP_RETURN why = level ? VIP_INVALID_RELIABILITY_LEVEL : VIP_INVALID_MTU;
      auto reject = packet(Kind::kConnReject, p.id);
      reinterpret_cast<Header*>(reject.data())->aux = static_cast<uint16_t>(why);
      (void)glex_send_mp(vi->ep, p.from, reject.data(), static_cast<uint32_t>(reject.size()), 0);
      withdraw(vi);
      return level
                 ? fail(why, fmt::format("E6582 {}: ReliabilityLevel {} here, {} at the peer", call,
                                         vi->attrs.ReliabilityLevel, p.attrs.ReliabilityLevel))
                 : fail(why, fmt::format("E6583 {}: MaxTransferSize {} here, {} at the peer", call,
                                         vi->attrs.MaxTransferSize, p.attrs.MaxTransferSize));
    }
    const auto bytes =
        packet(Kind::kPeerAccept,
               WirePeerAccept{mine, p.id, wire_attrs(vi), bounce_of(vi), bounce_key_of(vi), 0});
    if (glex_ret_t g = send_within(nic, vi->ep, p.from, bytes.data(), bytes.size(), 1000);
        g != GLEX_SUCCESS) {
      give_up(vi);
      return fail(VIP_NOT_REACHABLE,
                  fmt::format("E6584 {}: the peer VI is gone: {}", call, glex_last_error()));
    }
    vi->peer_ask.reset();
    connect_to(vi, p.from, p.attrs, p.secret, mine ^ p.id, p.bounce, p.bounce_key);
    ++vi->mps_unpolled;
    if (remote_attrs) *remote_attrs = vi->peer_attrs;
    return VIP_SUCCESS;
  }
  const uint64_t now = now_ms(nic);
  if (a.timeout_ms != VIP_INFINITE && now - a.start_ms >= a.timeout_ms) {
    const uint64_t limit = a.timeout_ms;
    withdraw(vi);
    return fail(VIP_TIMEOUT,
                fmt::format("E6585 {}: the peer asked for no matching connection within {} ms",
                            call, limit));
  }
  // Sent again while the peer's connection manager is not there (not started yet) or full.
  if ((!a.sent || vi->unreachable) && now - a.sent_ms >= 10) {
    vi->unreachable = false;
    a.sent_ms = now;
    const glex_ret_t r = glex_send_mp(vi->ep, a.remote_host, a.bytes.data(),
                                      static_cast<uint32_t>(a.bytes.size()), 0);
    if (r == GLEX_SUCCESS) {
      a.sent = true;
      ++vi->mps_unpolled;
    } else if (r != GLEX_BUSY && r != GLEX_NO_RESOURCE && r != GLEX_UNREACHABLE &&
               r != GLEX_PEER_DEAD) {
      give_up(vi);
      return fail(VIP_NOT_REACHABLE,
                  fmt::format("E6586 {}: node {} VP {}: {}", call, GLEX_EP_ADDR_NODE(a.remote_host),
                              GLEX_EP_ADDR_VP(a.remote_host), glex_last_error()));
    }
  }
  return VIP_NOT_DONE;
}

}  // namespace

}  // namespace galaxy::via

using namespace galaxy::via;

extern "C" {

VIP_RETURN VipConnectRequest(VIP_VI_HANDLE vi, VIP_NET_ADDRESS* local, VIP_NET_ADDRESS* remote,
                             VIP_ULONG timeout, VIP_VI_ATTRIBUTES* remote_attrs) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6561 VipConnectRequest: ViHandle is NULL");
  Nic* nic = vi->nic;
  std::lock_guard lock(nic->mu);
  if (!valid_address(remote) || (local && !valid_address(local)))
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6562 VipConnectRequest: an address must have HostAddressLen {} and "
                            "DiscriminatorLen <= {}",
                            VIP_HOST_ADDRESS_LEN, VIP_MAX_DISCRIMINATOR_LEN));
  if (timeout == 0) return fail(VIP_INVALID_PARAMETER, "E6563 VipConnectRequest: Timeout = 0");
  if (vi->state != VIP_STATE_IDLE)
    return fail(VIP_INVALID_STATE, "E6564 VipConnectRequest: the VI is not idle");
  WireRequest w = request_of(vi, local, remote);
  const glex_ep_addr_t manager = host_of(remote);
  const auto bytes = packet(Kind::kConnRequest, w);
  // Until the timeout: a server whose connection manager is not open yet (it may be starting
  // beside this client) is asked again every 10 ms, as a request waits for its ConnectWait.
  const uint64_t start = now_ms(nic);
  std::string why;
  for (;;) {
    const uint64_t elapsed = now_ms(nic) - start;
    if (elapsed >= timeout) break;
    vi->conn_id = w.id = random_u32();
    std::memcpy(const_cast<uint8_t*>(bytes.data()) + sizeof(Header), &w.id, sizeof w.id);
    vi->accepted = vi->rejected = vi->unreachable = false;
    const glex_ret_t r =
        send_within(nic, vi->ep, manager, bytes.data(), bytes.size(), timeout - elapsed);
    if (r == GLEX_SUCCESS) {
      vi->state = VIP_STATE_CONNECT_PENDING;
      ++vi->mps_unpolled;
      wait_until(vi, timeout - std::min<uint64_t>(timeout, now_ms(nic) - start),
                 [&] { return vi->accepted || vi->rejected || vi->unreachable; });
      if (vi->accepted) {
        if (remote_attrs) *remote_attrs = vi->peer_attrs;
        return VIP_SUCCESS;
      }
      vi->state = VIP_STATE_IDLE;
      if (vi->rejected) return fail(VIP_REJECT, "E6566 VipConnectRequest: the server rejected it");
      if (!vi->unreachable) {  // asked and unanswered: the request is withdrawn
        cancel_request(vi, manager, w.id);
        break;
      }
      why = "no connection manager there";
    } else if (r == GLEX_UNREACHABLE || r == GLEX_PEER_DEAD) {
      why = glex_last_error();
    } else if (r != GLEX_BUSY) {
      return fail(VIP_NOT_REACHABLE, fmt::format("E6565 VipConnectRequest: node {} VP {}: {}",
                                                 GLEX_EP_ADDR_NODE(manager),
                                                 GLEX_EP_ADDR_VP(manager), glex_last_error()));
    }
    wait_until(vi, 10, [] { return false; });
  }
  return fail(VIP_TIMEOUT,
              fmt::format("E6568 VipConnectRequest: no answer from node {} VP {} within {} ms{}{}",
                          GLEX_EP_ADDR_NODE(manager), GLEX_EP_ADDR_VP(manager), timeout,
                          why.empty() ? "" : ": ", why));
}

VIP_RETURN VipConnectWait(VIP_NIC_HANDLE nic, VIP_NET_ADDRESS* local, VIP_ULONG timeout,
                          VIP_NET_ADDRESS* remote, VIP_VI_ATTRIBUTES* remote_attrs,
                          VIP_CONN_HANDLE* conn) {
  if (!nic || !conn) return fail(VIP_INVALID_PARAMETER, "E6569 VipConnectWait: a handle is NULL");
  std::lock_guard lock(nic->mu);
  if (!valid_address(local))
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6570 VipConnectWait: LocalAddr must have HostAddressLen {} and "
                            "DiscriminatorLen <= {}",
                            VIP_HOST_ADDRESS_LEN, VIP_MAX_DISCRIMINATOR_LEN));
  const std::vector<uint8_t> want(
      local->HostAddress + VIP_HOST_ADDRESS_LEN,
      local->HostAddress + VIP_HOST_ADDRESS_LEN + local->DiscriminatorLen);
  const uint64_t start = now_ms(nic);
  uint64_t waited = 0;
  for (;;) {
    glex_mp mp;
    while (glex_recv_mp(nic->cm, 0, &mp) == GLEX_SUCCESS) on_manager_mp(nic, mp);
    for (auto it = nic->pending.begin(); it != nic->pending.end(); ++it) {
      if (it->local_disc != want) continue;
      auto c = std::make_unique<via_conn>();
      c->nic = nic;
      c->request = std::move(*it);
      nic->pending.erase(it);
      if (remote) {
        remote->HostAddressLen = VIP_HOST_ADDRESS_LEN;
        remote->DiscriminatorLen = static_cast<VIP_UINT16>(c->request.remote_disc.size());
        std::memcpy(remote->HostAddress, &c->request.remote_host, VIP_HOST_ADDRESS_LEN);
        std::memcpy(remote->HostAddress + VIP_HOST_ADDRESS_LEN, c->request.remote_disc.data(),
                    c->request.remote_disc.size());
      }
      if (remote_attrs) *remote_attrs = c->request.attrs;
      *conn = c.get();
      nic->conns.push_back(std::move(c));
      return VIP_SUCCESS;
    }
    const uint64_t elapsed = std::max(now_ms(nic) - start, waited);
    if (timeout != VIP_INFINITE && elapsed >= timeout)
      return fail(VIP_TIMEOUT,
                  fmt::format("E6571 VipConnectWait: no request within {} ms", timeout));
    const auto slice = static_cast<int32_t>(
        std::min<uint64_t>(timeout == VIP_INFINITE ? 100 : timeout - elapsed, 100));
    if (glex_recv_mp(nic->cm, slice, &mp) == GLEX_SUCCESS)
      on_manager_mp(nic, mp);
    else
      waited += static_cast<uint64_t>(slice);
  }
}

VIP_RETURN VipConnectAccept(VIP_CONN_HANDLE conn, VIP_VI_HANDLE vi) {
  if (!conn || !vi) return fail(VIP_INVALID_PARAMETER, "E6572 VipConnectAccept: a handle is NULL");
  Nic* nic = conn->nic;
  std::lock_guard lock(nic->mu);
  if (vi->nic != nic)
    return fail(VIP_INVALID_PARAMETER, "E6573 VipConnectAccept: the VI is of another NIC");
  if (vi->state != VIP_STATE_IDLE)
    return fail(VIP_INVALID_STATE, "E6574 VipConnectAccept: the VI is not idle");
  // The two VIs must agree; a refusal sends nothing, so the server may change its VI and retry.
  const PendingConn& r = conn->request;
  if (r.attrs.ReliabilityLevel != vi->attrs.ReliabilityLevel)
    return fail(VIP_INVALID_RELIABILITY_LEVEL,
                fmt::format("E6575 VipConnectAccept: ReliabilityLevel {} here, {} at the requester",
                            vi->attrs.ReliabilityLevel, r.attrs.ReliabilityLevel));
  if (r.attrs.MaxTransferSize != vi->attrs.MaxTransferSize)
    return fail(VIP_INVALID_MTU,
                fmt::format("E6576 VipConnectAccept: MaxTransferSize {} here, {} at the requester",
                            vi->attrs.MaxTransferSize, r.attrs.MaxTransferSize));
  const auto bytes = packet(Kind::kConnAccept,
                            WireAccept{r.id, wire_attrs(vi), bounce_of(vi), bounce_key_of(vi), 0});
  if (glex_ret_t g = send_within(nic, vi->ep, r.from, bytes.data(), bytes.size(), 1000);
      g != GLEX_SUCCESS)
    return fail(VIP_NOT_REACHABLE, fmt::format("E6577 VipConnectAccept: the requester is gone: {}",
                                               glex_last_error()));
  connect_to(vi, r.from, r.attrs, r.secret, r.id, r.bounce, r.bounce_key);
  ++vi->mps_unpolled;
  std::erase_if(nic->conns, [&](const auto& c) { return c.get() == conn; });
  return VIP_SUCCESS;
}

VIP_RETURN VipConnectReject(VIP_CONN_HANDLE conn) {
  if (!conn) return fail(VIP_INVALID_PARAMETER, "E6578 VipConnectReject: ConnHandle is NULL");
  Nic* nic = conn->nic;
  std::lock_guard lock(nic->mu);
  const auto bytes = packet(Kind::kConnReject, conn->request.id);
  (void)send_within(nic, nic->cm, conn->request.from, bytes.data(), bytes.size(), 1000);
  std::erase_if(nic->conns, [&](const auto& c) { return c.get() == conn; });
  return VIP_SUCCESS;
}

VIP_RETURN VipConnectPeerRequest(VIP_VI_HANDLE vi, VIP_NET_ADDRESS* local, VIP_NET_ADDRESS* remote,
                                 VIP_ULONG timeout) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6587 VipConnectPeerRequest: ViHandle is NULL");
  std::lock_guard lock(vi->nic->mu);
  if (!valid_address(remote) || (local && !valid_address(local)))
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6588 VipConnectPeerRequest: an address must have HostAddressLen {} "
                            "and DiscriminatorLen <= {}",
                            VIP_HOST_ADDRESS_LEN, VIP_MAX_DISCRIMINATOR_LEN));
  if (timeout == 0) return fail(VIP_INVALID_PARAMETER, "E6589 VipConnectPeerRequest: Timeout = 0");
  if (vi->state != VIP_STATE_IDLE)
    return fail(VIP_INVALID_STATE, "E6590 VipConnectPeerRequest: the VI is not idle");
  const WireRequest w = request_of(vi, local, remote);
  PeerAsk a;
  a.id = w.id;
  a.local_disc.assign(w.local_disc, w.local_disc + w.local_disc_len);
  a.remote_host = host_of(remote);
  a.remote_disc.assign(w.disc, w.disc + w.disc_len);
  a.bytes = packet(Kind::kPeerRequest, w);
  a.start_ms = now_ms(vi->nic);
  a.timeout_ms = timeout;
  vi->peer_ask = std::move(a);
  vi->conn_id = w.id;
  vi->unreachable = vi->rejected = false;
  vi->state = VIP_STATE_CONNECT_PENDING;
  const VIP_RETURN r = peer_step(vi, nullptr, "VipConnectPeerRequest");
  return r == VIP_NOT_DONE ? VIP_SUCCESS : r;
}

VIP_RETURN VipConnectPeerDone(VIP_VI_HANDLE vi, VIP_VI_ATTRIBUTES* remote_attrs) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6591 VipConnectPeerDone: ViHandle is NULL");
  std::lock_guard lock(vi->nic->mu);
  return peer_step(vi, remote_attrs, "VipConnectPeerDone");
}

VIP_RETURN VipConnectPeerWait(VIP_VI_HANDLE vi, VIP_VI_ATTRIBUTES* remote_attrs) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6592 VipConnectPeerWait: ViHandle is NULL");
  std::lock_guard lock(vi->nic->mu);
  int32_t slice = 1;
  bool on_manager = true;
  for (;;) {
    const VIP_RETURN r = peer_step(vi, remote_attrs, "VipConnectPeerWait");
    if (r != VIP_NOT_DONE) return r;
    // The peer's request comes to the connection manager, its kPeerAccept to the VI: waits on
    // each in turn, slices doubling to 64 ms while nothing comes.
    bool got;
    if (on_manager) {
      glex_mp mp;
      got = glex_recv_mp(vi->nic->cm, slice, &mp) == GLEX_SUCCESS;
      if (got) on_manager_mp(vi->nic, mp);
    } else {
      got = wait_slice(vi, slice);
    }
    on_manager = !on_manager;
    slice = got ? 1 : std::min(slice * 2, 64);
  }
}

VIP_RETURN VipDisconnect(VIP_VI_HANDLE vi) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6579 VipDisconnect: ViHandle is NULL");
  std::lock_guard lock(vi->nic->mu);
  if (vi->state == VIP_STATE_IDLE)
    return fail(VIP_INVALID_STATE, "E6580 VipDisconnect: the VI is not connected");
  if (vi->peer_ask) {  // a peer connection asked for and not made
    withdraw(vi);
    return VIP_SUCCESS;
  }
  progress(vi);  // what the peer sent before is taken first
  to_idle(vi);
  return VIP_SUCCESS;
}

}  // extern "C"
