#include "engine/sim/simulator.h"

#include "base/check.h"

namespace galaxy::sim {

namespace {
constexpr size_t kFnSlotsPerChunk = 1024;
constexpr size_t kInitialQueueCapacity = 4096;
}  // namespace

template <class Queue>
BasicSimulator<Queue>::BasicSimulator(uint64_t seed) : rng_(seed) {
  queue_.reserve(kInitialQueueCapacity);
}

template <class Queue>
BasicSimulator<Queue>::~BasicSimulator() {
  // Pending callables may own resources (captured shared_ptrs, buffers); release them.
  while (!queue_.empty()) {
    const Event e = queue_.pop();
    if (e.handler == &fn_runner_) {
      auto* slot = reinterpret_cast<FnSlot*>(static_cast<uintptr_t>(e.a));
      slot->destroy(slot);
    }
  }
}

template <class Queue>
void BasicSimulator<Queue>::FnRunner::handle(Time now, uint64_t a, uint64_t /*b*/) {
  auto* slot = reinterpret_cast<FnSlot*>(static_cast<uintptr_t>(a));
  slot->invoke(slot, now);
  sim_->free_fn_slot(slot);
}

template <class Queue>
void BasicSimulator<Queue>::grow_fn_slots() {
  fn_slot_chunks_.push_back(std::make_unique<FnSlot[]>(kFnSlotsPerChunk));
  FnSlot* chunk = fn_slot_chunks_.back().get();
  for (size_t i = kFnSlotsPerChunk; i-- > 0;) free_fn_slot(&chunk[i]);
}

template <class Queue>
inline void BasicSimulator<Queue>::handle_top() {
  const Event& e = queue_.top();
  EventHandler* const handler = e.handler;
  const uint64_t a = e.a;
  const uint64_t b = e.b;
  now_ = e.time;
  top_fired_ = true;
  handler->handle(now_, a, b);
  settle();
  ++events_processed_;
}

template <class Queue>
uint64_t BasicSimulator<Queue>::run(Time until) {
  GALAXY_CHECK(!running_, "Simulator::run is not reentrant");
  running_ = true;
  stop_requested_ = false;
  const uint64_t start = events_processed_;
  while (!queue_.empty() && queue_.top().time <= until) {
    handle_top();
    if (stop_requested_) break;
  }
  if (!stop_requested_ && until != kNever && now_ < until) now_ = until;
  stop_requested_ = false;
  running_ = false;
  return events_processed_ - start;
}

template <class Queue>
bool BasicSimulator<Queue>::step() {
  GALAXY_CHECK(!running_, "Simulator::step is not reentrant");
  if (queue_.empty()) return false;
  running_ = true;
  handle_top();
  running_ = false;
  return true;
}

template <class Queue>
Time BasicSimulator<Queue>::next_event_time() const {
  settle();
  return queue_.top_time();
}

template class BasicSimulator<LadderQueue>;
template class BasicSimulator<EventQueue>;

}  // namespace galaxy::sim
