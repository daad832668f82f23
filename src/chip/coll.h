// Offloaded collectives in the NIC (docs/system.md 1.1, "Offloaded collectives"): control packets
// (CPs, special MPs) and CP-triggered descriptors. Every VP has a CP counter; each arriving CP
// adds its increment and makes the NIC look at the VP's descriptor queue again: a descriptor at
// its head that carries a trigger count waits until the counter reaches it, then starts (and
// those queued behind it follow) and the counter drops by the count. A CP may also be written
// into the VP's MPQ, and its data may replace the data of the descriptors it triggers. Software
// lays an algorithm's tree out as triggered descriptors; the NIC then runs it with no host.
//
// Beyond the paper, a CP may carry a combining operation (sum, min, max over int64 or double):
// the NIC folds its data into the VP's accumulator, and a triggered descriptor may send its own
// data combined with the accumulator, so a reduction runs in the NIC as well.
//
// On the link a CP is a data packet of kind kCp (docs/protocol.md, "Control packets"): the
// head's tag carries the increment, its flags the CP's flags, the extension's key the
// combining operation.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "wire/data_packet.h"
#include "wire/mp.h"

namespace galaxy::chip {

// Flags of a CP on the link (DataHead::flags of a kCp packet). Bit 2 is the data packets'
// kDataFlagInTransfer, which a CP never carries.
inline constexpr uint8_t kCpFlagInterrupt = 0x1;  // with kCpFlagToMpq: raise the MPQ interrupt
inline constexpr uint8_t kCpFlagToMpq = 0x2;      // also write the CP into the target's MPQ
inline constexpr uint8_t kCpFlagReplace = 0x8;    // its data replace the data it triggers
inline constexpr uint8_t kCpFlagsMask = 0xB;
static_assert((kCpFlagsMask & wire::kDataFlagInTransfer) == 0);

// How a CP's data combine into the target VP's accumulator (beyond the paper).
enum class CombineOp : uint8_t {
  kNone = 0,
  kSumI64 = 1,
  kMinI64 = 2,
  kMaxI64 = 3,
  kSumF64 = 4,
  kMinF64 = 5,
  kMaxF64 = 6,
};
inline constexpr uint8_t kMaxCombineOp = 6;
inline constexpr unsigned kCombineElementBytes = 8;
// Elements a CP combines: its 120 bytes of data as 8-byte values.
inline constexpr unsigned kMaxCombineElements = wire::kMpPayloadBytes / kCombineElementBytes;
const char* combine_op_name(CombineOp op);

// Combines `in` into `acc` element by element (both `bytes` long, a multiple of 8).
void combine(CombineOp op, std::span<uint8_t> acc, std::span<const uint8_t> in);

// Where a started descriptor's data come from.
enum class CollData : uint8_t {
  kOwn = 0,  // the data posted with it
  // The data of the oldest replacing CP (kCpFlagReplace), released by the last trigger that
  // took CP data (a kCp descriptor's or a triggered RDMA's); its own when there was none.
  kCp = 1,
  // Its own data combined with the accumulator the last combining trigger released (by the
  // descriptor's op): the CPs with a cp_op that came before that trigger.
  kCombined = 2,
};
inline constexpr uint8_t kMaxCollData = 2;

// A descriptor of the NIC's collective engine, posted into a VP's queue like any other
// (Nic::post_coll). kCp sends a CP; kMp sends an ordinary MP into the target's MPQ (so a CP's
// data may replace the data of a queued MP descriptor, docs/system.md 1.1); kLocal sends nothing:
// the NIC writes its data (if any) into the VP owner's registered memory and, with notify, a
// completion event — the end of a collective as its host sees it.
struct CollDescriptor {
  enum class Kind : uint8_t { kCp = 0, kLocal = 1, kMp = 2 };
  bool sends() const { return kind != Kind::kLocal; }
  Kind kind = Kind::kCp;
  uint16_t trigger = 0;  // CP count that starts it; 0: starts when it reaches the head
  CollData data_from = CollData::kOwn;
  CombineOp op = CombineOp::kNone;  // kCombined: how its own data and the accumulator combine
  bool fence = false;               // starts after every earlier descriptor of the VP completed
  bool notify = false;              // a completion event when done (errors always write one)
  // kCp
  wire::ChipId dest_node = 0;
  uint8_t dest_vp = 0;
  uint16_t increment = 1;              // 1-65535
  uint8_t cp_flags = 0;                // kCpFlag*
  CombineOp cp_op = CombineOp::kNone;  // how the target combines the CP's data
  // kLocal: where the data go (length 0: nowhere). With data_from kCp, a CP whose data are not
  // `length` bytes long makes it fail (E2119): the members of a collective disagree.
  uint32_t key = 0;
  uint64_t address = 0;
  uint8_t length = 0;  // 0-120
  std::array<uint8_t, wire::kMpPayloadBytes> data{};
};

// Checks a collective descriptor's fields; the error names the bad one.
Status check_coll_descriptor(const CollDescriptor& d);

// A CP's fields as its packet carries them.
struct CpFields {
  uint16_t increment = 1;
  uint8_t flags = 0;
  CombineOp op = CombineOp::kNone;
};
// Reads them from a kCp packet; an error when a field is out of range (the packet is dirty).
Result<CpFields> cp_fields(const wire::DataPacket& p);
// Whether a data packet stays on the NIC: a CP that is not written into the MPQ touches no host
// memory, so it costs the receiving NIC no DMA write (the simulated engine's timing).
bool stays_on_chip(const wire::DataHead& h);

}  // namespace galaxy::chip
