// The 16-byte completion event (docs/system.md 1.1: "when the RDMA has completed those 16 bytes are
// written there, and the receiver polls that address"), written once for every engine and
// path. The transfer's data are written before it; then word 0; then, after a release fence,
// word 1. A receiver polls word 1 with acquire (glex_wait_event): once it sees word 1 it sees
// word 0 and the data too.
#pragma once

#include <atomic>
#include <cstdint>

namespace galaxy::chip {

inline constexpr uint64_t kEventBytes = 16;

// `write(addr, value)` stores one 8-byte word of the target's memory and returns a status;
// `ok` is its success value. Returns the first failure, or ok.
template <class Status, class WriteWord>
Status write_event(uint64_t addr, uint64_t word0, uint64_t word1, Status ok, WriteWord&& write) {
  Status st = write(addr, word0);
  if (st != ok) return st;
  std::atomic_thread_fence(std::memory_order_release);
  return write(addr + 8, word1);
}

}  // namespace galaxy::chip
