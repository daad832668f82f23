// The simulator's future-event list: a 4-ary min-heap on a flat array (docs/simulation.md),
// ordered by (time, sequence number). The sequence number is taken from a counter at
// push, so events at the same time fire in the order they were scheduled and a run is a pure
// function of its inputs.
//
// Layout, chosen by measurement (bench/RESULTS.md): the heap holds 16-byte keys only, four to a
// 64-byte line with each family of four children on one line, so a level of the sift costs one
// cache line and the next level can be prefetched. A key is (time, rank << slot_bits | slot):
// `slot` indexes the event's handler and payload in a side pool, `rank` is a compact stand-in for
// the sequence number with the same order among pending events. When the rank field would
// overflow, or the pool outgrows the slot field, the pending keys are renumbered (rebuild()); that
// is O(n log n) once per 2^(64 - slot_bits) pushes, so it never shows in the cost per event.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sim/time.h"

namespace galaxy::sim {

// Receives events. The simulator never owns handlers: whoever schedules an event keeps its handler
// alive until the event has fired.
class EventHandler {
 public:
  virtual void handle(Time now, uint64_t a, uint64_t b) = 0;

 protected:
  ~EventHandler() = default;
};

struct Event {
  Time time;
  uint64_t seq;  // 0, 1, 2 ... in push order over the queue's life
  EventHandler* handler;
  uint64_t a;  // two words of payload, meaning chosen by the handler
  uint64_t b;
};

class EventQueue {
 public:
  EventQueue() : EventQueue(kDefaultSlotBits, 64) {}
  // Narrow fields make renumbering frequent; tests use this to exercise it.
  EventQueue(int initial_slot_bits, int max_rank_bits);
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  void push(Time time, EventHandler* handler, uint64_t a = 0, uint64_t b = 0) {
    if (size_ == capacity_) grow(capacity_ * 2);
    const uint64_t code = encode(handler, a, b);
    ++size_;
    sift_up(kRoot + size_ - 1, Key{time, code});
  }

  Event pop() {
    const Event e = top();
    drop_top();
    return e;
  }

  // pop() without building the Event.
  void drop_top() {
    assert(size_ > 0);
    free_slot(slot_of(keys_[kRoot]));
    --size_;
    if (size_ > 0) sift_down(keys_[kRoot + size_]);
  }

  // pop() then push() in one pass: the new key sinks from the root instead of the last leaf rising
  // and then the root sinking. The simulator uses it when a handler schedules while its own event
  // is still at the top (the common "hold" pattern).
  void replace_top(Time time, EventHandler* handler, uint64_t a = 0, uint64_t b = 0) {
    assert(size_ > 0);
    free_slot(slot_of(keys_[kRoot]));
    const uint64_t code = encode(handler, a, b);
    sift_down(Key{time, code});
  }

