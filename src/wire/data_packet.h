// Table-routed data packets (docs/system.md 1.1, 1.2; layout in docs/protocol.md). The source
// writes only the destination node id into the head; every NRC looks it up in the route table of
// the input port. A data packet is a head flit, an extension flit (addresses and lengths of the
// RDMA it belongs to) and ceil(bytes / 24) payload flits, the last of which is the tail; the
// head's CRC-16 covers the head fields, the extension and the payload, so that a receiving NIC
// can discard a dirty packet (missing head or tail, too long, data error) before anything
// reaches host memory.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "wire/chip_id.h"
#include "wire/flit.h"

namespace galaxy::wire {

enum class PacketKind : uint8_t {
  kMp = 0,                // mini-packet into the target VP's MPQ
  kRdmaWrite = 1,         // RDMA put data
  kRdmaReadRequest = 2,   // RDMA get request
  kRdmaReadResponse = 3,  // RDMA get response data (a different VC from write data)
  kCp = 4,                // collective control packet (a special MP)
  kEvent = 5,             // 16-byte completion event written at a remote address
  kImmediate = 6,         // immediate RDMA (data carried in the packet)
  kAck = 7,               // end of a transfer at the target: done, or refused with an error id
};
inline constexpr uint8_t kMaxPacketKind = 7;

// Head flags.
inline constexpr uint8_t kDataFlagInterrupt = 0x01;   // MP: raise the MPQ-not-empty interrupt
inline constexpr uint8_t kDataFlagTrailing = 0x02;    // completion notice of transfer `tag`
inline constexpr uint8_t kDataFlagInTransfer = 0x04;  // counts towards transfer `tag`
inline constexpr uint8_t kDataFlagNotified = 0x08;    // transfer `tag` ends with a notice packet
inline constexpr uint8_t kDataFlagsMask = 0x0F;

struct DataHead {
  PacketKind kind = PacketKind::kMp;
  uint8_t vc = 0;  // 0..5 except 3 (management)
  ChipId dest_node = 0;
  ChipId src_node = 0;
  uint8_t dest_vp = 0;
  uint8_t src_vp = 0;
  uint16_t length_flits = 2;  // whole packet, head included: 2 + ceil(bytes / 24); 2..8
  uint16_t tag = 0;           // the transfer (source NIC's number) or an MP's software tag
  uint8_t bytes = 0;          // payload bytes, 0..128
  uint8_t flags = 0;          // kDataFlag*
  uint16_t crc = 0;           // CRC-16 of the packet; computed by encode_data_packet
  // NRCs the packet has passed: each NRC that passes it on adds one, and one that would pass it
  // on after chip::kMaxDataHops discards it instead (a routing loop must not keep a packet for
  // ever). Not covered by the CRC, so an NRC rewrites it alone (set_data_hops).
  uint8_t hops = 0;
  bool operator==(const DataHead&) const = default;
};

// The extension flit. RDMA data (write, read response, immediate, event): `address` is the
// destination base of the whole transfer, `key` the memory key there, `offset` where this
// packet's payload goes relative to `address`, `length` the transfer's total bytes, so that the
// target checks the whole transfer against its ATT before it writes any of it. A read request
// names the range to read the same way (its payload says where the response goes). An ack
// carries the transfer's bytes in `length` and, when refused, the error id in `offset`.
struct DataExt {
  uint64_t address = 0;
  uint32_t key = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
  bool operator==(const DataExt&) const = default;
};

// A data packet carries at most 128 bytes, and the NIC cuts a transfer at the 128-byte
// boundaries of the destination address (docs/system.md 1.1), so every packet but the first and the
// last of a transfer is full.
inline constexpr uint64_t kDataPacketBytes = 128;
inline constexpr unsigned kDataHeaderFlits = 2;  // head + extension
inline constexpr unsigned kMaxDataPacketFlits =
    kDataHeaderFlits + (kDataPacketBytes + kFlitPayloadBytes - 1) / kFlitPayloadBytes;

struct DataPacket {
  DataHead head;
  DataExt ext;
  std::array<uint8_t, kDataPacketBytes> payload{};  // first head.bytes are valid
  std::span<const uint8_t> data() const { return {payload.data(), head.bytes}; }
};

// Flits of one data packet carrying `bytes`: head, extension, then 24-byte flit payloads (a
// 120-byte MP takes 2 + 5 flits, a full 128-byte RDMA packet 2 + 6).
constexpr uint64_t data_packet_flits(uint64_t bytes) {
  return kDataHeaderFlits + (bytes + kFlitPayloadBytes - 1) / kFlitPayloadBytes;
}

// Packets of a transfer: one per started 128-byte block of the destination (an empty transfer
// still sends one).
constexpr uint64_t packets_for(uint64_t dest_addr, uint64_t length) {
  if (length == 0) return 1;
  return ((dest_addr + length + kDataPacketBytes - 1) / kDataPacketBytes) -
         dest_addr / kDataPacketBytes;
}

// Bytes of the packet that starts `offset` bytes into a transfer of `length` to `dest_addr`.
constexpr uint64_t packet_bytes_at(uint64_t dest_addr, uint64_t length, uint64_t offset) {
  const uint64_t room = kDataPacketBytes - (dest_addr + offset) % kDataPacketBytes;
  return length - offset < room ? length - offset : room;
}

// An RDMA read request's payload: where the response goes (local address 8, local key 4), the
// event the target writes when it has read everything (notify key 4, address 8, data 16).
inline constexpr uint64_t kReadRequestBytes = 40;

// One data packet of `bytes`.
constexpr Traffic packet_traffic(uint64_t bytes) {
  return {1, bytes, data_packet_flits(bytes)};
}

// A transfer of `length` bytes to `dest_addr`, cut at the destination's 128-byte boundaries.
constexpr Traffic transfer_traffic(uint64_t dest_addr, uint64_t length) {
  if (length == 0) return packet_traffic(0);
  const uint64_t first = packet_bytes_at(dest_addr, length, 0);
  const uint64_t full = (length - first) / kDataPacketBytes;
  const uint64_t last = (length - first) % kDataPacketBytes;
  Traffic t = packet_traffic(first);
  t.packets += full;
  t.bytes += full * kDataPacketBytes;
  t.flits += full * data_packet_flits(kDataPacketBytes);
  if (last) t += packet_traffic(last);
  return t;
}

// The flits of a packet; head.length_flits and head.crc are computed. Rejects out-of-range
// fields naming them.
Result<std::vector<Flit>> encode_data_packet(const DataPacket& p);
// Those refusals alone: a packet that passes encodes.
Status check_data_packet(const DataPacket& p);
// Checks what a receiving NIC checks (docs/system.md 1.1): a head first, a tail last and nowhere
// else, the length the head announces, one VC, the CRC. The error id tells which defect.
Result<DataPacket> decode_data_packet(std::span<const Flit> flits);

// A data packet as it crosses a link: its flits' encodings one after the other (encode_flits).
inline constexpr size_t kMaxDataPacketLinkBytes = size_t{kMaxDataPacketFlits} * kFlitBytes;
// The link bytes of a packet, written straight from its fields: the same bytes as encode_flits of
// encode_data_packet, and the same refusals, without the flits in between (the live engine's
// data path encodes every packet it sends). Returns the bytes written; E1706 `out` is shorter.
Result<size_t> encode_data_packet_bytes(const DataPacket& p, std::span<uint8_t> out);
// Link bytes of a well-formed packet, decoded in one pass: true, with *out what decode_flit of
// every flit and then decode_data_packet give. False for anything else (a flit or a packet those
// refuse, or a length that is not 2-8 whole flits), with *out unspecified: call them to learn
// the defect. The receiving side's fast path; the full decoders remain the one statement of
// every refusal.
bool decode_clean_data_packet(std::span<const uint8_t> bytes, DataPacket* out);

// The dirty-packet kinds of docs/system.md 1.1 (misrouted is the NIC's check: wrong dest_node).
enum class DataDefect : uint8_t {
  kNone,
  kMissingHead,
  kMissingTail,
  kTooLong,
  kMisrouted,
  kDataError,
  kMalformed,
};
const char* data_defect_name(DataDefect d);
// The defect an error of decode_data_packet stands for.
DataDefect data_defect_of(const Error& e);

// The head flit alone (the NRC reads only this to route).
Result<Flit> encode_data_head(const DataHead& h);
Result<DataHead> decode_data_head(const Flit& f);
// The head flit from its link bytes (the first wire::kFlitBytes of `flit_bytes`): what
// decode_flit then decode_data_head give, or nothing where either refuses (an NRC routing a
// packet needs the head alone, and no reason: a head that does not decode is not routed).
std::optional<DataHead> decode_data_head_bytes(std::span<const uint8_t> flit_bytes);
// Rewrites the hop count of an encoded packet, in its head flit or in the flit-encoded bytes of
// the whole packet (shorter buffers are left alone); the CRC stays valid.
void set_data_hops(Flit& head, uint8_t hops);
void set_data_hops(std::span<uint8_t> packet_bytes, uint8_t hops);

}  // namespace galaxy::wire
