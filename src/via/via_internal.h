// The VIA provider's state (docs/via.md): a NIC handle over one glex device, its VIs (one glex
// endpoint, so one VP, each), completion queues, protection tags and the user-level registration
// table. Everything here runs on the caller's thread under the NIC's lock; the NIC's own work
// (moving data, checking keys) is libglex's.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "glex.h"
#include "via.h"

namespace galaxy::via {

// ---- Limits (reported by VipQueryNic) -----------------------------------------------------------
inline constexpr uint8_t kCmVp = 7;                 // the connection manager's VP on every NIC
inline constexpr uint32_t kMaxSegments = 32;        // per descriptor, address segment included
inline constexpr uint32_t kRingSlots = 256;         // a work queue's ring; more wait in overflow
inline constexpr uint32_t kMaxQueued = 65536;       // a work queue's ring plus its overflow
inline constexpr uint32_t kMaxTransfer = 1u << 30;  // a VI's MaxTransferSize at most
inline constexpr uint32_t kMaxCqEntries = 65536;
inline constexpr size_t kMaxHeldRequests = 4096;  // connection requests a manager holds, each kind
inline constexpr uint32_t kMaxRegions =
    120;  // two ATT entries each (the user's and the provider's)

// ---- Packets between two VIs, each one MP (docs/via.md "Packets") -------------------------------
enum class Kind : uint8_t {
  kConnRequest = 1,  // requester VI -> connection manager
  kConnCancel,       // requester VI -> connection manager: the request timed out
  kConnAccept,       // accepting VI -> requester VI
  kConnReject,       // connection manager -> requester VI
  kDisconnect,       // either VI -> the other
  kEager,            // a send of up to kEagerMax bytes, carried whole
  kRts,              // a larger send: its length and first segments; the receiver reads it
  kRtsMore,          // further segments of a kRts
  kFin,              // receiver -> sender: a kRts is read (or refused)
  kAck,              // receiver -> sender: a kEager is placed (reliable reception)
  kWriteImm,         // after an RDMA write's data: its immediate, which consumes a receive
  kError,            // a VI fell into the error state; its peer follows
  kFrag,             // a send of up to kFragMax bytes in several MPs: its length, the first bytes
  kFragMore,         // the following bytes of a kFrag
  kBounce,           // a send put into a slot of the receiver's bounce ring (aux: the slot)
  kCredit,           // receiver -> sender: how many bounce slots it has emptied in all
  kPeerRequest,      // a VI asking for a peer connection -> the other NIC's connection manager
  kPeerAccept,       // a VI that matched its peer's request -> that VI: the connection is made
};
struct Header {
  uint8_t kind;
  uint8_t flags;  // kFlagImmediate
  uint16_t aux;   // kRts: segment count; kFin, kError: a Reason
  uint32_t imm;   // immediate data
};
static_assert(sizeof(Header) == 8);
inline constexpr uint8_t kFlagImmediate = 0x1;
inline constexpr uint32_t kEagerMax = GLEX_MP_PAYLOAD - sizeof(Header);
// Sends up to this size go as a train of MPs copied into the receive (no memory registered at
// the peer, no round trip); larger ones are read by the receiver. Measured on a live host
// (docs/via.md): a train of MPs beats the read up to several KiB.
inline constexpr uint32_t kFragMax = 1024;
// Each VI's bounce ring: memory its peer puts sends of up to a slot into (one copy on a host,
// shared memory), announced when it connects; the receiver copies them into the receive and
// hands slots back in batches (kCredit).
inline constexpr uint32_t kBounceSlot = 16384;
inline constexpr uint32_t kBounceSlots = 16;
inline constexpr uint32_t kCreditBatch = 4;

// A VIA address of this provider: 8 bytes of host address, the NIC's connection manager.
inline bool valid_address(const VIP_NET_ADDRESS* a) {
  return a && a->HostAddressLen == VIP_HOST_ADDRESS_LEN &&
         a->DiscriminatorLen <= VIP_MAX_DISCRIMINATOR_LEN;
}
inline glex_ep_addr_t host_of(const VIP_NET_ADDRESS* a) {
  glex_ep_addr_t h;
  std::memcpy(&h, a->HostAddress, sizeof h);
  return h;
}
struct WireSegment {  // a sender's piece of a kRts: the receiver reads it by RDMA get
  uint64_t addr;
  uint32_t len;
  uint32_t key;  // glex_mem_key of the provider's registration
};
static_assert(sizeof(WireSegment) == 16);
inline constexpr uint32_t kRtsFirstSegments = (kEagerMax - 8) / sizeof(WireSegment);  // 6
inline constexpr uint32_t kRtsMoreSegments = kEagerMax / sizeof(WireSegment);         // 7

enum class Reason : uint16_t { kNone = 0, kRecvQueueEmpty, kLength, kProtection, kTransport };

// ---- Objects behind the handles
// --------------------------------------------------------------------
struct Nic;
struct Vi;

}  // namespace galaxy::via

