// Management packets and management descriptors (docs/system.md 2.2-2.4; bit layouts in
// docs/protocol.md).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "wire/chip_id.h"
#include "wire/flit.h"
#include "wire/source_route.h"

namespace galaxy::wire {

enum class ChipType : uint8_t { kNic = 0, kNrc = 1 };
std::string_view chip_type_name(ChipType t);

// The 11 NMP types of docs/system.md 2.2 and SMInfo. Bit 4 marks EEPROM access; 0x20 is the fault
// report.
enum class NmpType : uint8_t {
  kRegReadRequest = 0x01,
  kRegReadResponse = 0x02,
  kRegWriteRequest = 0x03,
  kRegWriteResponse = 0x04,
  kRegError = 0x05,
  kEepromReadRequest = 0x11,
  kEepromReadResponse = 0x12,
  kEepromWriteRequest = 0x13,
  kEepromWriteResponse = 0x14,
  kEepromError = 0x15,
  kFaultReport = 0x20,
  // Beyond the paper: SMInfo between management servers (IBA 14.4.1's SMInfo, carried by the
  // servers' NICs; docs/protocol.md "SMInfo packets"). They travel host to host like responses,
  // by their backward route, into the destination NIC's `dest_vp`; their forward route is the
  // way back to the sender.
  kSmInfoGet = 0x30,
  kSmInfoSet = 0x31,
  kSmInfoResponse = 0x32,
};
inline constexpr unsigned kNmpTypeCount = 14;
bool is_valid_nmp_type(uint8_t raw);
bool is_request(NmpType t);  // register/EEPROM read/write requests
bool is_eeprom(NmpType t);
bool is_sm_info(NmpType t);  // SMInfo Get, Set and response
// What a host may post in a management descriptor: a request for an NMA, or an SMInfo packet
// for another server.
bool host_may_send(NmpType t);
std::string_view nmp_type_name(NmpType t);

// Why an NMA refused a request (carried in the error responses).
enum class NmpError : uint8_t {
  kNone = 0,
  kAddressOutOfRange = 1,  // register or EEPROM address beyond the chip's space
  kUnknownType = 2,        // NMPType is not a request type this NMA serves
  kBadLength = 3,          // register count not 1-2, or EEPROM count not 1-6
  kWrongKey = 4,           // M_Key does not match the chip's M_KEY register
  kReadOnly = 5,           // write to a read-only register
  kBadValue = 6,           // value outside what the register accepts
};
std::string_view nmp_error_name(NmpError e);

inline constexpr uint8_t kMaxRegistersPerPacket = 2;
inline constexpr uint8_t kMaxEepromBytesPerPacket = 6;

// NMPData, interpreted by the NMA according to NMPType:
//  * register packets: `count` (1-2) registers at `address[i]` (15 bits); values in `value[i]`
//    (write requests and read responses);
//  * EEPROM packets: `count` (1-6) bytes at `address[i]` (16 bits); data in `bytes[i]`
//    (write requests and read responses);
//  * error responses: `error` and the offending `error_address`;
//  * fault reports: `fault_code`, `fault_port`, `fault_severity`, `fault_detail`;
//  * SMInfo packets: `sm` (the packet's m_key field carries the SM_Key).
// An SMInfo packet's fields (IBA 14.4.1 SMInfo, and the sender's successor, beyond IBA).
struct NmpSmInfo {
  uint64_t guid = 0;       // the sending server's GUID
  uint32_t act_count = 0;  // rises while the sender works (a master's sweeps and answers)
  uint8_t priority = 0;    // 0-15
  uint8_t state = 0;       // SmState: 0 not active, 1 discovering, 2 standby, 3 master (0-3)
  uint8_t control = 0;     // Set: SmControl (1 handover ... 5 discover); 0 in Get and response
  // A master's answer names the standby that takes over when it dies (kNoSuccessorVp: none).
  ChipId successor_chip = 0;
  uint8_t successor_vp = 0xFF;
  bool operator==(const NmpSmInfo&) const = default;
};
inline constexpr uint8_t kNoSuccessorVp = 0xFF;
inline constexpr uint8_t kMaxSmControl = 5;

struct NmpData {
  uint8_t count = 0;
  std::array<uint16_t, kMaxEepromBytesPerPacket> address{};
  std::array<uint64_t, kMaxRegistersPerPacket> value{};
  std::array<uint8_t, kMaxEepromBytesPerPacket> bytes{};
  NmpError error = NmpError::kNone;
  uint16_t error_address = 0;
  uint8_t fault_code = 0;
  uint8_t fault_port = 0;
  uint8_t fault_severity = 0;
  uint32_t fault_detail = 0;
  NmpSmInfo sm;
  bool operator==(const NmpData&) const = default;
};

// The fields of `d` that a packet of type `t` carries (the NMPData block of docs/protocol.md);
// the others are zero. Encoders write only these fields, so a decoded packet equals
// carried_nmp_data() of what was encoded.
NmpData carried_nmp_data(NmpType t, const NmpData& d);

// A decoded 4-flit management packet. `hop_count` lives in the head flit and is not covered
// by the CRC, so an NRC forwards by rewriting it alone (set_mgmt_hop_count). A packet whose
// routes name a port above 31 is encoded as the wide variant (its routes' high bits in the
// tail flit, docs/protocol.md); the encoders choose it, so there is one encoding per packet.
struct MgmtPacket {
  // head flit
  uint8_t vc = kMgmtVc;
  uint8_t length_flits = 4;
  uint8_t hop_count = 0;  // hops already taken on the active route
  // key fields, covered by the tail CRC
  ChipId dest_id = kUnconfiguredId;
  ChipType dest_type = ChipType::kNrc;
  ChipId src_id = 0;
  ChipType src_type = ChipType::kNic;
  uint8_t dest_vp = 0;  // VP that receives the response (6 bits)
  uint8_t src_vp = 0;   // VP that sent the request (6 bits)
  bool lint = false;
  bool rint = false;
  uint16_t transaction_id = 0;
  SourceRoute forward_route;   // server -> chip (FRoutingField)
  SourceRoute backward_route;  // chip -> server (BRoutingField)
  NmpType nmp_type = NmpType::kRegReadRequest;
  uint64_t m_key = 0;
  NmpData data;

