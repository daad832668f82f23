// Head of a table-routed data packet (SYSTEM.md 1.1, 1.2): the source writes only the
// destination node id; every NRC looks it up in the route table of the input port.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
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
};
inline constexpr uint8_t kMaxPacketKind = 6;

struct DataHead {
  PacketKind kind = PacketKind::kMp;
  uint8_t vc = 0;  // 0..5 except 3 (management)
  uint16_t dest_node = 0;
  uint16_t src_node = 0;
  uint8_t dest_vp = 0;
  uint8_t src_vp = 0;
  uint16_t length_flits = 1;  // whole packet, head included, 1..64
  bool operator==(const DataHead&) const = default;
};

// A data packet carries at most 128 bytes, and the NIC cuts a transfer at the 128-byte
// boundaries of the destination address (SYSTEM.md 1.1), so every packet but the first and the
// last of a transfer is full.
inline constexpr uint64_t kDataPacketBytes = 128;

// Flits of one data packet carrying `bytes`: the head flit, then the bytes in 24-byte flit
// payloads (a 128-byte MP takes 1 + 6 flits).
constexpr uint64_t data_packet_flits(uint64_t bytes) {
  return 1 + (bytes + kFlitPayloadBytes - 1) / kFlitPayloadBytes;
}

// Packets of a transfer: one per started 128-byte block of the destination (an empty transfer
// still sends one).
constexpr uint64_t packets_for(uint64_t dest_addr, uint64_t length) {
  if (length == 0) return 1;
  return ((dest_addr + length + kDataPacketBytes - 1) / kDataPacketBytes) -
         dest_addr / kDataPacketBytes;
}

// An RDMA read request carries the remote address, the local address, the length and the
// memory key: one flit payload after its head.
inline constexpr uint64_t kReadRequestBytes = kFlitPayloadBytes;

// One data packet of `bytes`.
constexpr Traffic packet_traffic(uint64_t bytes) {
  return {1, bytes, data_packet_flits(bytes)};
}

// A transfer of `length` bytes to `dest_addr`, cut at the destination's 128-byte boundaries.
constexpr Traffic transfer_traffic(uint64_t dest_addr, uint64_t length) {
  if (length == 0) return packet_traffic(0);
  const uint64_t room = kDataPacketBytes - dest_addr % kDataPacketBytes;
  const uint64_t first = length < room ? length : room;
  const uint64_t full = (length - first) / kDataPacketBytes;
  const uint64_t last = (length - first) % kDataPacketBytes;
  Traffic t = packet_traffic(first);
  t.packets += full;
  t.bytes += full * kDataPacketBytes;
  t.flits += full * data_packet_flits(kDataPacketBytes);
  if (last) t += packet_traffic(last);
  return t;
}

// The head flit of a data packet (kind Head or HeadTail).
Result<Flit> encode_data_head(const DataHead& h, bool single_flit);
Result<DataHead> decode_data_head(const Flit& f);

}  // namespace galaxy::wire
