// What a NIC of the live engine reaches its host through (docs/system.md 1.1; chip/host_memory.h):
// the daemon runs chip::Nic for the transfers that cross hosts, and the NIC translates and
// checks every access against the registrations the processes wrote into the shared segment,
// then reads and writes the registering process's memory by cross-memory attach.
//
// A "physical address" here names an ATT entry and a virtual address of its process:
// entry << 48 | vaddr (user addresses lie below 2^47 on the hosts Galaxy runs on).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <vector>

#include "chip/att.h"
#include "chip/host_memory.h"
#include "engine/live/items.h"
#include "engine/live/segment.h"
#include "engine/live/shared_maps.h"

namespace galaxy::live {

// An ATT key as a descriptor carries it (wire/rdma_descriptor.h: 32 bits): the entry's index in
// the top 8 bits and the low 24 bits of the registration's key. glex memory handles are
// index << 32 | key (glex/live_device.cc).
static_assert(kAttEntries <= 256);
inline constexpr uint32_t kWireKeyBits = 24;
inline constexpr uint32_t kWireKeyMask = (1u << kWireKeyBits) - 1;
constexpr bool valid_handle(uint64_t mh) {
  return (mh >> 32) < kAttEntries && (mh & 0xFFFFFFFFu) <= kWireKeyMask;
}
constexpr uint32_t wire_key(uint64_t mh) {
  return static_cast<uint32_t>(((mh >> 32) << kWireKeyBits) | (mh & kWireKeyMask));
}
constexpr uint64_t handle_of_wire_key(uint32_t key) {
  return (uint64_t{key >> kWireKeyBits} << 32) | (key & kWireKeyMask);
}

inline constexpr unsigned kPhysEntryShift = 48;
inline constexpr uint64_t kPhysAddressMask = (uint64_t{1} << kPhysEntryShift) - 1;

// Error ids of the live NIC's memory port, beside chip::failure_of's.
inline constexpr uint16_t kErrMemoryOwnerGone = 4756;
inline constexpr uint16_t kErrMemoryUnmapped = 4757;
inline constexpr uint16_t kErrMemoryDeregistered = 4759;

// The errors of an access through the NIC's memory port: `st` of copy_with (or a copy like it)
// as a status with this engine's ids, and a registration that vanished during the access.
Status memory_access_status(OpStatus st, int32_t pid, uint64_t vaddr, uint64_t length);
Error deregistered_error(uint64_t phys);

// A consistent copy of ATT entry `index` (written by its process while others read it): false
// when the entry is not a valid registration, or changed while it was read.
bool read_att_entry(const NicSlot& nic, uint64_t index, AttEntry* out);

// The one lookup of a registration by a descriptor's key: the entry of `key`, the key's 24 bits
// matched, the region within the NIC's reach, then chip::check_region. On success *entry holds a
// copy of the entry. Both the daemon's NICs (SegmentAtt) and the same-host path (check_att) use it.
Status lookup_att(const NicSlot& nic, uint32_t key, uint64_t vaddr, uint64_t length,
                  uint32_t access, AttEntry* entry);
// Its second half: the checks of an access against an entry already read for `key`.
Status check_att_entry(const AttEntry& e, uint32_t key, uint64_t vaddr, uint64_t length,
                       uint32_t access);
// What an ATT refusal (chip/att.cc error ids) tells the owner of the descriptor, in the words of
// its CQ entry; `write` is whether the refused access was a write.
const char* att_refusal(uint16_t error_id, bool write);

class SegmentAtt final : public chip::AttTable {
 public:
  explicit SegmentAtt(NicSlot& nic) : nic_(nic) {}
  // For one transfer: `known` is the entry of `known_key` that a check in the same call has just
  // read (the owner check of a request); the table checks against it instead of reading it again.
  SegmentAtt(NicSlot& nic, uint32_t known_key, const AttEntry& known)
      : nic_(nic), known_(&known), has_last_(true), last_key_(known_key) {}
  Status check(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access) const override;
  Status translate_pieces(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access,
                          const PieceFn& fn) const override;
  // The entry of ATT index `index` as the last passed check read it, or nullptr (the same-host
  // path finds the owner's memory through it without reading the entry again).
  const AttEntry* last_entry(uint64_t index) const {
    if (!has_last_ || (last_key_ >> kWireKeyBits) != index) return nullptr;
    return known_ ? known_ : &last_;
  }

 private:
  NicSlot& nic_;
  mutable const AttEntry* known_ = nullptr;
  mutable bool has_last_ = false;
  mutable uint32_t last_key_ = 0;
  mutable AttEntry last_{};
};

// The NIC's port to the processes' memory. A registration in memory from glex_alloc_mem is
// mapped here (SharedMaps) and read and written in place. Any other costs a system call per
// access (cross-memory attach), so, as the NIC's own DMA engines do (docs/system.md 1.1: 1 KiB
// read requests into an 8 KiB FIFO), reads fetch ahead into a FIFO-sized buffer, and writes are
// posted: contiguous writes to one process are gathered and completed at flush
// (chip::HostMemory::flush, which the NIC calls before anything tells of them). The read-ahead
// holds only within one round of the daemon's loop (begin_round), so a buffer its owner changed
// after a completion is read anew.
class SegmentHostMemory final : public chip::HostMemory {
 public:
  explicit SegmentHostMemory(NicSlot& nic) : nic_(nic), own_pid_(getpid()) {}
  Status read(uint64_t phys, std::span<uint8_t> out) override;
  Status write(uint64_t phys, std::span<const uint8_t> in) override;
  Status flush() override;
  void begin_round() { cached_ = 0; }
  // The daemon's clock, read once per round of its loop (SharedMaps::at checks owners by it).
  void set_time(uint64_t now_ns) { now_ns_ = now_ns; }
  // Unmaps the shared memory of registrations that are gone from the ATT (deregistered, or their
  // owner died and the daemon's liveness scan cleared them).
  void drop_stale();

 private:
  static constexpr size_t kReadAhead = 32768;
  static constexpr size_t kMaxPosted = 65536;
  Status io(int32_t pid, uint64_t vaddr, uint8_t* local, uint64_t length, bool write);
  NicSlot& nic_;
  const int32_t own_pid_;  // the daemon's (getpid is a system call)
  uint64_t now_ns_ = 0;
  SharedMaps maps_;
  std::vector<uint8_t> cache_;
  uint64_t cache_phys_ = 0;
  size_t cached_ = 0;
  std::vector<uint8_t> posted_;
  uint64_t posted_phys_ = 0;
  int32_t posted_pid_ = 0;
};

}  // namespace galaxy::live
