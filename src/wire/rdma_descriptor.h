// Connectionless RDMA descriptor (docs/system.md 1.1; layout in docs/protocol.md): a fixed 64-byte
// descriptor, followed for an immediate RDMA by its 1-128 data bytes padded to 64-byte blocks,
// so an immediate descriptor takes 64 + ceil(n/64)*64 bytes.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "wire/chip_id.h"

namespace galaxy::wire {

inline constexpr unsigned kRdmaDescriptorBytes = 64;
inline constexpr unsigned kMaxImmediateBytes = 128;
inline constexpr unsigned kNotifyDataBytes = 16;

enum class RdmaOp : uint8_t {
  kWrite = 0,      // put: local_address -> remote_address
  kRead = 1,       // get: remote_address -> local_address
  kImmediate = 2,  // put of the descriptor's inline data to remote_address
};
inline constexpr uint8_t kMaxRdmaOp = 2;

// How the remote side learns of completion. notify_address/notify_key/notify_data are carried
// only where they are used: kEvent writes notify_data at notify_address of the remote node;
// kTrailingImmediate sends it there as an immediate RDMA after the data; kTrailingMp sends it
// as the payload of an MP to remote_vp. Local completion is the separate local_cq bit.
enum class Completion : uint8_t {
  kNone = 0,
  kEvent = 1,
  kTrailingMp = 2,
  kTrailingImmediate = 3,
};
inline constexpr uint8_t kMaxCompletion = 3;

struct RdmaDescriptor {
  RdmaOp op = RdmaOp::kWrite;
  bool fen = false;  // execute only after the previous descriptor of the VP completed
  Completion completion = Completion::kNone;
  bool local_cq = false;  // a success completes into the local CQ too (errors always do)
  uint8_t remote_vp = 0;  // 0-63
  ChipId remote_node = 0;
  uint32_t length = 0;         // bytes; 1-128 for an immediate RDMA
  uint64_t local_address = 0;  // not carried by an immediate RDMA (must be 0)
  uint64_t remote_address = 0;
  uint32_t remote_key = 0;      // key of the remote registered region (ATT)
  uint32_t local_key = 0;       // key of the local region (not carried by an immediate RDMA)
  uint32_t notify_key = 0;      // key of the region holding notify_address
  uint16_t cp_count = 0;        // CP-triggered: start when the VP's CP counter reaches it; 0 = now
  uint64_t notify_address = 0;  // kEvent, kTrailingImmediate
  std::array<uint8_t, kNotifyDataBytes> notify_data{};  // kEvent, kTrailingMp, kTrailingImmediate
  std::array<uint8_t, kMaxImmediateBytes> immediate_data{};  // first `length` bytes, kImmediate
  bool operator==(const RdmaDescriptor&) const = default;
};

// 64, or 64 + ceil(length/64)*64 for an immediate RDMA.
size_t rdma_descriptor_size(const RdmaDescriptor& d);
// The total size announced by the first 64 bytes, so that a NIC knows how much to fetch.
Result<size_t> peek_rdma_descriptor_size(std::span<const uint8_t> bytes);

// The cp_count of a descriptor's first 64 bytes, and clearing it (a NIC that took the trigger
// starts the descriptor as an untriggered one). 0 when `bytes` is shorter than 64.
uint16_t peek_rdma_cp_count(std::span<const uint8_t> bytes);
void clear_rdma_cp_count(std::span<uint8_t> bytes);

// Fields a descriptor does not carry (see above) are not encoded and decode as zero.
Result<std::vector<uint8_t>> encode_rdma_descriptor(const RdmaDescriptor& d);
// `bytes` must be exactly rdma_descriptor_size() long.
Result<RdmaDescriptor> decode_rdma_descriptor(std::span<const uint8_t> bytes);

}  // namespace galaxy::wire
