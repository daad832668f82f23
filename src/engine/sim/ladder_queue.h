// The simulator's future-event list for large pending sets: a ladder queue (Tang, Goh and Thng,
// ACM TOMACS 15(3), 2005) reshaped for this machine's memory. Same interface and same order as
// EventQueue: by time, then by push order, so a run stays a pure function of its inputs.
//
// Why: the 4-ary heap pays a chain of dependent cache misses per event once the pending set leaves
// the 1 MiB L2 (bench/RESULTS.md: 2.7 M events/s at 10^6 pending, where a dependent DRAM miss costs
// 170-380 ns). Here an event is written and read sequentially a few times instead, and no search
// chases pointers through memory. Levels, earliest times first:
//
//   front  A small sorted array; top() is its first event.
//   rungs  depth-1 (innermost) ... 0: each splits a time range into equal power-of-two-wide
//          buckets. A bucket holds the events it got when its rung was made, contiguous in the
//          rung's array (a counting sort), then those pushed since, in an unsorted chain of chunks
//          of kChunk events. Inner rungs are made in one pass into an array that is reused, so
//          stays cached, and is read sequentially. Rung 0, made from the top, takes most pushes
//          until it is exhausted, so its buckets are chains from the start.
//   top    An unsorted chain for times beyond rung 0.
//   never  Events at kNever, which always fire last.
//
// The levels partition time: front < bounds_[depth] <= rung depth-1 < bounds_[depth-1] <= ... <=
// rung 0 < bounds_[0] <= top < kNever. push() appends to the level that covers its time (the front
// inserts in order). When the front runs dry, the innermost rung's next non-empty bucket is sorted
// into it if small, or split into a new, finer rung sized to its content (count and min..max of
// times) if not; an exhausted rung is dropped, and the top becomes rung 0 when no rung is left. A
// front that grows by inserts in its middle is split back into a rung. Every move keeps the push
// order of equal times (chains are read in the order they were appended, a bucket's array part
// was pushed before its chain, the counting sort and the front's sort are stable), and equal times
// never sit in two levels (except kNever, see never_), so the order is exactly the heap's.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "engine/sim/event_queue.h"
#include "engine/sim/time.h"

namespace galaxy::sim {

class LadderQueue {
 public:
  struct Tuning {
    // Mean events per bucket that a new rung aims at.
    uint32_t per_bucket = 4;
    // A bucket of at most this many events is sorted into the front; a larger one becomes a rung.
    uint32_t small = 32;
    // Most buckets in a rung made from the top (power of two). Such a rung takes most pushes, each
    // to the tail of a random bucket, so its tails must stay in cache.
    uint32_t top_buckets = 1024;
    // Most buckets in other rungs (power of two), which are filled in one pass and then read.
    uint32_t max_buckets = 4096;
    // An insert into the front that would move more events than this on either side turns the
    // front into a rung instead.
    uint32_t spill_moves = 64;
  };

  LadderQueue() : LadderQueue(Tuning{}) {}
  explicit LadderQueue(const Tuning& tuning);
  LadderQueue(const LadderQueue&) = delete;
  LadderQueue& operator=(const LadderQueue&) = delete;

  void push(Time time, EventHandler* handler, uint64_t a = 0, uint64_t b = 0) {
    ++size_;
    route(Event{time, next_seq_++, handler, a, b});
  }

  Event pop() {
    const Event e = top();
    drop_top();
    return e;
  }

  // pop() without building the Event.
  void drop_top() {
    assert(size_ > 0);
    if (front_head_ == front_tail_) refill();
    ++front_head_;
    if (--size_ == 0) reset();
  }

  // pop() then push(); no cheaper than the two here, kept for the same interface as EventQueue.
  void replace_top(Time time, EventHandler* handler, uint64_t a = 0, uint64_t b = 0) {
    drop_top();
    push(time, handler, a, b);
  }

