// The discrete-event simulator: simulated time, the event queue and the run's random numbers
// (docs/simulation.md). Single-threaded and deterministic: the same seed and the same
// schedule calls give the same trace, bit for bit.
//
// The future-event list is a template parameter: LadderQueue by default (Simulator), the 4-ary
// heap EventQueue as HeapSimulator. Both pop in (time, push order), so both give the same trace;
// the ladder is faster from 10^3 pending events up (bench/RESULTS.md, bench_event_engine).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/check.h"
#include "engine/sim/event_queue.h"
#include "engine/sim/ladder_queue.h"
#include "engine/sim/rng.h"
#include "engine/sim/time.h"

namespace galaxy::sim {

template <class Queue>
class BasicSimulator {
 public:
  explicit BasicSimulator(uint64_t seed = 1);
  ~BasicSimulator();
  BasicSimulator(const BasicSimulator&) = delete;
  BasicSimulator& operator=(const BasicSimulator&) = delete;

  Time now() const { return now_; }

  // Scheduling in the past is a programming error (checked). Events at equal times fire in the
  // order they were scheduled.
  void schedule_at(Time t, EventHandler* handler, uint64_t a = 0, uint64_t b = 0) {
    GALAXY_CHECK(t >= now_, "schedule_at: time is in the past");
    if (top_fired_) {
      // The event being handled is still the queue's top; replace it instead of pop + push.
      top_fired_ = false;
      queue_.replace_top(t, handler, a, b);
    } else {
      queue_.push(t, handler, a, b);
    }
  }
  void schedule_in(Time dt, EventHandler* handler, uint64_t a = 0, uint64_t b = 0) {
    GALAXY_CHECK(dt <= kNever - now_, "schedule_in: the time would overflow");
    schedule_at(now_ + dt, handler, a, b);
  }

  // Schedules a callable, f() or f(Time now). Callables up to kInlineFnBytes that are nothrow
  // movable live in pooled slots, so the steady state allocates nothing; larger ones are boxed on
  // the heap. A callable still pending when the simulator is destroyed is destroyed uncalled.
  template <class F>
  void schedule_fn_at(Time t, F&& f) {
    schedule_at(t, &fn_runner_, reinterpret_cast<uintptr_t>(make_fn_slot(std::forward<F>(f))));
  }
  template <class F>
  void schedule_fn_in(Time dt, F&& f) {
    GALAXY_CHECK(dt <= kNever - now_, "schedule_in: the time would overflow");
    schedule_fn_at(now_ + dt, std::forward<F>(f));
  }

  // Runs the events with time <= until in order and returns how many ran. If the queue runs dry
  // or the next event is later than `until` (and until != kNever), time advances to `until`, so a
  // run(until) followed by schedule_in() measures from `until`. After stop(), time stays at the
  // last event handled. Not reentrant: a handler must not call run() or step().
  uint64_t run(Time until = kNever);

  // Handles the next event, if any; false when the queue is empty.
  bool step();

  // Makes the current run() return once the event being handled finishes.
  void stop() { stop_requested_ = true; }

  uint64_t events_processed() const { return events_processed_; }
  size_t pending() const { return queue_.size() - (top_fired_ ? 1 : 0); }
  // Time of the earliest pending event, kNever if none.
  Time next_event_time() const;
  Rng& rng() { return rng_; }

  static constexpr size_t kInlineFnBytes = 48;

 private:
  struct FnSlot {
    alignas(std::max_align_t) unsigned char storage[kInlineFnBytes];
    void (*invoke)(FnSlot*, Time);  // calls then destroys the callable
    void (*destroy)(FnSlot*);       // destroys it uncalled (teardown)
    FnSlot* next_free;
  };

  // Runs callables scheduled with schedule_fn_*; `a` carries the FnSlot.
  class FnRunner final : public EventHandler {
   public:
    explicit FnRunner(BasicSimulator* sim) : sim_(sim) {}
    void handle(Time now, uint64_t a, uint64_t b) override;

   private:
    BasicSimulator* sim_;
  };

  template <class F>
  static void call(F& f, Time now) {
    if constexpr (std::is_invocable_v<F&, Time>) {
      f(now);
    } else {
      f();
    }
  }

  template <class F>
  FnSlot* make_fn_slot(F&& f) {
    using Fn = std::decay_t<F>;
    static_assert(std::is_invocable_v<Fn&> || std::is_invocable_v<Fn&, Time>,
                  "schedule_fn: the callable must take () or (Time)");
    FnSlot* slot = alloc_fn_slot();
    if constexpr (sizeof(Fn) <= kInlineFnBytes && alignof(Fn) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<Fn>) {
      ::new (static_cast<void*>(slot->storage)) Fn(std::forward<F>(f));
      slot->invoke = [](FnSlot* s, Time now) {
        Fn* fn = std::launder(reinterpret_cast<Fn*>(s->storage));
        call(*fn, now);
        fn->~Fn();
      };
      slot->destroy = [](FnSlot* s) { std::launder(reinterpret_cast<Fn*>(s->storage))->~Fn(); };
    } else {
      Fn* boxed = new Fn(std::forward<F>(f));
      ::new (static_cast<void*>(slot->storage)) Fn*(boxed);
      slot->invoke = [](FnSlot* s, Time now) {
        Fn* fn = *std::launder(reinterpret_cast<Fn**>(s->storage));
        call(*fn, now);
        delete fn;
      };
      slot->destroy = [](FnSlot* s) { delete *std::launder(reinterpret_cast<Fn**>(s->storage)); };
    }
    return slot;
  }

  FnSlot* alloc_fn_slot() {
    if (free_fn_slots_ == nullptr) grow_fn_slots();
    FnSlot* slot = free_fn_slots_;
    free_fn_slots_ = slot->next_free;
    return slot;
  }
  void free_fn_slot(FnSlot* slot) {
    slot->next_free = free_fn_slots_;
    free_fn_slots_ = slot;
  }
  void grow_fn_slots();
  void handle_top();

  // Removes the fired event still at the top of the queue (see top_fired_).
  void settle() const {
    if (top_fired_) {
      top_fired_ = false;
      queue_.drop_top();
    }
  }

  // Mutable so that const queries from inside a handler can settle() the fired top first.
  mutable Queue queue_;
  Rng rng_;
  Time now_ = 0;
  uint64_t events_processed_ = 0;
  // The queue's top event has been handed to its handler but not yet removed; the next schedule
  // call replaces it (see schedule_at), otherwise it is dropped after the handler.
  mutable bool top_fired_ = false;
  bool stop_requested_ = false;
  bool running_ = false;
  FnRunner fn_runner_{this};
  FnSlot* free_fn_slots_ = nullptr;
  std::vector<std::unique_ptr<FnSlot[]>> fn_slot_chunks_;
};

using Simulator = BasicSimulator<LadderQueue>;
using HeapSimulator = BasicSimulator<EventQueue>;

extern template class BasicSimulator<LadderQueue>;
extern template class BasicSimulator<EventQueue>;

}  // namespace galaxy::sim
