// What travels inside the live engine besides the shared rings (docs/live.md):
//   * egress cells: a process hands the daemon a management descriptor, traffic whose path
//     leaves the host (an MP, an RDMA descriptor), or work of the NIC's collective engine, which
//     must progress while no thread of the process runs (a collective descriptor, a CP-triggered
//     RDMA descriptor, dropping a VP's collective state);
//   * link items: the packets that cross a UDP link, several per link-layer frame. Each names
//     the chip and port it left from, so the receiving daemon knows where it enters.
// All are plain little-endian structs copied with memcpy; the receiving side validates every
// field before use (a link item comes from the network).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "base/status.h"

namespace galaxy::live {

// kArrived and kLeaving carry a link item (ItemHead and its data packet) of the direct path
// between processes (engine/live/direct.h): one that arrived on a process's own socket and is not
// a clean MP for an open VP of the host, which the daemon receives as if its link had delivered
// it; and one a process sent on a direct link that failed unacknowledged, which the daemon sends
// on over its own link out of the chip and port the item names.
enum class EgressKind : uint8_t {
  kMgmt = 1,
  kMp = 2,
  kRdma = 3,
  kColl = 4,
  kCollReset = 5,
  kArrived = 6,
  kLeaving = 7,
};

struct EgressMgmt {
  uint32_t nic;
  uint8_t vp;
  uint8_t length;  // of the descriptor: 64, or 128 for the wide variant
  uint8_t reserved[2];
  uint8_t descriptor[128];  // wire::encode_mgmt_descriptor
};
static_assert(sizeof(EgressMgmt) <= 248);

struct EgressMp {
  uint32_t src_node;
  uint32_t dest_node;
  uint8_t src_vp;
  uint8_t dest_vp;
  uint8_t kind_flags;
  uint8_t length;
  uint8_t data[120];
};

// Status codes of completions and link items; the same numbers as glex_ret_t (include/glex.h,
// checked there by static_assert) without the engine depending on the layer above.
enum class OpStatus : uint8_t {
  kSuccess = 0,
  kInvalidParam = 1,
  kNoResource = 2,
  kTimeout = 3,
  kDescriptorError = 4,
  kBusy = 5,
  kAccessError = 7,
  kUnreachable = 8,
  kPeerDead = 9,
};
// GLEX_OP_*; kColl: a descriptor of the NIC's collective engine (chip/coll.h).
enum class OpCode : uint8_t { kPut = 1, kGet = 2, kImm = 3, kMp = 4, kColl = 5 };
inline constexpr uint8_t kFlagFence = 0x1;
inline constexpr uint8_t kFlagLocalCq = 0x4;
inline constexpr uint8_t kFlagRemoteEvent = 0x8;

// An RDMA descriptor the daemon executes (docs/system.md 1.1): the daemon's DMA engine reads the
// initiator's memory by cross-memory attach.
struct EgressRdma {
  uint8_t op;  // GLEX_OP_PUT / GET / IMM
  uint8_t flags;
  uint8_t src_vp;
  uint8_t dest_vp;
  uint32_t src_node;
  uint32_t dest_node;
  int32_t pid;
  uint64_t local_addr;
  uint64_t local_mh;  // the initiator's registration of local_addr (checked again by the daemon)
  uint64_t length;
  uint64_t remote_addr;
  uint64_t remote_mh;
  uint64_t event_addr;
  uint64_t event_mh;
  uint64_t event[2];
  uint64_t cookie;
  // CP-triggered (chip/coll.h): the NIC starts it when the VP's CP counter reaches this; such a
  // descriptor always goes through the daemon's NIC, whose queue holds the VP's collective work.
  uint16_t cp_count;
  uint8_t reserved[6];  // 0
  uint8_t imm[128];
};
static_assert(sizeof(EgressRdma) <= 248);

// A descriptor of the NIC's collective engine (chip::CollDescriptor) for the daemon's model of
// the VP's NIC, which runs the collective while the process sleeps or computes. Its fields as
// the descriptor's; `pid` must own the VP. The daemon checks all of it again.
struct EgressColl {
  uint32_t nic;
  uint8_t vp;
  uint8_t kind;       // chip::CollDescriptor::Kind
  uint8_t data_from;  // chip::CollData
  uint8_t op;         // chip::CombineOp
  int32_t pid;
  uint16_t trigger;
  uint16_t dest_node;  // kCp (a live fabric holds at most 65,534 chips)
  uint8_t dest_vp;     // kCp
  uint8_t flags;       // kCollFlag*
  uint16_t increment;  // kCp
  uint8_t cp_flags;    // kCp: chip::kCpFlag*
  uint8_t cp_op;       // kCp: chip::CombineOp
  uint8_t length;      // 0-120
  uint8_t reserved0;   // 0
  uint32_t key;        // kLocal: the owner's registration, as a descriptor carries it
  uint32_t reserved1;  // 0
  uint64_t address;    // kLocal
  uint64_t cookie;     // the CQ entry's
  uint8_t data[120];
};
static_assert(sizeof(EgressColl) == 168);
inline constexpr uint8_t kCollFlagFence = 0x1;
inline constexpr uint8_t kCollFlagNotify = 0x2;

// Drops what a VP's collectives left in the daemon's NIC (chip::Nic::reset_coll): its queued
// collective descriptors and CP-triggered ones, its CP counter and the data CPs brought.
struct EgressCollReset {
  uint32_t nic;
  uint8_t vp;
  uint8_t reserved[3];  // 0
  int32_t pid;          // must own the VP
};

// EgressKind::kArrived / kLeaving: the item's bytes, as they crossed (or were to cross) the link.
struct EgressItem {
  uint8_t bytes[240];
};

enum class ItemType : uint8_t {
  kMgmt = 1,      // a management packet (100 bytes)
  kData = 8,      // a data packet (MP, RDMA data, read request or response, ack): its encoded flits
  kBist = 9,      // a link self-test pattern (BistPattern), checked and discarded by the far end
  kBistEnd = 10,  // the test is over (BistEnd): the far end answers with what it saw
  kBistReport = 11,  // what the far end saw of the test (BistReport)
  // A transfer's data packet and the run of its packets that follow (chip::rdma_run_bytes):
  // the packet's encoded flits, a RunHead, then the run's payload. Only processes' direct links
  // carry it (glex/direct_rdma.h).
  kDataRun = 12,
};

// What follows a run's first packet in a kDataRun item: the run's payload bytes. The run
// carries no CRC of its own: the link frame's CRC covers it, as it covers every item.
struct RunHead {
  uint32_t bytes;
  uint32_t reserved;  // 0
};

// The test pattern of a link BIST (docs/system.md 2.5.6) on a cable between hosts: 40 flits of
// pseudo-random bytes (as many flits as its size fills) that follow from the sequence number, so
// the far end checks them without being told the pattern. It crosses the link layer like any item
// (CRC, retransmission), so the test counts what the link layer had to repair while it ran.
inline constexpr size_t kBistPatternBytes = 1000;  // 40 flits of 25 bytes
struct BistPattern {
  uint64_t sequence;
  uint8_t bytes[kBistPatternBytes];
};
struct BistEnd {
  uint64_t patterns;  // sent
};
// What the receiving end of a cable saw while the test ran: patterns that arrived intact, that
// differed and that never came (of those the end counted), and the frames of the test's VC its
// link layer discarded as corrupt (CRC) or malformed (each such frame was sent again).
struct BistReport {
  uint64_t patterns;
  uint64_t mismatched;
  uint64_t lost;
  uint64_t crc_errors;
  uint64_t malformed;
};

// The pattern of `sequence` (xorshift64*, seeded by the sequence number).
inline void fill_bist_pattern(uint64_t sequence, uint8_t* out) {
  uint64_t x = sequence * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < kBistPatternBytes; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    const uint64_t word = x * 0x2545F4914F6CDD1Dull;
    std::memcpy(out + i, &word, 8);
  }
}

