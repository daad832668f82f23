// Many management requests in flight (docs/management.md): a window per target chip and a
// global window, a timeout per request, retries, 16-bit transaction ids reused only when free
// (correct across wrap-around), fault reports handed to a handler as they arrive.
// Serial operation (the paper's) is windows of 1.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "base/fifo.h"
#include "nm/mgmt_port.h"
#include "nm/mkey.h"

namespace galaxy::nm {

struct MgmtReply {
  Status status;  // ok, kTimeout after all retries, or the NMA's error response
  wire::MgmtPacket response;
  Picoseconds latency = 0;  // of the attempt that answered
  unsigned attempts = 0;
};
using ReplyFn = std::function<void(const MgmtReply&)>;

struct RequesterOptions {
  unsigned global_window = 1;
  unsigned per_chip_window = 1;
  Picoseconds timeout = kSec;  // glex's usual 1 s (docs/system.md 2.3)
  unsigned retries = 2;
};

struct RequesterStats {
  uint64_t sent = 0;  // attempts, retries included
  uint64_t answered = 0;
  uint64_t retries = 0;
  uint64_t failed = 0;  // gave up after retries
  uint64_t error_responses = 0;
  uint64_t fault_reports = 0;
  uint64_t stale = 0;        // responses for requests already given up or answered
  uint64_t sm_requests = 0;  // SMInfo Gets and Sets from other servers
  uint64_t malformed = 0;    // packets that did not decode (poll)
};

class Requester {
 public:
  Requester(MgmtPort& port, RequesterOptions options);

  // Queue a request; `done` runs once, from run(), with the reply (it may submit more).
  void submit(const MgmtRequest& request, ReplyFn done);
  // Progress until every submitted request has completed.
  void run();
  // Sees every completed request with its reply, before the submitter's callback (the
  // management daemon's request metrics).
  void set_reply_observer(std::function<void(const MgmtRequest&, const MgmtReply&)> observer) {
    observer_ = std::move(observer);
  }
  // Fault reports arriving while run() works (and during drain_faults).
  void set_fault_handler(std::function<void(const wire::MgmtPacket&)> handler) {
    fault_handler_ = std::move(handler);
  }
  // SMInfo Gets and Sets from other servers, arriving while run() works (and during
  // drain_faults); the handler may send() its answer through port() but not submit.
  void set_sm_handler(std::function<void(const wire::MgmtPacket&)> handler) {
    sm_handler_ = std::move(handler);
  }
  // Handles what has arrived (fault reports, SMInfo) without waiting.
  void poll();
  // Wait up to `duration` for fault reports with nothing in flight.
  void drain_faults(Picoseconds duration);

  // Every request from now on carries the key `p` gives its chip (nm/mkey.h); a request that
  // names a key of its own keeps it.
  void set_m_key(const MKeyPolicy& p) { mkey_ = p; }
  const MKeyPolicy& m_key() const { return mkey_; }

  MgmtPort& port() { return port_; }
  const RequesterStats& stats() const { return stats_; }
  const RequesterOptions& options() const { return options_; }
  void set_options(const RequesterOptions& o) { options_ = o; }

 private:
  struct Pending {
    MgmtRequest request;
    ReplyFn done;
    unsigned attempts = 0;
    Picoseconds sent_at = 0;
    Picoseconds deadline = 0;
    uint16_t tid = 0;
  };
  void issue();
  bool try_send(Pending& p);
  // One fewer in flight to `chip`; its parked requests become ready when its window has room.
  void release(wire::ChipId chip);
  // Whether `chip`'s window is full.
  bool full(wire::ChipId chip) const;
  void complete(uint16_t tid, const MgmtReply& reply);
  void expire(Picoseconds now);
  // The port itself failed (Code::kIoError: its device or its server is gone): every request in
  // flight, parked or queued fails with `e`; no answer can come.
  void fail_all(const Error& e);
  void dispatch(const wire::MgmtPacket& packet);
  uint16_t allocate_tid();

  MgmtPort& port_;
  RequesterOptions options_;
  MKeyPolicy mkey_;
  RequesterStats stats_;
  std::function<void(const MgmtRequest&, const MgmtReply&)> observer_;
  // Submitted requests not yet looked at. One whose chip's window is full is parked behind that
  // chip's earlier ones (a chip's requests go out in order; others pass them), and its chip
  // goes to `ready_` when an answer makes room, so that each request is moved once, not passed
  // over again on every call (a load of a million range writes queues them all at once).
  Fifo<Pending> queue_;
  std::unordered_map<wire::ChipId, Fifo<Pending>> parked_;  // by target chip, in submission order
  Fifo<wire::ChipId> ready_;  // chips with parked requests that got room, in that order
  std::unordered_map<uint16_t, Pending> in_flight_;      // by transaction id
  std::unordered_map<wire::ChipId, unsigned> per_chip_;  // in flight per target chip
  // (deadline, tid) of every attempt in send order: with one timeout for all, the earliest
  // deadline in flight is the first entry whose request is still in flight with that deadline.
  Fifo<std::pair<Picoseconds, uint16_t>> deadlines_;
  uint16_t next_tid_ = 0;
  std::function<void(const wire::MgmtPacket&)> fault_handler_;
  std::function<void(const wire::MgmtPacket&)> sm_handler_;
};

// One request, submitted and run to its end: its reply.
MgmtReply call(Requester& r, const MgmtRequest& q);

}  // namespace galaxy::nm
