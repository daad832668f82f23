// InfiniBand subnet administration (docs/system.md 3; IBA 15.2): the MAD of class 0x03 (version 2),
// whose data holds an RMPP header, the SA header (SM_Key, AttributeOffset, ComponentMask) and
// 200 bytes of records; and the records a subnet's users ask the SA for: ClassPortInfo,
// NodeRecord, PortInfoRecord, PathRecord, LinkRecord, ServiceRecord. Layout in
// docs/protocol.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "wire/ib_mad.h"
#include "wire/ib_smp.h"

namespace galaxy::wire {

inline constexpr uint8_t kSaClassVersion = 2;
// Byte offsets within the whole MAD (IBA 15.2.1.1): RMPP header at 24, SA header at 36.
inline constexpr unsigned kSaHeaderOffset = 36;
inline constexpr unsigned kSaDataOffset = 56;
inline constexpr unsigned kSaDataBytes = kMadBytes - kSaDataOffset;  // 200

enum class SaAttr : uint16_t {
  kClassPortInfo = 0x0001,
  kNotice = 0x0002,
  kInformInfo = 0x0003,
  kNodeRecord = 0x0011,
  kPortInfoRecord = 0x0012,
  kLinkRecord = 0x0020,
  kServiceRecord = 0x0031,
  kPathRecord = 0x0035,
  kInformInfoRecord = 0x00F3,
};

// The class-specific part of a MAD's status (bits 8-15; IBA 15.2.1.2, Table 196).
enum class SaStatus : uint8_t {
  kOk = 0,
  kNoResources = 1,
  kReqInvalid = 2,
  kNoRecords = 3,
  kTooManyRecords = 4,
  kInvalidGid = 5,
  kInsufficientComponents = 6,
  kDenied = 7,
};
inline uint16_t sa_mad_status(SaStatus s) {
  return static_cast<uint16_t>(static_cast<uint16_t>(s) << 8);
}
// The common MAD status codes (bits 2-4, IBA 13.4.7) an SA answers with.
inline constexpr uint16_t kMadStatusBadVersion = 0x0004;
inline constexpr uint16_t kMadStatusBadMethod = 0x0008;
inline constexpr uint16_t kMadStatusBadMethodAttr = 0x000C;
inline constexpr uint16_t kMadStatusBadValue = 0x001C;

// RMPP header (IBA 13.6.2): what a GetTable answer of one MAD says of itself.
inline constexpr uint8_t kRmppVersion = 1;
inline constexpr uint8_t kRmppTypeData = 1;
inline constexpr uint8_t kRmppFlagActive = 1, kRmppFlagFirst = 2, kRmppFlagLast = 4;
struct Rmpp {
  uint8_t version = 0;
  uint8_t type = 0;
  uint8_t resp_time = 0;  // 5 bits
  uint8_t flags = 0;      // 3 bits
  uint8_t status = 0;
  uint32_t segment = 0;
  uint32_t payload_length = 0;
  bool operator==(const Rmpp&) const = default;
};

struct SaHeader {
  Rmpp rmpp;
  uint64_t sm_key = 0;
  uint16_t attribute_offset = 0;  // a record's size in 8-byte words
  uint64_t component_mask = 0;
  bool operator==(const SaHeader&) const = default;
};
SaHeader decode_sa_header(const Mad& m);
void encode_sa_header(Mad& m, const SaHeader& h);
// The 200 record bytes of an SA MAD.
std::span<uint8_t, kSaDataBytes> sa_data(Mad& m);
std::span<const uint8_t, kSaDataBytes> sa_data(const Mad& m);

// A 128-bit GID: subnet prefix and interface id (a port GUID).
struct Gid {
  uint64_t prefix = 0;
  uint64_t guid = 0;
  bool operator==(const Gid&) const = default;
};
std::string gid_text(const Gid& g);  // "fe80::2:c902:40:1" style, as saquery prints it

// PathRecord (IBA 15.2.5.16), 64 bytes.
inline constexpr unsigned kPathRecordBytes = 64;
struct PathRecord {
  uint64_t service_id = 0;
  Gid dgid, sgid;
  uint16_t dlid = 0, slid = 0;
  bool raw_traffic = false;
  uint32_t flow_label = 0;  // 20 bits
  uint8_t hop_limit = 0;
  uint8_t tclass = 0;
  bool reversible = false;
  uint8_t num_path = 0;  // 7 bits
  uint16_t pkey = 0;
  uint16_t qos_class = 0;  // 12 bits
  uint8_t sl = 0;          // 4 bits
  uint8_t mtu_selector = 0, mtu = 0;
  uint8_t rate_selector = 0, rate = 0;
  uint8_t pkt_life_selector = 0, pkt_life = 0;
  uint8_t preference = 0;
  bool operator==(const PathRecord&) const = default;
};
void encode_path_record(const PathRecord& r, std::span<uint8_t> out);  // out: >= 64 bytes
PathRecord decode_path_record(std::span<const uint8_t> in);            // in: >= 64 bytes
// PathRecord ComponentMask bits (IBA 15.2.5.16, Table 210).
namespace pr_mask {
inline constexpr uint64_t kDgid = 1ull << 2, kSgid = 1ull << 3, kDlid = 1ull << 4,
                          kSlid = 1ull << 5, kPkey = 1ull << 13, kSl = 1ull << 15,
                          kMtuSelector = 1ull << 16, kMtu = 1ull << 17, kRateSelector = 1ull << 18,
                          kRate = 1ull << 19, kNumPath = 1ull << 12;
}

// NodeRecord (IBA 15.2.5.2): a node's NodeInfo and NodeDescription by one of its LIDs, 108
// bytes (AttributeOffset 14: 112).
inline constexpr unsigned kNodeRecordBytes = 108;
struct NodeRecord {
  uint16_t lid = 0;
  NodeInfo info;
  std::array<uint8_t, 64> description{};
  bool operator==(const NodeRecord&) const = default;
};
void encode_node_record(const NodeRecord& r, std::span<uint8_t> out);
NodeRecord decode_node_record(std::span<const uint8_t> in);
namespace nr_mask {
inline constexpr uint64_t kLid = 1ull << 0, kNodeType = 1ull << 4, kNodeGuid = 1ull << 7,
                          kPortGuid = 1ull << 8;
}

// PortInfoRecord (IBA 15.2.5.3): a port's PortInfo by its node's LID and port number, 72 bytes.
inline constexpr unsigned kPortInfoRecordBytes = 72;
struct PortInfoRecord {
  uint16_t lid = 0;
  uint8_t port = 0;
  uint8_t options = 0;
  PortInfo info;
  bool operator==(const PortInfoRecord&) const = default;
};
void encode_port_info_record(const PortInfoRecord& r, std::span<uint8_t> out);
PortInfoRecord decode_port_info_record(std::span<const uint8_t> in);
namespace pir_mask {
inline constexpr uint64_t kLid = 1ull << 0, kPort = 1ull << 1;
inline constexpr uint64_t kCapabilityMask = 1ull << 7;  // PortInfo's
}  // namespace pir_mask

// ClassPortInfo (IBA 13.4.8.1), 72 bytes: what the SA says of itself (no redirection, its trap
// destination).
inline constexpr unsigned kClassPortInfoBytes = 72;
struct ClassPortInfo {
  uint8_t base_version = 1;
  uint8_t class_version = 0;
  uint16_t capability_mask = 0;
  uint32_t capability_mask2 = 0;  // 27 bits
  uint8_t resp_time_value = 0;    // 5 bits
  uint16_t trap_lid = 0;
  uint16_t trap_pkey = 0;
  uint8_t trap_hop_limit = 0;
  uint32_t trap_qp = 0;  // 24 bits
  uint32_t trap_qkey = 0;
  bool operator==(const ClassPortInfo&) const = default;
};
void encode_class_port_info(const ClassPortInfo& c, std::span<uint8_t> out);
ClassPortInfo decode_class_port_info(std::span<const uint8_t> in);

// Notice (IBA 13.4.8.2), 80 bytes: what a Trap carries to the SM (its first 64 bytes in an SMP)
// and a Report carries to a subscriber.
inline constexpr unsigned kNoticeBytes = 80;
struct Notice {
  bool is_generic = true;
  uint8_t type = 0;          // 7 bits: 0 fatal, 1 urgent, 2 security, 3 SM, 4 informational
  uint32_t producer = 0;     // 24 bits: ProducerType (generic: 1 CA, 2 switch, 3 router, 4 SM)
  uint16_t trap_number = 0;  // generic: 128 port state change, 144 capability change ...
  uint16_t issuer_lid = 0;
  bool toggle = false;
  uint16_t count = 0;  // 15 bits
  std::array<uint8_t, 54> details{};
  Gid issuer_gid;
  bool operator==(const Notice&) const = default;
};
void encode_notice(const Notice& n, std::span<uint8_t> out);  // out: >= 80 bytes
// `in` of 64 bytes (an SMP's data) leaves IssuerGID zero.
Notice decode_notice(std::span<const uint8_t> in);

// InformInfo (IBA 13.4.8.3), 36 bytes: a subscription to the SM's traps, sent to the SA as a Set.
inline constexpr unsigned kInformInfoBytes = 36;
inline constexpr uint16_t kInformAllTraps = 0xFFFF;  // TrapNumber and Type: any
inline constexpr uint32_t kInformAllProducers = 0xFFFFFF;
struct InformInfo {
  Gid gid;                      // the port whose traps are wanted (zero: by LID range)
  uint16_t lid_begin = 0xFFFF;  // 0xFFFF: every port
  uint16_t lid_end = 0;
  bool is_generic = true;
  bool subscribe = true;
  uint16_t type = kInformAllTraps;
  uint16_t trap_number = kInformAllTraps;
  uint32_t qpn = 1;  // 24 bits: where the Reports go
  uint8_t resp_time_value = 0;
  uint32_t producer = kInformAllProducers;
  bool operator==(const InformInfo&) const = default;
};
void encode_inform_info(const InformInfo& i, std::span<uint8_t> out);
InformInfo decode_inform_info(std::span<const uint8_t> in);

// InformInfoRecord (IBA 15.2.5.12), 64 bytes: a subscription as the SA lists them.
inline constexpr unsigned kInformInfoRecordBytes = 64;
struct InformInfoRecord {
  Gid subscriber;
  uint16_t enumeration = 0;
  InformInfo info;
  bool operator==(const InformInfoRecord&) const = default;
};
void encode_inform_info_record(const InformInfoRecord& r, std::span<uint8_t> out);
InformInfoRecord decode_inform_info_record(std::span<const uint8_t> in);

// LinkRecord (IBA 15.2.5.13), 6 bytes (AttributeOffset 1: 8): one direction of a link, from a
// port to its peer, each end named by its node's LID (a switch's port 0's) and port number.
inline constexpr unsigned kLinkRecordBytes = 6;
struct LinkRecord {
  uint16_t from_lid = 0;
  uint8_t from_port = 0;
  uint8_t to_port = 0;
  uint16_t to_lid = 0;
  bool operator==(const LinkRecord&) const = default;
};
void encode_link_record(const LinkRecord& r, std::span<uint8_t> out);
LinkRecord decode_link_record(std::span<const uint8_t> in);
namespace lr_mask {
inline constexpr uint64_t kFromLid = 1ull << 0, kFromPort = 1ull << 1, kToPort = 1ull << 2,
                          kToLid = 1ull << 3;
}

// ServiceRecord (IBA 15.2.5.14), 176 bytes: a service a port registers with the SA (Set),
// others find (Get, GetTable) and its owner removes (Delete), or its lease ends.
inline constexpr unsigned kServiceRecordBytes = 176;
inline constexpr uint32_t kServiceLeaseInfinite = 0xFFFFFFFFu;
struct ServiceRecord {
  uint64_t id = 0;
  Gid gid;
  uint16_t pkey = 0;
  uint32_t lease = 0;  // seconds; kServiceLeaseInfinite: never ends
  std::array<uint8_t, 16> key{};
  std::array<uint8_t, 64> name{};  // UTF-8, NUL-padded
  std::array<uint8_t, 16> data8{};
  std::array<uint16_t, 8> data16{};
  std::array<uint32_t, 4> data32{};
  std::array<uint64_t, 2> data64{};
  bool operator==(const ServiceRecord&) const = default;
};
void encode_service_record(const ServiceRecord& r, std::span<uint8_t> out);
ServiceRecord decode_service_record(std::span<const uint8_t> in);
// ServiceRecord ComponentMask bits (IBA 15.2.5.14, Table 199): the record's id is ServiceID,
// ServiceGID and ServiceP_Key; ServiceData8[i] is bit 7 + i, ServiceData16[i] bit 23 + i,
// ServiceData32[i] bit 31 + i, ServiceData64[i] bit 35 + i.
namespace sr_mask {
inline constexpr uint64_t kId = 1ull << 0, kGid = 1ull << 1, kPkey = 1ull << 2, kLease = 1ull << 4,
                          kKey = 1ull << 5, kName = 1ull << 6;
inline constexpr unsigned kData8Bit = 7, kData16Bit = 23, kData32Bit = 31, kData64Bit = 35;
}  // namespace sr_mask
// Whether `have` matches `want` in every component `mask` names.
bool service_record_matches(const ServiceRecord& have, const ServiceRecord& want, uint64_t mask);

// The IBA rate code (PathRecord Rate, IBA Table 211) of a link of `width` (PortInfo
// LinkWidthActive) and `speed` (LinkSpeedActive); 0 when either is not a known encoding.
uint8_t ib_rate_code(uint8_t width, uint8_t speed);
// The rate code's signalling rate in units of 0.5 Gb/s (2.5 Gb/s = 5), to compare rates; 0 for
// an unknown code.
unsigned ib_rate_half_gbps(uint8_t code);

}  // namespace galaxy::wire
