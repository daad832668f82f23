// Register map of the NIC (12-bit addresses) and the NRC (15-bit addresses); every register is
// 64 bits (docs/system.md 1.4). docs/registers.md is the reference with grades and bit fields.
#pragma once

#include <cstdint>

#include "base/radix.h"
#include "wire/chip_id.h"

namespace galaxy::chip::reg {

inline constexpr uint32_t kNicAddressSpace = 1u << 12;
inline constexpr uint32_t kNrcAddressSpace = 1u << 15;

// Common block (both chips).
inline constexpr uint16_t kChipIdent = 0x000;       // RO [1:0] type, [15:8] ports, [31:16] model
inline constexpr uint16_t kChipId = 0x001;          // RW [15:0] id, [16] valid (configured),
                                                    //    [17] bit 16 of the id, [18] the
                                                    //    fabric's ids are wide (below)
inline constexpr uint16_t kChipCtrl = 0x002;        // RW [1:0] M_Key protect level, [2] below
inline constexpr uint16_t kMKey = 0x003;            // WO (reads 0): management key
inline constexpr uint16_t kMKeyViolations = 0x004;  // RO counter
inline constexpr uint16_t kTemperature = 0x005;     // RO milli-degrees Celsius
inline constexpr uint16_t kFaultEnable = 0x006;     // RW [0] report faults actively
inline constexpr uint16_t kFaultMask = 0x007;       // RW bit per FaultCode, 1 = not reported
inline constexpr uint16_t kFaultRouteLo = 0x008;    // RW bits 0-63 of the route to the server
inline constexpr uint16_t kFaultRouteHi = 0x009;    // RW [40:0] bits 64-104 of that route
inline constexpr uint16_t kFaultDest = 0x00A;       // RW [15:0] server NIC id, [21:16] server VP
inline constexpr uint16_t kFaultStatus = 0x00B;     // RW1C bit per FaultCode seen
inline constexpr uint16_t kFaultsReported = 0x00C;  // RO counter
inline constexpr uint16_t kNmaDropped = 0x00D;      // RO requests dropped (wrong DestID)
inline constexpr uint16_t kNmaErrors = 0x00E;       // RO error responses sent
inline constexpr uint16_t kNmaRequests = 0x00F;     // RO requests served
inline constexpr uint16_t kBootStatus = 0x010;      // RO [0] loaded, [15:8] error, [31:16] records
inline constexpr uint16_t kDirtyDiscards = 0x011;   // RO packets discarded as dirty (all ports)
inline constexpr uint16_t kScratch = 0x012;         // RW free for software
inline constexpr uint16_t kFaultRouteExt = 0x013;   // RW [59:0] the route's extension
inline constexpr uint16_t kMKeyLease = 0x014;       // RW [15:0] M_Key lease period, seconds
inline constexpr uint16_t kTempLimit = 0x015;       // RW milli-degrees: the over-temperature fault
inline constexpr uint16_t kVoltage = 0x016;         // RO core voltage, millivolts (0 while off)
inline constexpr uint16_t kPowerCycles = 0x017;     // RO times switched on or reset by the board
inline constexpr uint16_t kCommonEnd = 0x018;
// CHIP_CTRL bit 2 (NRCs): route data by the fixed choice among the allowed ports (the
// destination's tie-break alone, as a static d-mod-k switch would) instead of the least-loaded
// one; for comparing adaptive routing with a fixed choice (docs/registers.md).
inline constexpr uint64_t kCtrlFixedChoice = 1u << 2;

// NRC route-table access through indirect registers (docs/registers.md "Route tables").
inline constexpr uint16_t kRtSelect = 0x040;  // RW [23:0] input-port mask, [39:24] first dest,
                                              //    [55:40] entry count (1..131,071), [61] and
                                              //    [62] their bit 16 (chip/rt_select.h)
inline constexpr uint16_t kRtData = 0x041;    // W: port set for every selected entry;
                                              // R: port set of (lowest masked port, first dest)
inline constexpr uint16_t kRtEntriesWritten = 0x042;  // RO counter of entries written
inline constexpr uint16_t kRtStatus = 0x043;          // RO [0] last RT_DATA write rejected
// VC rules of the NRC's ports (chip/data_vc.h): port p in bits [4(p mod 16) + 3 : 4(p mod 16)]
// of register kVcRules + p / 16. RW; bits of ports the switch does not have must be 0.
inline constexpr uint16_t kVcRules = 0x044;
inline constexpr uint16_t kVcRulesWords = kMaxSwitchPorts / 16;  // 8
inline constexpr unsigned kVcRulesPerWord = 16;

// Peer summary: two 32-bit peer identities per register (ports 2i, 2i+1) so discovery reads an
// NRC's 24 neighbours with 12 registers = 6 two-register packets.
inline constexpr uint16_t kPeerSummary = 0x050;
inline constexpr uint16_t kPeerSummaryWords = 16;  // 32 ports; absent ones read 0
// The same for switches of any radix, in the wide peer identity format (below): ports 2i and
// 2i+1 in register i, up to kMaxSwitchPorts ports; discovery reads these.
inline constexpr uint16_t kPeerSummaryWide = 0x080;
inline constexpr uint16_t kPeerSummaryWideWords = kMaxSwitchPorts / 2;  // 64
// Bit 16 of each peer's chip id, which neither peer identity format holds: bit i of register w is
// port 64w + i's (0 for a port with no linked peer). Only a fabric of more than 65,535 chips sets
// any (wire/chip_id.h).
inline constexpr uint16_t kPeerSummaryHigh = 0x0C0;
inline constexpr uint16_t kPeerSummaryHighWords = kMaxSwitchPorts / 64;  // 2

// Per-port block: base + port * stride.
inline constexpr uint16_t kPortBase = 0x100;
inline constexpr uint16_t kPortStride = 0x20;
namespace port {
inline constexpr uint16_t kIdent = 0x00;            // RO [7:0] port, [23:8] chip id, [25:24] type,
                                                    //    [26] bit 16 of the chip id
inline constexpr uint16_t kPeerIdent = 0x01;        // RO [31:0] peer identity, [63:32] wide
                                                    //    peer identity (formats below)
inline constexpr uint16_t kLinkState = 0x02;        // RO [1:0] LinkState, [11:8] lanes up
inline constexpr uint16_t kHandshakes = 0x03;       // RO link handshakes (trainings) so far
inline constexpr uint16_t kRetransmissions = 0x04;  // RO link-level retransmissions
inline constexpr uint16_t kRetransRate = 0x05;      // RO retransmissions per million flits sent
inline constexpr uint16_t kCrcErrors = 0x06;        // RO
inline constexpr uint16_t kTxFlits = 0x07;          // RO
inline constexpr uint16_t kRxFlits = 0x08;          // RO
inline constexpr uint16_t kDirtyDiscards = 0x09;    // RO
inline constexpr uint16_t kTxPackets = 0x0A;        // RO
inline constexpr uint16_t kRxPackets = 0x0B;        // RO
inline constexpr uint16_t kOutputLoad = 0x0C;       // RO flits queued for output (adaptivity)
inline constexpr uint16_t kVcBuffered = 0x0D;       // RO flits in this input buffer, per VC
                                                    //    (VC v in [10v + 9 : 10v], chip/damq.h)
inline constexpr uint16_t kVcCredits = 0x0E;        // RO flits the peer's buffer can still take
                                                    //    per VC, as this output counts them
inline constexpr uint16_t kCreditStalls = 0x0F;     // RO packets that waited for credits here
inline constexpr uint16_t kPortCtrl = 0x10;         // RW [0] enable, [1] force link down
inline constexpr uint16_t kBistCtrl = 0x11;         // RW [0] start, [1] stop, [31:16] duration us,
                                                    //    [39:32] intensity percent
inline constexpr uint16_t kBistStatus =
    0x12;  // RO [0] running, [1] done, [2] no wire, [63:32] flits
inline constexpr uint16_t kBistErrors = 0x13;   // RO
inline constexpr uint16_t kLinkParams = 0x14;   // RW physical-layer parameters (FFE taps)
inline constexpr uint16_t kVcTxPackets = 0x15;  // RO 6 registers: packets sent on VC 0..5
inline constexpr uint16_t kEnd = 0x1B;
}  // namespace port

// The address of register `offset` (port::k*) of port `p`.
constexpr uint16_t port_register(unsigned p, uint16_t offset) {
  return static_cast<uint16_t>(kPortBase + p * kPortStride + offset);
}

// NIC virtual-port blocks: base + vp * stride, 40 VPs.
inline constexpr uint16_t kVpBase = 0x200;
inline constexpr uint16_t kVpStride = 0x10;
namespace vp {
inline constexpr uint16_t kCtrl = 0x00;        // RO [0] DMA type (SDQ), [1] busy
inline constexpr uint16_t kDqDepth = 0x01;     // RO descriptors queued
inline constexpr uint16_t kMpqCount = 0x02;    // RO MPs waiting in the MPQ
inline constexpr uint16_t kEqCount = 0x03;     // RO events waiting in the EQ
inline constexpr uint16_t kCpCounter = 0x04;   // RO collective control-packet counter
inline constexpr uint16_t kDescDone = 0x05;    // RO descriptors completed
inline constexpr uint16_t kMpReceived = 0x06;  // RO MPs delivered to the MPQ
inline constexpr uint16_t kMpqFull = 0x07;     // RO MPs that found the MPQ full and waited
inline constexpr uint16_t kDescErrors = 0x08;  // RO descriptors rejected as malformed
inline constexpr uint16_t kMpRefused =
    0x09;  // RO MPs of this VP refused on the way or at the target
inline constexpr uint16_t kCpReceived = 0x0A;   // RO CPs that arrived for this VP
inline constexpr uint16_t kTriggered = 0x0B;    // RO CP-triggered descriptors started
inline constexpr uint16_t kCpDiscarded = 0x0C;  // RO CPs discarded: their data found no room
inline constexpr uint16_t kEnd = 0x0D;
}  // namespace vp

// The address of register `offset` (vp::k*) of VP `v`.
constexpr uint16_t vp_register(unsigned v, uint16_t offset) {
  return static_cast<uint16_t>(kVpBase + v * kVpStride + offset);
}

// NIC error buffer: the last dirty packet (docs/system.md 1.1).
inline constexpr uint16_t kErrBufStatus =
    0x800;  // RO [0] valid, [15:8] code, [31:16] error id, [39:32] data defect
inline constexpr uint16_t kErrBufData = 0x801;  // RO 13 registers: first 104 bytes
inline constexpr uint16_t kErrBufWords = 13;

// 32-bit peer identity format (PEER_IDENT and each half of PEER_SUMMARY).
//   [0] valid, [1] type (0 NIC, 1 NRC), [6:2] peer port, [7] link up, [23:8] peer chip id (its
//   low 16 bits; bit 16 in PEER_SUMMARY_HIGH), [31:24] number of ports of the peer chip
//   (exchanged with the identity at link training)
// The 5-bit port field holds a port above 31 modulo 32: PEER_SUMMARY_WIDE names it whole.
inline constexpr uint32_t encode_peer(bool valid, bool nrc, uint8_t port, bool up, wire::ChipId id,
                                      uint8_t peer_ports = 0) {
  return (valid ? 1u : 0u) | (nrc ? 2u : 0u) | (uint32_t{port & 31u} << 2) | (up ? 0x80u : 0u) |
         (wire::chip_id_low(id) << 8) | (uint32_t{peer_ports} << 24);
}

// 32-bit wide peer identity format (PEER_IDENT [63:32] and each half of PEER_SUMMARY_WIDE),
// for ports and radices up to kMaxSwitchPorts. Only a peer on a link that is up is named; a
// port whose link is down or that has no peer reads 0.
//   [0] linked, [1] type (0 NIC, 1 NRC), [8:2] peer port (0-127), [24:9] peer chip id (its low 16
//   bits; bit 16 in PEER_SUMMARY_HIGH), [31:25] number of ports of the peer chip minus 1 (1-128)
struct WidePeer {
  bool linked = false;
  bool nrc = false;
  uint8_t port = 0;
  wire::ChipId chip = 0;  // decoded: the low 16 bits (with_high_bit adds bit 16)
  uint16_t ports = 0;     // the peer's radix; 0 when not linked
  bool operator==(const WidePeer&) const = default;
};
inline constexpr uint32_t encode_wide_peer(const WidePeer& p) {
  if (!p.linked || p.ports == 0) return 0;
  return 1u | (p.nrc ? 2u : 0u) | (uint32_t{p.port & 127u} << 2) |
         (wire::chip_id_low(p.chip) << 9) | (uint32_t{(p.ports - 1u) & 127u} << 25);
}
inline constexpr WidePeer decode_wide_peer(uint32_t w) {
  WidePeer p;
  if (!(w & 1)) return p;
  p.linked = true;
  p.nrc = (w >> 1) & 1;
  p.port = static_cast<uint8_t>((w >> 2) & 127);
  p.chip = (w >> 9) & 0xFFFF;
  p.ports = static_cast<uint16_t>((w >> 25) + 1);
  return p;
}

// Peer `port`'s identity with bit 16 of its chip id from PEER_SUMMARY_HIGH register `high`
// (the register holding ports 64 * (port / 64) ...).
inline constexpr WidePeer with_high_bit(WidePeer p, unsigned port, uint64_t high) {
  if (p.linked) p.chip = wire::chip_id_of(p.chip, high >> (port % 64));
  return p;
}

// CHIP_ID's value for chip id `id`, valid (configured) or not. `wide`: the chip belongs to a
// fabric whose ids may take 17 bits (more than 65,535 chips), set with the ids by whoever
// configures them, as an InfiniBand SM enables extended LIDs for a whole subnet; a management
// server whose NIC says so reads its peers' bit 16 in discovery (PEER_SUMMARY_HIGH), which a
// fabric of 16-bit ids never pays for.
inline constexpr uint64_t encode_chip_id(wire::ChipId id, bool valid = true, bool wide = false) {
  return wire::chip_id_low(id) | (valid ? uint64_t{1} << 16 : 0) |
         uint64_t{wire::chip_id_high(id)} << 17 | (wide ? uint64_t{1} << 18 : 0);
}
inline constexpr bool chip_id_wide(uint64_t v) {
  return (v >> 18) & 1;
}
// The most chips a fabric of 16-bit ids holds (ids 0 .. 0xFFFE, all ones unconfigured).
inline constexpr uint32_t kNarrowChips = 0xFFFF;
inline constexpr wire::ChipId chip_id_value(uint64_t v) {
  return wire::chip_id_of(v, v >> 17);
}
inline constexpr bool chip_id_valid(uint64_t v) {
  return (v >> 16) & 1;
}

// FAULT_DEST: the server a chip's fault reports go to, [15:0] its NIC id, [21:16] its VP and
// [22] bit 16 of the NIC id (the master, when several servers manage the fabric:
// nm/galaxy_sm.h).
inline constexpr uint64_t encode_fault_dest(wire::ChipId nic, uint8_t vp) {
  return wire::chip_id_low(nic) | (uint64_t{vp & 63u} << 16) |
         uint64_t{wire::chip_id_high(nic)} << 22;
}
inline constexpr wire::ChipId fault_dest_nic(uint64_t v) {
  return wire::chip_id_of(v, v >> 22);
}
inline constexpr uint8_t fault_dest_vp(uint64_t v) {
  return static_cast<uint8_t>((v >> 16) & 63);
}

}  // namespace galaxy::chip::reg