struct via_ptag {
  galaxy::via::Nic* nic;
  uint32_t secret;  // scrambles this tag's memory handles: only a VI of the same tag reads them
  uint32_t users = 0;
};

struct via_cq {
  galaxy::via::Nic* nic;
  uint32_t capacity;
  std::deque<std::pair<via_vi*, bool>> entries;  // (VI, receive queue), in completion order
  std::vector<via_vi*> vis;                      // VIs whose queues complete here
};

namespace galaxy::via {

struct OutMp {  // an MP waiting for room at the target or behind earlier ones (in order)
  std::vector<uint8_t> bytes;
  uint32_t flags = 0;
  std::optional<uint64_t> finishes_send;  // a send's sequence that completes when it leaves
};

// One posted descriptor and the provider's progress on it.
struct Work {
  VIP_DESCRIPTOR* d = nullptr;
  uint64_t seq = 0;
  bool finished = false;  // its outcome is known (status below); published in order
  uint32_t status = 0;    // VIP_STATUS_* without DONE
  uint32_t length = 0;
  uint32_t imm = 0;
  // The NIC operations it needs (RDMA pieces), issued in order, and how many completed.
  struct Op {
    uint32_t glex_op;
    void* local;
    glex_mem_handle_t local_mh;
    uint64_t remote;
    glex_mem_handle_t remote_mh;
    uint64_t len;
  };
  std::vector<Op> ops;
  size_t issued = 0, completed = 0;
  bool started = false;
  bool awaiting_fin = false;  // a kFin from the peer finishes it (a kRts sent)
  bool awaiting_ack = false;  // a kAck from the peer finishes it (reliable reception)
  std::optional<OutMp> tail;  // an MP that follows the ops, fenced (kWriteImm, kBounce)
  uint32_t mps_to_leave = 0;  // MPs that finish it when they leave
  // Receive side of a kRts: the sender's segments still to come, and its sequence number.
  std::vector<WireSegment> rts;
  uint32_t rts_segments = 0, rts_len = 0, rts_seq = 0;
};

// A work queue: a ring of kRingSlots descriptors in order (the NIC's), an overflow on the host
// when it is full (MyVIA's overflow ring), and the cursors of issue, completion and return.
struct WorkQueue {
  std::array<Work, kRingSlots> ring{};
  std::deque<Work> overflow;
  uint64_t head = 0;       // oldest not yet returned by Done
  uint64_t tail = 0;       // next in the ring
  uint64_t next = 0;       // next to issue (send) or to match (receive)
  uint64_t published = 0;  // descriptors before it have DONE written
  uint64_t next_seq = 0;
  Work& at(uint64_t i) { return ring[i % kRingSlots]; }
  size_t posted() const { return static_cast<size_t>(tail - head) + overflow.size(); }
  bool ring_full() const { return tail - head == kRingSlots; }
};

struct Region {
  uintptr_t addr = 0;
  uint64_t len = 0;
  via_ptag* ptag = nullptr;
  bool write = false, read = false;
  glex_mem_handle_t own_mh = 0;                // the provider's (read and write, sends by get)
  std::optional<glex_mem_handle_t> remote_mh;  // the user's, with the rights peers get
};

struct PendingConn {  // a connection request the connection manager holds
  glex_ep_addr_t from;
  uint32_t id;
  VIP_VI_ATTRIBUTES attrs{};
  uint32_t secret;
  std::vector<uint8_t> local_disc;  // the discriminator asked for
  uint64_t remote_host;             // the requester's own address and discriminator
  std::vector<uint8_t> remote_disc;
  uint64_t bounce = 0;  // the requester's bounce ring and its key
  uint32_t bounce_key = 0;
};

// A peer-to-peer connection asked for by a VI (VipConnectPeerRequest), until it is made.
struct PeerAsk {
  uint32_t id = 0;                  // this side's request (the VI's conn_id meanwhile)
  std::vector<uint8_t> local_disc;  // this VI's discriminator
  uint64_t remote_host = 0;         // the peer NIC's connection manager
  std::vector<uint8_t> remote_disc;
  std::vector<uint8_t> bytes;  // the kPeerRequest, sent again while nobody takes it
  uint64_t start_ms = 0, timeout_ms = 0, sent_ms = 0;
  bool sent = false;
};

// A handler to call once its VI queue or CQ has a completion (VipSendNotify, VipRecvNotify,
// VipCQNotify).
struct Notify {
  via_vi* vi = nullptr;  // a VI queue's ...
  bool recv = false;
  via_cq* cq = nullptr;  // ... or a CQ's
  VIP_PVOID context = nullptr;
  VIP_VI_NOTIFY_HANDLER on_descriptor = nullptr;
  VIP_CQ_NOTIFY_HANDLER on_entry = nullptr;
};

struct Nic {
  std::recursive_mutex mu;
  glex_device_handle_t dev = nullptr;
  bool owns_device = false;       // opened by VipOpenNic (closed with the NIC)
  glex_ep_handle_t cm = nullptr;  // the connection manager's endpoint
  std::array<uint8_t, 8> address{};
  std::vector<std::unique_ptr<via_ptag>> ptags;
  std::vector<std::unique_ptr<via_cq>> cqs;
  std::vector<std::unique_ptr<via_vi>> vis;
  std::unordered_map<uint32_t, Region> regions;  // the user-level registration table
  std::deque<PendingConn> pending;               // client-server requests, for VipConnectWait
  std::deque<PendingConn> peer_pending;          // peer requests, for a VI's VipConnectPeerRequest
  // Peer requests answered by their VI's kPeerAccept before the request itself was read here
  // (requester VI, request id): dropped when they come.
  std::vector<std::pair<glex_ep_addr_t, uint32_t>> peer_taken;
  std::vector<std::unique_ptr<via_conn>> conns;
  std::unordered_map<std::string, uint32_t> hosts;  // the name service's table
  std::deque<Notify> notifies;                      // in the order asked
  std::thread notifier;  // started by the first: answers them (via_notify.cc)
  std::condition_variable_any notify_cv;
  bool notifier_stop = false;
  VIP_ERROR_HANDLER handler = nullptr;
  VIP_PVOID handler_context = nullptr;
  uint64_t dropped = 0;  // MPs from no connected peer, sends to no posted receive (unreliable)

