// Galaxy's libfabric provider (docs/libfabric.md): FI_EP_RDM with FI_MSG, FI_TAGGED and FI_RMA
// over libglex's public API alone, so it is one more client of libglex and adds no data path of
// its own. A domain is one glex device (one NIC), an endpoint one glex endpoint (one VP).
//
// Every object of a domain is guarded by the domain's lock (FI_THREAD_SAFE); progress is manual
// and runs inside the calls that read a CQ or a counter, post, or wait.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "glex.h"

namespace galaxy::fi {

inline constexpr const char* kProviderName = "galaxy";
inline constexpr uint32_t kProviderVersion = FI_VERSION(1, 0);
inline constexpr uint32_t kApiVersion = FI_VERSION(1, 17);

// ---- Limits (reported in fi_info) ---------------------------------------------------------------
inline constexpr size_t kMaxMsgSize = size_t{1} << 30;
inline constexpr size_t kAddrLen = sizeof(glex_ep_addr_t);  // NIC chip id << 8 | VP
inline constexpr size_t kTxSize = 4096;   // queued MPs before a post returns -FI_EAGAIN
inline constexpr size_t kRxSize = 65536;  // posted receives
inline constexpr size_t kMaxIov = 1;      // one buffer per operation
// Progress called in a loop (the caller back within kPollGapNs) that finds nothing yields the
// core after kYieldAfterNs and waits in the NIC after kIdleBeforeWaitNs (docs/libfabric.md
// "Progress").
inline constexpr uint64_t kPollGapNs = 50'000;
inline constexpr uint64_t kYieldAfterNs = 10'000;
inline constexpr uint64_t kIdleBeforeWaitNs = 2'000'000;
inline constexpr uint64_t kMaxRmaKey = ~uint64_t{0};

// ---- Packets between two endpoints, each one MP (docs/libfabric.md "Packets") -------------------
enum class Kind : uint8_t {
  kMsg = 1,   // a message's first bytes: its length, tag, data; the whole of a short one
  kMore,      // the following bytes of a kMsg (head.word: their offset)
  kRts,       // a long message: its length and where the receiver reads it
  kFin,       // receiver -> sender: a kRts is read (head.word: 0) or refused (non-zero)
  kWriteData  // after an RDMA write's data (fenced): the remote CQ data (head.word)
};
struct Head {
  uint8_t kind;
  uint8_t flags;  // kTagged, kHasData
  uint16_t reserved;
  uint32_t seq;   // the message's number in the (source, target) pair's order
  uint64_t word;  // kMsg, kRts: the tag; kMore: the offset; kFin: the status; kWriteData: data
};
static_assert(sizeof(Head) == 16);
inline constexpr uint8_t kTagged = 0x1;
inline constexpr uint8_t kHasData = 0x2;
struct MsgHead {  // after a kMsg's Head
  uint64_t len;   // the whole message
  uint64_t data;  // remote CQ data (meaningful with kHasData)
};
struct RtsBody {  // after a kRts's Head
  uint64_t len;
  uint64_t data;
  uint64_t addr;  // the sender's buffer
  uint64_t mh;    // its registration (the receiver reads it with an RDMA get)
};
inline constexpr uint32_t kMsgFirst = GLEX_MP_PAYLOAD - sizeof(Head) - sizeof(MsgHead);  // 88
inline constexpr uint32_t kMoreBytes = GLEX_MP_PAYLOAD - sizeof(Head);                   // 104
// Messages up to this size go as a train of MPs (no registration, no round trip); longer ones
// are read by the receiver (rendezvous). The same bound is the inject size.
inline constexpr size_t kEagerMax = 4096;

struct Domain;
struct Endpoint;
struct Cq;
struct Cntr;
struct Av;

// ---- Completion queue
// ----------------------------------------------------------------------------
struct CqFid {
  fid_cq cq;
  Cq* self;
};
struct Completion {
  fi_cq_tagged_entry e{};
  fi_addr_t src = FI_ADDR_NOTAVAIL;
};
struct Cq {
  CqFid fid{};
  Domain* domain = nullptr;
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  std::deque<Completion> done;
  std::deque<fi_cq_err_entry> errors;
  std::vector<Endpoint*> eps;  // whose progress reading this CQ drives
  uint32_t refs = 0;           // endpoints bound
};

// ---- Counter ------------------------------------------------------------------------------------
struct CntrFid {
  fid_cntr cntr;
  Cntr* self;
};
struct Cntr {
  CntrFid fid{};
  Domain* domain = nullptr;
  uint64_t value = 0;
  uint64_t errors = 0;
  std::vector<Endpoint*> eps;
  uint32_t refs = 0;
};

// ---- Address vector
// ------------------------------------------------------------------------------
struct AvFid {
  fid_av av;
  Av* self;
};
struct Av {
  AvFid fid{};
  Domain* domain = nullptr;
  fi_av_type type = FI_AV_TABLE;
  std::vector<glex_ep_addr_t> table;  // FI_AV_TABLE: index -> address (kNoAddr once removed)
  std::unordered_map<glex_ep_addr_t, fi_addr_t> index;  // address -> fi_addr (FI_SOURCE)
  uint32_t refs = 0;
  static constexpr glex_ep_addr_t kNoAddr = ~glex_ep_addr_t{0};
  // The glex address of an fi_addr, or kNoAddr when it names nothing.
  glex_ep_addr_t lookup(fi_addr_t a) const;
  fi_addr_t reverse(glex_ep_addr_t a) const;
};

// ---- Memory region
// -------------------------------------------------------------------------------
struct MrFid {
  fid_mr mr;
  struct Mr* self;
};
struct Mr {
  MrFid fid{};
  Domain* domain = nullptr;
  glex_mem_handle_t mh = 0;
  const char* base = nullptr;
  uint64_t len = 0;
};

// ---- Domain
// --------------------------------------------------------------------------------------
struct FabricFid {
  fid_fabric fabric;
  struct Fabric* self;
};
struct Fabric {
  FabricFid fid{};
  std::string name;
  uint32_t domains = 0;
};
struct DomainFid {
  fid_domain domain;
  Domain* self;
};
struct Domain {
  DomainFid fid{};
  Fabric* fabric = nullptr;
  glex_device_handle_t dev = nullptr;
  std::recursive_mutex lock;  // every object of the domain (FI_THREAD_SAFE)
  uint64_t mr_mode = 0;
  uint32_t refs = 0;  // objects opened on it
};

// ---- Endpoint
// ------------------------------------------------------------------------------------ What a
// completion reports to its owner.
struct OpDone {
  void* context = nullptr;
  uint64_t flags = 0;  // FI_SEND | FI_TAGGED, FI_RECV | FI_MSG, FI_WRITE | FI_RMA ...
  void* buf = nullptr;
  size_t len = 0;
  uint64_t data = 0;
  uint64_t tag = 0;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  bool report = true;  // FI_SELECTIVE_COMPLETION without FI_COMPLETION: counters only
};
// A posted receive.
struct Recv {
  OpDone op;
  glex_ep_addr_t from = Av::kNoAddr;  // FI_DIRECTED_RECV; kNoAddr: any source
  uint64_t tag = 0, ignore = 0;
  bool tagged = false;
};
// A message that arrived before a receive matched it (or is being assembled).
struct Arrival {
  glex_ep_addr_t src = 0;
  uint32_t seq = 0;
  bool tagged = false;
  bool rts = false;
  uint64_t tag = 0;
  uint64_t data = 0;
  bool has_data = false;
  uint64_t len = 0;
  std::vector<char> bytes;  // kMsg: the message; assembled as its MPs arrive
  uint64_t have = 0;        // bytes arrived so far
  uint64_t rts_addr = 0, rts_mh = 0;
};
// One MP waiting for room at its target (GLEX_BUSY) or behind others: sent in order.
struct OutMp {
  glex_ep_addr_t dest = 0;
  uint32_t len = 0;
  uint32_t flags = 0;
  char bytes[GLEX_MP_PAYLOAD];
  std::shared_ptr<OpDone> done;  // reported once this, the operation's last MP, has left
};
// Work in the NIC: an RDMA read or write of the user, or a rendezvous read.
struct RdmaOp {
  OpDone op;
  glex_mem_handle_t local_mh = 0;
  bool own_mh = false;  // registered for this operation, deregistered when it completes
  // Rendezvous read: what to answer, and to whom.
  bool rendezvous = false;
  glex_ep_addr_t peer = 0;
  uint32_t seq = 0;
  size_t truncated_from = 0;  // non-zero: the message was longer than the receive
  // An RDMA write with remote CQ data: the MP that follows it.
  bool then_data = false;
  uint64_t remote_data = 0;
  // An injected write's copy of the caller's bytes, which the NIC reads until it completes.
  std::unique_ptr<char[]> inject_copy;
};
// A long send waiting for its receiver to read it.
struct RtsSend {
  OpDone op;
  glex_mem_handle_t mh = 0;
};

struct EpFid {
  fid_ep ep;
  Endpoint* self;
};
struct Endpoint {
  EpFid fid{};
  Domain* domain = nullptr;
  glex_ep_handle_t ep = nullptr;
  Av* av = nullptr;
  Cq* tx_cq = nullptr;
  Cq* rx_cq = nullptr;
  bool tx_selective = false, rx_selective = false;
  Cntr* send_cntr = nullptr;
  Cntr* recv_cntr = nullptr;
  Cntr* write_cntr = nullptr;
  Cntr* read_cntr = nullptr;
  uint64_t caps = 0;
  uint64_t tx_op_flags = 0, rx_op_flags = 0;
  bool enabled = false;