struct ItemHead {
  uint16_t length;  // whole item, head included
  uint8_t type;
  uint8_t from_port;
  uint32_t from_chip;
};

template <class T>
bool read_struct(std::span<const uint8_t> bytes, size_t offset, T* out) {
  if (bytes.size() < offset + sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

// The whole item at `offset` of a link frame's payload (its head's length, at least the head,
// within the payload), or an empty span when what is there is not one.
inline std::span<const uint8_t> item_at(std::span<const uint8_t> payload, size_t offset) {
  ItemHead h;
  if (!read_struct(payload, offset, &h) || h.length < sizeof h ||
      offset + h.length > payload.size())
    return {};
  return payload.subspan(offset, h.length);
}

// The head of a whole item that carries a data packet (a direct path's item), checked: its length
// is the item's, its type kData, the chip and port it names within the fabric's.
inline bool read_data_item_head(std::span<const uint8_t> item, uint32_t num_chips,
                                uint32_t max_ports, ItemHead* h) {
  return read_struct(item, 0, h) && h->length == item.size() &&
         h->type == static_cast<uint8_t>(ItemType::kData) && h->from_chip < num_chips &&
         h->from_port < max_ports;
}
// The same for an item of a direct link, which may also be a run (kDataRun).
inline bool read_direct_item_head(std::span<const uint8_t> item, uint32_t num_chips,
                                  uint32_t max_ports, ItemHead* h) {
  return read_struct(item, 0, h) && h->length == item.size() &&
         (h->type == static_cast<uint8_t>(ItemType::kData) ||
          h->type == static_cast<uint8_t>(ItemType::kDataRun)) &&
         h->from_chip < num_chips && h->from_port < max_ports;
}

}  // namespace galaxy::live
