// InfiniBand subnet management packets (docs/system.md 3; IBA 14.2.1): a MAD of class 0x01
// (LID-routed) or 0x81 (directed-route), whose 232 data bytes hold the M_Key, the directed-route
// LIDs, 64 bytes of attribute data and, for directed routes, the initial and return paths. And
// the attributes a subnet manager reads and writes (IBA 14.2.5): NodeDescription, NodeInfo,
// SwitchInfo, PortInfo, LinearForwardingTable, SMInfo. Layout in docs/protocol.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "wire/ib_mad.h"

namespace galaxy::wire {

inline constexpr unsigned kSmpDataBytes = 64;
// A directed route holds at most 63 hops (path bytes 1..63; byte 0 is unused).
inline constexpr unsigned kSmpMaxHops = 63;
// The permissive LID: "the end of a directed route" (IBA 14.2.2).
inline constexpr uint16_t kPermissiveLid = 0xFFFF;
// Unicast LIDs are 1..0xBFFF (IBA 4.1.3).
inline constexpr uint16_t kMaxUnicastLid = 0xBFFF;
// One LinearForwardingTable block: the output ports of 64 consecutive LIDs.
inline constexpr unsigned kLftBlockLids = 64;
// An LFT entry that forwards nowhere.
inline constexpr uint8_t kLftNoPort = 0xFF;

enum class SmpAttr : uint16_t {
  kNotice = 0x0002,  // what a Trap carries (IBA 14.2.5.1)
  kNodeDescription = 0x0010,
  kNodeInfo = 0x0011,
  kSwitchInfo = 0x0012,
  kPortInfo = 0x0015,
  kLinearForwardingTable = 0x0019,
  kSmInfo = 0x0020,
};
const char* smp_attr_name(uint16_t attribute_id);  // "NodeInfo", or "0x1234"

using SmpData = std::array<uint8_t, kSmpDataBytes>;
using SmpPath = std::array<uint8_t, 64>;  // [0] unused; [1..hop_count] the ports

struct Smp {
  bool directed = true;  // class 0x81, else 0x01
  MadMethod method = MadMethod::kGet;
  uint16_t status = 0;     // 15 bits on a directed route (bit 15 is the D bit)
  bool returning = false;  // the D bit: set on a directed-route response
  uint8_t hop_pointer = 0;
  uint8_t hop_count = 0;
  uint64_t transaction_id = 0;
  uint16_t attribute_id = 0;
  uint32_t attribute_modifier = 0;
  uint64_t m_key = 0;
  uint16_t dr_slid = kPermissiveLid;
  uint16_t dr_dlid = kPermissiveLid;
  SmpData data{};
  SmpPath initial_path{};
  SmpPath return_path{};
  bool operator==(const Smp&) const = default;