  std::list<Recv> posted[2];  // [0] FI_MSG, [1] FI_TAGGED
  std::list<std::unique_ptr<Arrival>> unexpected[2];
  struct Peer {
    uint32_t next_out = 0;  // the next message number to this peer
    uint32_t next_in = 0;   // the next message number matched from it
    std::map<uint32_t, std::unique_ptr<Arrival>> arriving;  // by number, not yet in order
  };
  std::unordered_map<glex_ep_addr_t, Peer> peers;
  std::deque<OutMp> out;
  // Rendezvous reads the NIC refused busy (its queue, or the transfers in flight to that peer,
  // full), posted again in order by progress.
  std::deque<std::pair<glex_rdma_req, RdmaOp*>> reads_waiting;
  std::unordered_map<uint64_t, RtsSend> rts;  // (peer's address, number) -> the send
  uint32_t rdma_in_flight = 0;
  uint64_t last_progress_ns = 0;                  // when progress last returned
  uint64_t idle_since_ns = 0;                     // since when tight polling has found nothing
  std::vector<std::unique_ptr<Arrival>> claimed;  // FI_CLAIM: peeked and held for the claim
};

// ---- Shared steps ------------------------------------------------------------------------------
// libfabric's error number for a libglex result.
int fi_error_of(glex_ret_t r);
// Drives the endpoint: sends queued MPs, takes arrived MPs, reaps the NIC's completions.
void progress(Endpoint* ep);
// One arrived MP, whatever its bytes: placed, kept, answered or dropped with E6603.
void take_packet(Endpoint* ep, const glex_mp& mp);
// Reports a finished operation to the CQ and counter its kind names (errors with `err` != 0).
void complete(Endpoint* ep, const OpDone& op, int err = 0, size_t olen = 0);
// The data path (fi_proto.cc).
ssize_t post_send(Endpoint* ep, const void* buf, size_t len, void* desc, fi_addr_t dest,
                  uint64_t tag, bool tagged, uint64_t data, bool has_data, void* context,
                  uint64_t flags);
ssize_t post_recv(Endpoint* ep, void* buf, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore,
                  bool tagged, void* context, uint64_t flags);
ssize_t post_rma(Endpoint* ep, bool write, void* buf, size_t len, void* desc, fi_addr_t peer,
                 uint64_t addr, uint64_t key, uint64_t data, bool has_data, void* context,
                 uint64_t flags);
ssize_t cancel_recv(Endpoint* ep, void* context);
// Frees everything an endpoint holds in the NIC and in memory (fi_close).
void drain_and_release(Endpoint* ep);

// Objects opened by the provider (fi_domain.cc, fi_cq.cc, fi_ep.cc).
int open_domain(fid_fabric* fabric, fi_info* info, fid_domain** dom, void* context);
int open_cq(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context);
int open_cntr(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context);
int open_av(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context);
int open_endpoint(fid_domain* domain, fi_info* info, fid_ep** ep, void* context);
int register_mr(fid* domain, const void* buf, size_t len, uint64_t access, uint64_t offset,
                uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context);

// fi_close of an object endpoints bind to (a CQ, a counter, an address vector): refused while
// bound (-FI_EBUSY), otherwise it leaves its domain.
template <typename Fid>
int close_unbound(fid* f) {
  auto* o = reinterpret_cast<Fid*>(f)->self;
  {
    std::lock_guard<std::recursive_mutex> g(o->domain->lock);
    if (o->refs) return -FI_EBUSY;
    --o->domain->refs;
  }
  delete o;
  return 0;
}

// ---- Unsupported calls: -FI_ENOSYS, as libfabric's own providers answer ------------------------
int no_bind(fid*, fid*, uint64_t);
int no_control(fid*, int, void*);
int no_ops_open(fid*, const char*, uint64_t, void**, void*);
int no_tostr(const fid*, char*, size_t);
int no_ops_set(fid*, const char*, uint64_t, void*, void*);

// The provider's log (FI_LOG_LEVEL=warn shows it).
const fi_provider* provider();

}  // namespace galaxy::fi