  Event top() const {
    assert(size_ > 0);
    const Key& k = keys_[kRoot];
    const Payload& p = payloads_[slot_of(k)];
    return Event{k.time, p.seq, p.handler, p.a, p.b};
  }
  Time top_time() const { return size_ > 0 ? keys_[kRoot].time : kNever; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void reserve(size_t n);
  // Drops every event; sequence numbers keep counting so that order stays FIFO across a clear().
  void clear();
  uint64_t next_seq() const { return next_seq_; }

  // Heap order holds and every key points at a live payload; for tests and debug checks.
  bool valid() const;
  // How many times the keys were renumbered; for tests.
  uint64_t rebuilds() const { return rebuilds_; }

 private:
  static constexpr int kDefaultSlotBits = 16;
  // Physical index of the root. Children of p are 4p - 8 ... 4p - 5, so with the root at 3 every
  // family starts at a multiple of 4 keys, i.e. on a 64-byte line.
  static constexpr size_t kRoot = 3;
  static constexpr size_t kAlign = 64;

  struct Key {
    Time time;
    uint64_t code;  // rank << slot_bits_ | slot
  };
  struct Payload {
    EventHandler* handler;
    uint64_t a;
    uint64_t b;
    uint64_t seq;
  };
  struct AlignedDelete {
    void operator()(Key* p) const { ::operator delete[](p, std::align_val_t{kAlign}); }
  };

  __extension__ typedef unsigned __int128 u128;

  // (time, code) compared as one 128-bit number: a branch-free compare instead of two branches.
  static bool before(const Key& x, const Key& y) {
    return ((static_cast<u128>(x.time) << 64) | x.code) <
           ((static_cast<u128>(y.time) << 64) | y.code);
  }
  // c ? x : y by masking, which the compiler cannot turn back into a branch.
  static Key pick(bool c, const Key& x, const Key& y) {
    const uint64_t mask = 0 - static_cast<uint64_t>(c);
    return Key{y.time ^ ((x.time ^ y.time) & mask), y.code ^ ((x.code ^ y.code) & mask)};
  }
  uint32_t slot_of(const Key& k) const { return static_cast<uint32_t>(k.code & slot_mask_); }

  uint64_t encode(EventHandler* handler, uint64_t a, uint64_t b) {
    if (next_rank_ > rank_limit_ || free_slots_.empty()) make_room();
    const uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    payloads_[slot] = Payload{handler, a, b, next_seq_++};
    return (next_rank_++ << slot_bits_) | slot;
  }
  void free_slot(uint32_t slot) { free_slots_.push_back(slot); }

  void sift_up(size_t hole, Key k);
  void sift_down(Key k);
  void grow(size_t capacity);
  void make_room();
  void rebuild(int slot_bits);

  std::unique_ptr<Key[], AlignedDelete> keys_;
  size_t size_ = 0;
  size_t capacity_ = 0;  // keys, not counting the kRoot unused ones in front
  std::vector<Payload> payloads_;
  std::vector<uint32_t> free_slots_;  // LIFO, so a freed slot is reused while still in cache
  int slot_bits_;
  int max_rank_bits_;
  uint64_t slot_mask_ = 0;
  uint64_t rank_limit_ = 0;  // largest rank that fits
  uint64_t next_rank_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t rebuilds_ = 0;
};

// Defined here so that the simulator's run loop can inline them.
inline void EventQueue::sift_up(size_t hole, Key k) {
  Key* h = keys_.get();
  while (hole > kRoot) {
    const size_t parent = hole / 4 + 2;
    if (!before(k, h[parent])) break;
    h[hole] = h[parent];
    hole = parent;
  }
  h[hole] = k;
}

inline void EventQueue::sift_down(Key k) {
  Key* h = keys_.get();
  const size_t end = kRoot + size_;
  size_t hole = kRoot;
  for (;;) {
    const size_t first = 4 * hole - 8;
    if (first >= end) break;
    size_t best;
    Key best_key;
    if (first + 4 <= end) {
      // The grandchildren's four families are contiguous: fetch them while comparing this level.
      const size_t grand = 4 * first - 8;
      for (size_t g = grand; g < end && g < grand + 16; g += 4) __builtin_prefetch(h + g);
      // Two-round tournament on values held in registers and selected without branches: the
      // winner is random (a branch would mispredict) and reloading by index would lengthen the
      // chain of dependent loads that bounds the sift.
      const Key c0 = h[first], c1 = h[first + 1], c2 = h[first + 2], c3 = h[first + 3];
      const bool right_of_left = before(c1, c0);
      const bool right_of_right = before(c3, c2);
      const Key l = pick(right_of_left, c1, c0);
      const Key r = pick(right_of_right, c3, c2);
      const bool right = before(r, l);
      const size_t l_index = first + right_of_left;
      const size_t r_index = first + 2 + right_of_right;
      best = l_index ^ ((l_index ^ r_index) & (0 - static_cast<size_t>(right)));
      best_key = pick(right, r, l);
    } else {
      best = first;
      for (size_t c = first + 1; c < end; ++c) {
        if (before(h[c], h[best])) best = c;
      }
      best_key = h[best];
    }
    if (!before(best_key, k)) break;
    if (hole == kRoot) {
      // best_key fires next: start fetching its payload (a random slot of a pool that can be
      // larger than the caches) while the rest of the sift runs.
      __builtin_prefetch(&payloads_[slot_of(best_key)]);
    }
    h[hole] = best_key;
    hole = best;
  }
  h[hole] = k;
}

}  // namespace galaxy::sim