  const Region* region(VIP_MEM_HANDLE h) const {
    auto it = regions.find(h);
    return it == regions.end() ? nullptr : &it->second;
  }
  void report(via_vi* vi, VIP_DESCRIPTOR* d, VIP_RESOURCE_CODE resource, VIP_ERROR_CODE code);
};

uint32_t random_u32();
VIP_RETURN fail(VIP_RETURN ret, std::string message);
VIP_RETURN from_glex(glex_ret_t r);

}  // namespace galaxy::via

struct via_nic : galaxy::via::Nic {};

struct via_conn {
  galaxy::via::Nic* nic;
  galaxy::via::PendingConn request;
};

struct via_vi {
  galaxy::via::Nic* nic;
  glex_ep_handle_t ep = nullptr;
  VIP_VI_ATTRIBUTES attrs{};
  via_cq* send_cq = nullptr;
  via_cq* recv_cq = nullptr;
  VIP_VI_STATE state = VIP_STATE_IDLE;
  // The connection: the peer VI, its attributes, its tag's secret, the request's id.
  glex_ep_addr_t peer = 0;
  VIP_VI_ATTRIBUTES peer_attrs{};
  uint32_t peer_secret = 0;
  uint32_t conn_id = 0;
  bool accepted = false, rejected = false, unreachable = false;  // a request's outcome
  uint16_t reject_code = 0;  // why a peer request was rejected (a VIP_RETURN; 0: refused)
  std::optional<galaxy::via::PeerAsk> peer_ask;  // a peer connection asked for
  galaxy::via::WorkQueue sendq, recvq;
  std::deque<galaxy::via::OutMp> out;
  size_t ops_in_flight = 0;  // glex RDMA issued and not completed: a wait watches the CQ
  // The peer ended the connection while this side's RDMA was in flight: nothing more starts,
  // and the error state waits for those completions, which say what reached the peer.
  bool peer_ended = false;
  size_t mps_unpolled = 0;  // MPs sent since the CQ was last read (a refused one lands there)
  uint64_t assembling = UINT64_MAX;  // the receive taking a kRts's further segments
  uint32_t skip_more = 0;            // further segments of a kRts that matched no receive
  // The bounce rings: this VI's (peers put into it), the peer's, and the slots' accounts.
  void* bounce = nullptr;
  bool bounce_shared = false;  // glex_alloc_mem's (else aligned_alloc's)
  glex_mem_handle_t bounce_mh = 0;
  uint64_t peer_bounce = 0;  // 0: the peer has none
  glex_mem_handle_t peer_bounce_mh = 0;
  uint64_t slots_used = 0, slots_freed = 0;     // of the peer's ring
  uint32_t slots_emptied = 0, credit_sent = 0;  // of this VI's ring
  uint64_t filling = UINT64_MAX;                // the receive taking a kFrag's further bytes
  uint32_t fill_at = 0, fill_total = 0, fill_skip = 0;  // where, how many; bytes to pass over
};

