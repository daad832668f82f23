// Many SMPs in flight (the subnet manager's analogue of Requester, for InfiniBand): a window of
// outstanding requests (OpenSM's max_smps, default 4; ours wider), retries of timed-out ones,
// and a deadline of our own behind the transport's so that no lost answer can stall a sweep.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/fifo.h"
#include "ib/smp_port.h"

namespace galaxy::nm {

struct IbRequesterOptions {
  unsigned window = 64;
  unsigned retries = 2;    // ours, after the transport's own
  int deadline_ms = 5000;  // a request unanswered this long (transport included) has failed
  // The M_Key every SMP carries unless it names one (IBA 14.2.4; 0: none).
  uint64_t m_key = 0;
};

struct IbRequesterStats {
  uint64_t sent = 0;  // SMPs put on the wire, retries included
  uint64_t answered = 0;
  uint64_t retries = 0;
  uint64_t failed = 0;        // no answer after every retry
  uint64_t error_status = 0;  // answered with a non-zero MAD status
  uint64_t stale = 0;         // answers to requests already finished
};

using IbReplyFn = std::function<void(const Status&, const wire::Smp&)>;
using GmpReplyFn = std::function<void(const Status&, const wire::Mad&)>;

class IbRequester {
 public:
  IbRequester(ib::SmpPort& port, IbRequesterOptions options);

  // Queues a request (`dlid` as SmpPort::send); `done` runs from run() with the answer, or with
  // the error (timeout, transport failure, a non-zero MAD status); it may submit more.
  void submit(const wire::Smp& smp, uint16_t dlid, IbReplyFn done);
  // A general management packet (ib::SmpPort::send_gmp) to LID `dlid`, in the same window.
  void submit_gmp(const wire::Mad& mad, uint16_t dlid, GmpReplyFn done);
  // A source of requests asked for more whenever the window has room and nothing is queued: it
  // submits some and returns true, or returns false once it has none left. A sweep's tens of
  // thousands of Sets are made as they go out rather than held all at once. Replaces a source
  // that has not finished.
  void feed(std::function<bool()> source) { source_ = std::move(source); }
  // Progress until every submitted request has completed and the source has none left.
  Status run();
  const IbRequesterStats& stats() const { return stats_; }
  // The window in use: the option's, or less where the transport stalls beyond it.
  unsigned window() const { return options_.window; }

 private:
  struct Pending {
    wire::Smp smp;
    uint16_t dlid;
    IbReplyFn done;
    unsigned attempts = 0;
    std::chrono::steady_clock::time_point deadline;
    std::optional<wire::Mad> gmp;  // a GMP instead of `smp`, answered through gmp_done
    GmpReplyFn gmp_done;
  };
  void start(Pending p);
  void finish(uint32_t tid, const Status& status, const ib::SmpCompletion& answer);

  ib::SmpPort& port_;
  IbRequesterOptions options_;
  IbRequesterStats stats_;
  Fifo<Pending> queued_;
  std::unordered_map<uint32_t, Pending> in_flight_;
  std::function<bool()> source_;
  uint32_t next_tid_ = 1;
};

}  // namespace galaxy::nm