  // A directed-route request along `ports` (the output port at the source, then at each hop).
  static Result<Smp> directed_request(MadMethod method, SmpAttr attr, uint32_t modifier,
                                      std::span<const uint8_t> ports);
};

Result<MadBytes> encode_smp(const Smp& s);
// Rejects a class other than 0x01/0x81, a hop count above 63 and what decode_mad rejects.
Result<Smp> decode_smp(std::span<const uint8_t> bytes);

// SMP status (IBA 13.4.7): bits 2-4 hold the error code.
std::string smp_status_text(uint16_t status);

// NodeInfo (IBA 14.2.5.3).
enum class IbNodeType : uint8_t { kCa = 1, kSwitch = 2, kRouter = 3 };
struct NodeInfo {
  uint8_t base_version = 1;
  uint8_t class_version = 1;
  uint8_t node_type = 0;
  uint8_t num_ports = 0;
  uint64_t system_image_guid = 0;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  uint16_t partition_cap = 0;
  uint16_t device_id = 0;
  uint32_t revision = 0;
  uint8_t local_port_num = 0;
  uint32_t vendor_id = 0;  // 24 bits
  bool operator==(const NodeInfo&) const = default;
};
SmpData encode_node_info(const NodeInfo& n);
Result<NodeInfo> decode_node_info(const SmpData& d);  // rejects node type 0 or > 4

// NodeDescription (IBA 14.2.5.2): up to 64 bytes, NUL-padded; bytes kept as they are.
std::string decode_node_description(const SmpData& d);

// Port states (IBA 14.2.5.6); 0 in a Set means "no change".
enum class IbPortState : uint8_t { kNoChange = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };
const char* ib_port_state_name(uint8_t state);
inline constexpr uint8_t kPhysLinkUp = 5;

// PortInfo (IBA 14.2.5.6), kept as its 64 bytes so that a Set writes back every field the SM
// does not change; accessors for the fields a subnet manager reads and writes.
struct PortInfo {
  SmpData raw{};
  bool operator==(const PortInfo&) const = default;
  uint64_t m_key() const;
  void set_m_key(uint64_t key);
  // M_Key protection (IBA 14.2.4.1): ProtectBits 0-3, the lease in seconds (0: none), and the
  // SMPs the port refused for a wrong key.
  uint8_t m_key_protect_bits() const;
  void set_m_key_protect_bits(uint8_t bits);
  uint16_t m_key_lease_period() const;
  void set_m_key_lease_period(uint16_t s);
  uint16_t m_key_violations() const;
  void set_m_key_violations(uint16_t n);
  uint64_t gid_prefix() const;
  uint16_t lid() const;
  void set_lid(uint16_t lid);
  uint16_t master_sm_lid() const;
  void set_master_sm_lid(uint16_t lid);
  uint32_t capability_mask() const;
  uint8_t local_port_num() const;
  uint8_t link_width_active() const;
  uint8_t port_state() const;
  void set_port_state(IbPortState s);
  uint8_t phys_state() const;
  void set_phys_state(uint8_t s);  // 0: no change
  void set_link_down_default(uint8_t s);
  uint8_t lmc() const;
  void set_lmc(uint8_t lmc);
  uint8_t link_speed_active() const;
  uint8_t neighbor_mtu() const;
  uint8_t mtu_cap() const;
  uint8_t vl_cap() const;
  uint8_t operational_vls() const;
  // A Set made from a Get answer: the read-only and "0 = no change" fields made neutral.
  PortInfo for_set() const;
};

// A link's lanes from PortInfo LinkWidthActive (1x, 4x, 8x, 12x, 2x), and a lane's signalling
// rate in units of 0.5 Gbaud from LinkSpeedActive (SDR 5, DDR 10, QDR 20); 0 for another value.
unsigned ib_link_lanes(uint8_t width);
unsigned ib_lane_half_gbaud(uint8_t speed);

// SwitchInfo (IBA 14.2.5.4): the fields an SM uses; kept raw for write-back.
struct SwitchInfo {
  SmpData raw{};
  uint16_t linear_fdb_cap() const;
  uint16_t linear_fdb_top() const;
  void set_linear_fdb_top(uint16_t top);
  bool port_state_change() const;
  // Writing 1 clears PortStateChange (IBA 14.2.5.4).
  void set_port_state_change(bool v);
};

// PortInfo CapabilityMask bits (IBA 14.2.5.6, Table 152).
inline constexpr uint32_t kCapIsSm = 1u << 1;  // a subnet manager runs behind this port

// SMInfo (IBA 14.2.5.13). SmState values (IBA 14.4.1).
enum class SmState : uint8_t { kNotActive = 0, kDiscovering = 1, kStandby = 2, kMaster = 3 };
// What an SMInfo Set asks of the SM it is sent to: its AttributeModifier (IBA 14.4.1).
enum class SmControl : uint32_t {
  kHandover = 1,     // a master hands the subnet to a standby that outranks it
  kAcknowledge = 2,  // the new master confirms, and the old one stands by
  kDisable = 3,
  kStandby = 4,
  kDiscover = 5,
};
// "not active", "discovering", "standby", "master"; "state N" beyond.
std::string sm_state_name(uint8_t state);
struct SmInfo {
  uint64_t guid = 0;
  uint64_t sm_key = 0;
  uint32_t act_count = 0;
  uint8_t priority = 0;  // 4 bits
  uint8_t sm_state = 0;  // 4 bits: 0 not active, 1 discovering, 2 standby, 3 master
  bool operator==(const SmInfo&) const = default;
};
SmpData encode_sm_info(const SmInfo& s);
SmInfo decode_sm_info(const SmpData& d);

}  // namespace galaxy::wire