namespace galaxy::via {

// The progress engine (via_queue.cc): everything that arrived for a VI, and everything it can
// start; then completions published in order.
void progress(via_vi* vi);
// Waits (at most timeout_ms; VIP_INFINITE for ever) until done() holds, making progress.
template <class F>
bool wait_until(via_vi* vi, VIP_ULONG timeout_ms, F&& done);
bool wait_slice(via_vi* vi, int32_t slice_ms);
uint64_t now_ms(Nic* nic);
// Sends one MP of the VI's protocol, behind any still queued; false: the connection is lost.
void send_mp(via_vi* vi, const Header& h, const void* body, size_t len, uint32_t flags = 0,
             std::optional<uint64_t> finishes_send = std::nullopt);
// Tells a connected VI's peer that the connection ends (kDisconnect) or broke (kError), in a
// packet naming the connection.
void end_connection(via_vi* vi, Kind why);
void enter_error(via_vi* vi, VIP_ERROR_CODE code, bool tell_peer);
void flush(via_vi* vi);
void to_idle(via_vi* vi);
void handle_connection_mp(via_vi* vi, const glex_mp& mp);  // via_connect.cc
void free_bounce(via_vi* vi);                              // via_vi.cc
// The CQ's oldest entry, taken off; with none, its VIs make progress first. False: still none.
bool take_entry(via_cq* cq, via_vi** vi, bool* recv);
// The next completed descriptor of a VI queue, taken off (VIP_NOT_DONE: none yet).
VIP_RETURN take_completed(via_vi* vi, VIP_DESCRIPTOR** out, bool recv);
// Stops the NIC's notifier thread (not under the NIC's lock); drops notifications of a VI or CQ.
void stop_notifier(Nic* nic);
void drop_notifies(Nic* nic, const via_vi* vi, const via_cq* cq);
// A NIC handle over a device the caller opened and closes (the tests' and the fuzz target's
// in-process simulated devices); VipOpenNic opens its own.
VIP_RETURN open_nic_on(glex_device_handle_t dev, VIP_NIC_HANDLE* out);
// An MP as if it had arrived on the VI's VP (the fuzz target), and a connection made by hand.
void deliver(via_vi* vi, const glex_mp& mp);
void deliver_to_manager(Nic* nic, const glex_mp& mp);  // as if it came to the NIC's manager
void connect_to(via_vi* vi, glex_ep_addr_t peer, const VIP_VI_ATTRIBUTES& attrs, uint32_t secret,
                uint32_t id, uint64_t bounce, uint32_t bounce_key);

template <class F>
bool wait_until(via_vi* vi, VIP_ULONG timeout_ms, F&& done) {
  const uint64_t start = now_ms(vi->nic);
  uint64_t waited = 0;
  for (;;) {
    progress(vi);
    if (done()) return true;
    const uint64_t elapsed = std::max(now_ms(vi->nic) - start, waited);
    if (timeout_ms != VIP_INFINITE && elapsed >= timeout_ms) return false;
    const uint64_t left = timeout_ms == VIP_INFINITE ? 100 : timeout_ms - elapsed;
    const int32_t slice = static_cast<int32_t>(std::min<uint64_t>(left, 100));
    if (!wait_slice(vi, slice)) waited += static_cast<uint64_t>(slice);
  }
}

}  // namespace galaxy::via