  // Const for callers: it may move pending events between levels (the state below is mutable for
  // that reason) but never changes what the queue holds or its order.
  Event top() const {
    assert(size_ > 0);
    if (front_head_ == front_tail_) refill();
    return front_[front_head_];
  }
  Time top_time() const { return size_ > 0 ? top().time : kNever; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void reserve(size_t n);
  // Drops every event; sequence numbers keep counting so that order stays FIFO across a clear().
  void clear();
  uint64_t next_seq() const { return next_seq_; }

  // Every level holds only times in its range, chains are in push order, the front is sorted,
  // counts and chunk accounting add up; for tests and debug checks.
  bool valid() const;

  // How often each restructuring path ran; for tests.
  struct Stats {
    uint64_t rungs_made = 0;     // rungs created from a bucket, the top or the front
    uint64_t front_spills = 0;   // fronts turned into a rung
    uint64_t top_transfers = 0;  // tops emptied into rung 0 or the front
    int max_depth = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  // Events per chunk: 16 x 40 bytes = 10 cache lines, read as one sequential run.
  static constexpr uint32_t kChunk = 16;
  static constexpr int kMaxRungs = 40;  // each rung narrows the range at least 4x: 64-bit times
                                        // need at most 32
  static constexpr size_t kAlign = 64;

  struct Bucket {
    uint64_t count = 0;
    uint32_t head = 0;  // first and last chunk; valid while count > 0
    uint32_t tail = 0;
    Time min = kNever;  // of the times held; kept while appending, so that a bucket is split
    Time max = 0;       // into a rung sized to its content without reading it twice
  };
  struct Rung {
    Time start = 0;  // bucket i holds [start + i << shift, start + (i + 1) << shift)
    int shift = 0;
    uint32_t nbuckets = 0;
    uint32_t cur = 0;                // buckets before cur are exhausted
    std::vector<Bucket> buckets;     // events pushed since the rung was made
    std::vector<uint32_t> first;     // bucket i's first events: dense[first[i], first[i + 1])
    std::vector<Event> dense;        // sized up only, never shrunk: reused by the next rung here
    std::vector<uint64_t> nonempty;  // one bit per bucket
  };
  struct AlignedDelete {
    void operator()(Event* p) const { ::operator delete[](p, std::align_val_t{kAlign}); }
  };

  void route(const Event& e) const {
    const Time t = e.time;
    if (t >= bounds_[0]) {
      if (t != kNever) {
        append(top_, e);
      } else {
        append(never_, e);
      }
      return;
    }
    for (int r = 0; r < depth_; ++r) {
      if (t >= bounds_[r + 1]) {
        append_rung(rungs_[r], e);
        return;
      }
    }
    insert_front(e);
  }

  void append_rung(Rung& r, const Event& e) const {
    const auto i = static_cast<uint32_t>((e.time - r.start) >> r.shift);
    assert(i >= r.cur && i < r.nbuckets);
    Bucket& b = r.buckets[i];
    if (b.count == 0) r.nonempty[i >> 6] |= uint64_t{1} << (i & 63);
    append(b, e);
  }

  void append(Bucket& b, const Event& e) const {
    const uint32_t fill = static_cast<uint32_t>(b.count) & (kChunk - 1);
    if (fill == 0) link_chunk(b);
    pool_.get()[size_t{b.tail} * kChunk + fill] = e;
    ++b.count;
    b.min = e.time < b.min ? e.time : b.min;
    b.max = e.time > b.max ? e.time : b.max;
  }

  void link_chunk(Bucket& b) const {
    if (free_chunks_.empty()) grow_pool(chunks_ * 2);
    const uint32_t c = free_chunks_.back();
    free_chunks_.pop_back();
    if (b.count == 0) {
      b.head = c;
    } else {
      chunk_next_[b.tail] = c;
    }
    b.tail = c;
  }

  void insert_front(const Event& e) const;
  void refill() const;
  void transfer_top() const;
  void split(const Event* seg, size_t n, Bucket* chain, Time lo, Time hi) const;
  void spill_front() const;
  void start_rung(Time lo, Time hi, uint64_t count, uint32_t max_buckets) const;
  void to_front(const Event* seg, size_t n, Bucket& chain, bool sort) const;
  void recentre_front(size_t room) const;
  uint32_t next_nonempty(const Rung& r) const;
  template <class F>
  void drain(Bucket& b, F&& f) const;
  void ensure_free_chunks(uint64_t n) const;
  void grow_pool(uint64_t chunks) const;
  void reset() const;

  Tuning tuning_;
  size_t size_ = 0;
  uint64_t next_seq_ = 0;

  // Everything below is the queue's layout, which top() may reorganise.
  mutable std::vector<Event> front_;  // [front_head_, front_tail_) sorted by (time, seq)
  mutable size_t front_head_ = 0;
  mutable size_t front_tail_ = 0;
  mutable std::array<Rung, kMaxRungs> rungs_;
  mutable int depth_ = 0;
  // bounds_[0]: first time of the top; bounds_[r + 1]: first time of rung r; bounds_[depth_]: end
  // of the front. Non-increasing.
  mutable std::array<Time, kMaxRungs + 1> bounds_{};
  mutable Bucket top_;
  // kNever events. They stay here, FIFO, until nothing else is left; then the front takes them
  // and later kNever pushes wait here, behind them.
  mutable Bucket never_;
  mutable std::unique_ptr<Event[], AlignedDelete> pool_;  // chunk c: [c * kChunk, (c + 1) * kChunk)
  mutable uint32_t chunks_ = 0;
  mutable std::vector<uint32_t> chunk_next_;
  mutable std::vector<uint32_t> free_chunks_;  // LIFO: a chunk just read is rewritten while cached
  mutable std::vector<Event> gather_;          // a chain made contiguous for split()
  mutable std::vector<uint32_t> fill_;         // split()'s write positions
  mutable Stats stats_;
};

}  // namespace galaxy::sim
