// What travels inside the live engine besides the shared rings (docs/live.md):
//   * egress cells: a process hands the daemon a management descriptor, or traffic whose path
//     leaves the host (an MP, an RDMA descriptor);
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

enum class EgressKind : uint8_t { kMgmt = 1, kMp = 2, kRdma = 3 };

struct EgressMgmt {
  uint32_t nic;
  uint8_t vp;
  uint8_t reserved[3];
  uint8_t descriptor[64];  // wire::encode_mgmt_descriptor
};

struct EgressMp {
  uint32_t src_node;
  uint32_t dest_node;
  uint8_t src_vp;
  uint8_t dest_vp;
  uint8_t kind_flags;
  uint8_t length;
  uint8_t data[120];
};

// An RDMA descriptor the daemon executes (SYSTEM.md 1.1): the daemon's DMA engine reads the
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
  uint8_t imm[128];
};
static_assert(sizeof(EgressRdma) <= 248);

enum class ItemType : uint8_t {
  kMgmt = 1,     // a management packet (100 bytes)
  kMp = 2,       // a mini-packet
  kPut = 3,      // a chunk of RDMA put (or immediate) data
  kGetReq = 4,   // an RDMA get request
  kGetResp = 5,  // a chunk of RDMA get response data
  kResp = 6,     // completion of a put/imm/get at the target: status back to the initiator
  kMpNack = 7,   // an MP refused at the target (VP not open, MPQ owner gone)
};

struct ItemHead {
  uint16_t length;  // whole item, head included
  uint8_t type;
  uint8_t from_port;
  uint32_t from_chip;
};

struct ItemMp {
  uint32_t dest_node;
  uint32_t src_node;
  uint8_t dest_vp;
  uint8_t src_vp;
  uint8_t kind_flags;
  uint8_t length;
  // data follows
};

inline constexpr uint8_t kPutLast = 0x1;
inline constexpr uint8_t kPutEvent = 0x2;
inline constexpr uint8_t kPutImm = 0x4;

struct ItemPut {
  uint64_t op_id;
  uint32_t initiator;  // NIC chip id
  uint32_t dest_node;
  uint64_t remote_mh;
  uint64_t op_base;  // the whole transfer: every chunk is checked against all of it
  uint64_t op_length;
  uint64_t offset;
  uint64_t event_addr;
  uint64_t event_mh;
  uint64_t event[2];
  uint8_t flags;
  uint8_t reserved[7];
  // chunk data follows
};

struct ItemGetReq {
  uint64_t op_id;
  uint32_t initiator;
  uint32_t dest_node;
  uint64_t remote_mh;
  uint64_t remote_addr;
  uint64_t length;
  uint64_t event_addr;  // kPutEvent in flags: written at the target once the data are read
  uint64_t event_mh;
  uint64_t event[2];
  uint8_t flags;
  uint8_t reserved[7];
};

struct ItemGetResp {
  uint64_t op_id;
  uint32_t initiator;
  uint32_t reserved;
  uint64_t offset;
  uint8_t flags;  // kPutLast
  uint8_t reserved2[7];
  // data follows
};

struct ItemResp {
  uint64_t op_id;
  uint32_t initiator;
  uint8_t status;  // glex_ret_t
  uint8_t reserved;
  uint16_t error_id;
  char reason[40];
};

struct ItemMpNack {
  uint32_t sender;  // the NIC that sent the MP
  uint8_t sender_vp;
  uint8_t status;
  uint16_t error_id;
  char reason[40];
};

template <class T>
bool read_struct(std::span<const uint8_t> bytes, size_t offset, T* out) {
  if (bytes.size() < offset + sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

}  // namespace galaxy::live
