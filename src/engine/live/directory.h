// The live fabric's VP directory (docs/live.md "The VP directory"): a process asks the fabric
// daemon of a host where the owner of one of that host's VPs receives datagrams of its own,
// the address a process-to-process path between hosts sends to. The daemon answers from its
// host's segment (VpSlot::direct_port), to the address the question came from. Fixed-size
// datagrams, big-endian, a CRC-16 (wire/crc16.h) over every byte before it:
//
//   query  (24 bytes): magic "GVD1", version 1, type 1, vp (u8), 1 reserved (0), node (u32),
//                      tag (u64), 2 reserved (0), CRC (u16)
//   answer (32 bytes): magic "GVD1", version 1, type 2, vp (u8), status (u8), node (u32),
//                      tag (u64), generation (u32), port (u16), 4 reserved (0), CRC (u16)
//
// The tag is the asker's, echoed so it can match answers to questions and ignore stale ones.
// The answer's address is the answering daemon's host's IP (the fabric spec's) and `port`; its
// `generation` is the VP's (it changes whenever the VP is opened again), so a sender can tell
// a new owner from the one it knew. Decoding checks every field and refuses a datagram whole.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "base/status.h"

namespace galaxy::live {

inline constexpr size_t kDirectoryQueryBytes = 24;
inline constexpr size_t kDirectoryAnswerBytes = 32;
inline constexpr uint32_t kDirectoryMagic = 0x47564431;  // "GVD1"
inline constexpr uint8_t kDirectoryVersion = 1;

enum class DirectoryType : uint8_t { kQuery = 1, kAnswer = 2 };

enum class DirectoryStatus : uint8_t {
  kOpen = 0,     // the VP is open; `port` is where its owner receives (0: through the daemon only)
  kNotOpen = 1,  // no process owns the VP
  kNotHere = 2,  // the node is not a NIC of the answering daemon's host
};
inline constexpr uint8_t kDirectoryStatusCount = 3;
std::string_view directory_status_name(DirectoryStatus s);

struct DirectoryQuery {
  uint32_t node = 0;
  uint8_t vp = 0;
  uint64_t tag = 0;
  bool operator==(const DirectoryQuery&) const = default;
};

struct DirectoryAnswer {
  uint32_t node = 0;
  uint8_t vp = 0;
  DirectoryStatus status = DirectoryStatus::kNotOpen;
  uint64_t tag = 0;
  uint32_t generation = 0;
  uint16_t port = 0;
  bool operator==(const DirectoryAnswer&) const = default;
};

std::array<uint8_t, kDirectoryQueryBytes> encode_directory_query(const DirectoryQuery& q);
std::array<uint8_t, kDirectoryAnswerBytes> encode_directory_answer(const DirectoryAnswer& a);

// Whether a datagram begins with the directory's magic (the daemon's socket also carries link
// frames; those begin otherwise).
bool is_directory_datagram(std::span<const uint8_t> bytes);

// E4870 wrong size for its type, E4871 magic, E4872 version, E4873 type, E4874 CRC, E4875
// reserved bits set, E4876 status out of range.
Result<DirectoryQuery> decode_directory_query(std::span<const uint8_t> bytes);
Result<DirectoryAnswer> decode_directory_answer(std::span<const uint8_t> bytes);

// Asks the daemon at `ip` (IPv4, network byte order) and `port` about `node`'s `vp`: the
// question goes again every `timeout_ms` / 4 until an answer with its tag comes (others are
// ignored) or `timeout_ms` passes (E4879 timeout; E4880 no socket, E4881 the question could not be
// sent).
Result<DirectoryAnswer> ask_directory(uint32_t ip, uint16_t port, uint32_t node, uint8_t vp,
                                      int timeout_ms);

}  // namespace galaxy::live
