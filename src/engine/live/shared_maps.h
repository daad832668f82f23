// Registrations in memory that glex_alloc_mem gave a process (a memfd it shares, AttEntry::memfd),
// mapped into the process that reaches them: the NIC's accesses to such a registration are then
// a memcpy, as a NIC's DMA engine reaches pinned memory, instead of a system call per access
// (cross-memory attach, which stays the way to every other registration).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "base/function_ref.h"
#include "engine/live/segment.h"

namespace galaxy::live {

class SharedMaps {
 public:
  SharedMaps() = default;
  SharedMaps(const SharedMaps&) = delete;
  SharedMaps& operator=(const SharedMaps&) = delete;
  ~SharedMaps();

  // Where [vaddr, vaddr + length) of registration `e` (ATT entry `index`, already checked by the
  // ATT) lies in this process, mapping the owner's memfd at its first use; nullptr when `e` is
  // not in shared memory, the memfd cannot be opened, the range lies beyond it or the owner is
  // dead (then cross-memory attach tells the caller so). A mapping outlives its owner, so the
  // owner's memory is checked to be reachable once per 1 ms (a system call per access would
  // cost more than a 4 KiB copy): an owner that died within that time may still be written to
  // (docs/live.md).
  // `now_ns`: monotonic_ns() or a copy of it, for the check of the owner.
  uint8_t* at(uint32_t index, const AttEntry& e, uint64_t vaddr, uint64_t length, uint64_t now_ns);

  // Unmaps the registrations `gone` names (deregistered, reused or of a dead owner), so that the
  // memory of a buffer its owner freed goes back to the system.
  void drop_if(FunctionRef<bool(uint32_t index, int32_t pid, uint32_t generation)> gone);

  size_t size() const { return maps_.size(); }

 private:
  using Key = std::tuple<int32_t, uint32_t, uint32_t>;  // owner pid, ATT index, generation
  struct Mapping {
    int32_t memfd;
    uint64_t memfd_base;
    uint8_t* base;
    uint64_t length;
  };
  static constexpr uint64_t kOwnerCheckNs = 1'000'000;
  bool owner_alive(int32_t pid, uint64_t vaddr, uint64_t now_ns);
  static uint8_t* inside(const Mapping& m, const AttEntry& e, uint64_t vaddr, uint64_t length);
  std::map<Key, Mapping> maps_;
  std::map<Key, Mapping>::iterator last_ = maps_.end();  // one buffer in a loop: most lookups
  uint64_t last_alive_check_ns_ = 0;
  int32_t last_alive_pid_ = 0;
};

}  // namespace galaxy::live