  bool operator==(const MgmtPacket&) const = default;
  // Requests follow the forward route; responses and fault reports the backward route.
  const SourceRoute& active_route() const {
    return is_request(nmp_type) ? forward_route : backward_route;
  }
};

inline constexpr unsigned kMgmtPacketFlits = 4;
inline constexpr unsigned kMgmtPacketBytes = kMgmtPacketFlits * kFlitBytes;  // 100
using MgmtPacketBytes = std::array<uint8_t, kMgmtPacketBytes>;
inline constexpr Traffic kMgmtPacketTraffic{1, kMgmtPacketBytes, kMgmtPacketFlits};

// Encodes into 4 flits (head, body, body, tail) with the CRC in the tail flit. Error if a
// field is out of its range (names the field).
Result<MgmtPacketBytes> encode_mgmt_packet(const MgmtPacket& p);
// Decodes and validates: flit kinds, VC 3, length 4, CRC, NMPType, counts, routes.
Result<MgmtPacket> decode_mgmt_packet(std::span<const uint8_t> bytes);

// What a switch needs to forward without a full decode (docs/system.md 2.4).
struct MgmtHead {
  uint8_t hop_count = 0;
  NmpType nmp_type = NmpType::kRegReadRequest;
  uint8_t route_hop_num = 0;  // hop_num of the active route
  uint8_t next_port = 0;      // active route's hop[hop_count] if hop_count < route_hop_num
};
// Checks framing (size, flit kinds, VC, length), NMPType and the active route's hop_num and
// reads only those fields; the CRC and the rest are checked by decode_mgmt_packet at the
// destination.
Result<MgmtHead> peek_mgmt_head(std::span<const uint8_t> bytes);
// Rewrites the hop count (5 bits; higher bits are dropped) without touching the CRC. Buffers
// shorter than a packet are left alone.
void set_mgmt_hop_count(std::span<uint8_t> bytes, uint8_t hop_count);

// The 512-bit management descriptor submitted to an SDQ (docs/system.md 2.2); 1024 bits, the wide
// variant, when a route names a port above 31.
struct MgmtDescriptor {
  ChipId dest_id = kUnconfiguredId;
  uint8_t dest_vp = 0;
  uint8_t src_vp = 0;
  ChipType dest_type = ChipType::kNrc;
  uint8_t rt_type = 1;  // routing type: 0 table routing, 1 source routing (management)
  bool fen = false;     // execute only after the previous descriptor of the VP completed
  bool err = false;     // set by the NIC when it finds the descriptor malformed
  uint8_t type = 0;     // transport packet kind (2 bits); management = MP kind
  uint8_t sm = 0;       // S/M (1 bit)
  uint8_t inst = 0;     // Inst (3 bits)
  bool lint = false;
  bool rint = false;
  bool head = true;  // descriptor marker; must be 1
  uint16_t transaction_id = 0;
  SourceRoute forward_route;
  SourceRoute backward_route;
  NmpType nmp_type = NmpType::kRegReadRequest;
  uint64_t m_key = 0;
  NmpData data;

  bool operator==(const MgmtDescriptor&) const = default;
};

inline constexpr unsigned kMgmtDescriptorBytes = 64;
inline constexpr unsigned kMgmtWideDescriptorBytes = 128;
using MgmtDescriptorBytes = std::vector<uint8_t>;  // 64 or 128 bytes

Result<MgmtDescriptorBytes> encode_mgmt_descriptor(const MgmtDescriptor& d);
Result<MgmtDescriptor> decode_mgmt_descriptor(std::span<const uint8_t> bytes);

}  // namespace galaxy::wire
