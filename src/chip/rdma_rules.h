// The rules of an RDMA transfer (docs/system.md 1.1), written once: what a NIC checks when a
// descriptor starts, what the target's NIC checks before any byte moves, how the completion
// event is written (which completions reach the CQ is chip::completes_locally, chip/nic.h, the
// rule of every descriptor). chip::Nic applies them to
// the packets it sends and receives; direct_rdma applies them to a transfer whose two NICs reach
// one memory system (the live engine's NICs of one host), with no packets between them.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "base/bits.h"
#include "base/status.h"
#include "chip/att.h"
#include "chip/event.h"
#include "wire/rdma_descriptor.h"

namespace galaxy::chip {

// The checks of a descriptor as it starts, in order: CP-triggered descriptors (not started by
// this model), the target VP, a get's completion kind, and the local region (the owner's own
// descriptor needs only the key). With `local_pieces`, the local region's check is its
// translation, each piece handed to it (AttTable::translate_pieces).
Status check_rdma_start(const wire::RdmaDescriptor& d, const AttTable& local,
                        const AttTable::PieceFn* local_pieces = nullptr);

// Where the notice of a transfer is written at the target (a get's event).
struct RdmaNotify {
  uint32_t key = 0;
  uint64_t address = 0;
};

// What the target's NIC checks before any byte of a transfer moves (the whole transfer, not
// packet by packet): a put's or immediate's destination for write; a get's source for read
// and, when it is notified, its event for write. With `pieces`, the data region's check is its
// translation.
Status check_rdma_target(const AttTable& target, wire::RdmaOp op, uint32_t key, uint64_t address,
                         uint64_t length, const RdmaNotify* get_event = nullptr,
                         const AttTable::PieceFn* pieces = nullptr);

// The 16-byte completion event at `address` of region `key`: checked by the ATT, then written
// by chip::write_event, each word through write_word(key, address, bytes) (which makes the word
// visible before it returns). Returns 0 or the first failure's error id.
template <class WriteWord>
uint16_t write_event_checked(const AttTable& att, uint32_t key, uint64_t address,
                             const std::array<uint8_t, wire::kNotifyDataBytes>& data,
                             WriteWord&& write_word);

// The memory a direct transfer moves data in: physical addresses as each side's ATT gives them
// (the two NICs' tables may name the same memory differently, so each address says its side).
class DirectMemory {
 public:
  virtual ~DirectMemory() = default;
  // Copies `n` bytes: into the target's memory from the initiator's (a put), or the reverse.
  virtual Status copy(bool into_target, uint64_t dst_phys, uint64_t src_phys, uint64_t n) = 0;
  // Writes bytes into the target's memory (immediate data, an event's words).
  virtual Status write_target(uint64_t phys, std::span<const uint8_t> in) = 0;
  // As HostMemory::flush: every write visible before anyone is told of it.
  virtual Status flush() { return {}; }
};

// A transfer whose initiator and target NICs reach one memory system, run to its end by the
// rules above in the order the packet path applies them: start checks, target checks, the
// data, flush, the notice (event or trailing immediate). Returns 0 or the error id the
// descriptor completes with. A trailing MP is refused (2059): it needs the target NIC's MPQ.
uint16_t direct_rdma(const wire::RdmaDescriptor& d, const AttTable& initiator,
                     const AttTable& target, DirectMemory& memory);

template <class WriteWord>
uint16_t write_event_checked(const AttTable& att, uint32_t key, uint64_t address,
                             const std::array<uint8_t, wire::kNotifyDataBytes>& data,
                             WriteWord&& write_word) {
  Status st = att.check(key, address, kEventBytes, kAccessWrite);
  if (!st.ok()) return st.error().id;
  uint16_t err = 0;
  write_event(address, get_bits(data, 0, 64), get_bits(data, 64, 64), true,
              [&](uint64_t a, uint64_t word) {
                std::array<uint8_t, 8> b{};
                put_bits(b, 0, 64, word);
                err = write_word(key, a, std::span<const uint8_t>(b));
                return err == 0;
              });
  return err;
}

}  // namespace galaxy::chip
