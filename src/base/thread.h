#pragma once

#include <atomic>
#include <thread>
#include <utility>

namespace galaxy {

// Starts f on a new thread and returns once that thread runs f: what the thread library does to
// start a thread (its own allocations) is over when the caller goes on, so a fork() the caller
// makes next cannot copy a half-taken allocator lock into the child (the sanitizers' allocators
// take no lock around fork()).
template <class F>
std::thread start_running(F&& f) {
  std::atomic<bool> running{false};
  std::thread t([&running, f = std::forward<F>(f)]() mutable {
    running.store(true, std::memory_order_release);  // the last touch of the caller's flag
    f();
  });
  while (!running.load(std::memory_order_acquire)) std::this_thread::yield();
  return t;
}

}  // namespace galaxy
