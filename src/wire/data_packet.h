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

// The head flit of a data packet (kind Head or HeadTail).
Result<Flit> encode_data_head(const DataHead& h, bool single_flit);
Result<DataHead> decode_data_head(const Flit& f);

}  // namespace galaxy::wire
