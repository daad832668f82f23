#include "glex/copy_engines.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/env.h"
#include "base/sysinfo.h"
#include "base/thread.h"
#include "engine/live/segment.h"

namespace galaxy::glex {

namespace {
constexpr uint64_t kHelperPollNs = 200'000;  // after a job, poll this long before sleeping
}

CopyEngines::CopyEngines() : creator_pid_(getpid()) {
  // open_live_device has refused a bad value with its name; here it is the table's default.
  const auto n = env_int_or_default("GLEX_COPY_ENGINES");
  enabled_ = !(n.ok() && *n <= 1) && online_cores() > 1;
}

CopyEngines::~CopyEngines() {
  if (!helper_.joinable()) return;
  if (getpid() != creator_pid_) {  // a forked child: the thread is the parent's
    helper_.detach();
    return;
  }
  stop_.store(true);
  wake_.fetch_add(1);
  live::futex_wake(&wake_);
  helper_.join();
}

void CopyEngines::copy(void* dst, const void* src, size_t n) {
  bool expected = false;
  if (!enabled_ || n < kSplitBytes || getpid() != creator_pid_ ||
      !busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    std::memcpy(dst, src, n);
    return;
  }
  if (!helper_.joinable()) helper_ = start_running([this] { helper_loop(); });
  const size_t half = (n / 2) & ~size_t{63};
  dst_ = static_cast<uint8_t*>(dst) + half;
  src_ = static_cast<const uint8_t*>(src) + half;
  n_ = n - half;
  state_.store(kPosted, std::memory_order_release);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    wake_.fetch_add(1, std::memory_order_release);
    live::futex_wake(&wake_);
  }
  std::memcpy(dst, src, half);
  uint32_t posted = kPosted;
  if (state_.compare_exchange_strong(posted, kTaken, std::memory_order_acq_rel)) {
    std::memcpy(const_cast<void*>(static_cast<const void*>(dst_)), src_, n_);  // not started
  } else {
    while (state_.load(std::memory_order_acquire) != kDone) live::cpu_relax();
    ++split_;
  }
  state_.store(kIdle, std::memory_order_relaxed);
  busy_.store(false, std::memory_order_release);
}

void CopyEngines::helper_loop() {
  uint64_t idle_since = live::monotonic_ns();
  for (uint32_t i = 0; !stop_.load(std::memory_order_relaxed); ++i) {
    uint32_t posted = kPosted;
    if (state_.load(std::memory_order_relaxed) == kPosted &&
        state_.compare_exchange_strong(posted, kTaken, std::memory_order_acq_rel)) {
      std::memcpy(dst_, src_, n_);
      state_.store(kDone, std::memory_order_release);
      idle_since = live::monotonic_ns();
      continue;
    }
    live::cpu_relax();
    if ((i & 255) != 255 || live::monotonic_ns() - idle_since < kHelperPollNs) continue;
    const uint32_t w = wake_.load(std::memory_order_acquire);
    sleeping_.store(1, std::memory_order_seq_cst);
    if (state_.load(std::memory_order_seq_cst) != kPosted && !stop_.load())
      live::futex_wait(&wake_, w, 100'000'000);
    sleeping_.store(0, std::memory_order_relaxed);
    idle_since = live::monotonic_ns();
  }
}

}  // namespace galaxy::glex
