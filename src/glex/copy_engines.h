// Copy engines of the live NIC: the NIC has several DMA engines (docs/system.md 1.1), and a large
// same-host RDMA into shared registered memory is split between the calling thread and one
// helper thread, each copying half. The helper is started on the first large copy, polls for
// work for a short while after each, then sleeps on a futex; a caller never waits for it to
// wake: a half the helper has not started is taken back and copied by the caller.
// $GLEX_COPY_ENGINES=1 turns the helper off (one engine: the caller).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace galaxy::glex {

class CopyEngines {
 public:
  static constexpr size_t kSplitBytes = 256 * 1024;  // below this one engine is faster

  CopyEngines();
  ~CopyEngines();
  CopyEngines(const CopyEngines&) = delete;
  CopyEngines& operator=(const CopyEngines&) = delete;

  void copy(void* dst, const void* src, size_t n);
  uint64_t split_copies() const { return split_; }

 private:
  enum : uint32_t { kIdle = 0, kPosted = 1, kTaken = 2, kDone = 3 };
  void helper_loop();

  bool enabled_ = true;
  int creator_pid_ = 0;  // a forked child has no helper thread: it copies alone
  std::thread helper_;
  std::atomic<bool> busy_{false};  // one caller at a time uses the helper
  alignas(64) std::atomic<uint32_t> state_{kIdle};
  void* dst_ = nullptr;
  const void* src_ = nullptr;
  size_t n_ = 0;
  alignas(64) std::atomic<uint32_t> wake_{0};
  std::atomic<uint32_t> sleeping_{0};
  std::atomic<bool> stop_{false};
  uint64_t split_ = 0;
};

}  // namespace galaxy::glex
