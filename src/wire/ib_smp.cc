#include "wire/ib_smp.h"

#include <fmt/format.h>

#include <algorithm>

#include "wire/big_endian.h"

namespace galaxy::wire {
namespace {

// Offsets within the MAD's 232 data bytes (IBA 14.2.1.1/14.2.1.2 count from the MAD's start;
// these are 24 less).
constexpr size_t kMKey = 0;
constexpr size_t kDrSlid = 8;
constexpr size_t kDrDlid = 10;
constexpr size_t kSmpDataAt = 40;
constexpr size_t kInitialPathAt = 104;
constexpr size_t kReturnPathAt = 168;
constexpr uint16_t kDirectionBit = 0x8000;

}  // namespace

const char* smp_attr_name(uint16_t id) {
  switch (static_cast<SmpAttr>(id)) {
    case SmpAttr::kNotice:
      return "Notice";
    case SmpAttr::kNodeDescription:
      return "NodeDescription";
    case SmpAttr::kNodeInfo:
      return "NodeInfo";
    case SmpAttr::kSwitchInfo:
      return "SwitchInfo";
    case SmpAttr::kPortInfo:
      return "PortInfo";
    case SmpAttr::kLinearForwardingTable:
      return "LinearForwardingTable";
    case SmpAttr::kSmInfo:
      return "SMInfo";
  }
  return "other";
}

Result<Smp> Smp::directed_request(MadMethod method, SmpAttr attr, uint32_t modifier,
                                  std::span<const uint8_t> ports) {
  if (ports.size() > kSmpMaxHops) {
    return make_error(
        Code::kOutOfRange, 1800,
        fmt::format("smp: a directed route of {} hops, at most {}", ports.size(), kSmpMaxHops));
  }
  Smp s;
  s.directed = true;
  s.method = method;
  s.attribute_id = static_cast<uint16_t>(attr);
  s.attribute_modifier = modifier;
  s.hop_count = static_cast<uint8_t>(ports.size());
  std::copy(ports.begin(), ports.end(), s.initial_path.begin() + 1);
  return s;
}

Result<MadBytes> encode_smp(const Smp& s) {
  if (s.hop_count > kSmpMaxHops) {
    return make_error(Code::kOutOfRange, 1801,
                      fmt::format("smp: hop_count = {}, at most {}", s.hop_count, kSmpMaxHops));
  }
  if (s.directed && (s.status & kDirectionBit)) {
    return make_error(Code::kOutOfRange, 1802,
                      fmt::format("smp: status = {:#06x} does not fit 15 bits", s.status));
  }
  Mad m;
  m.mgmt_class = s.directed ? MgmtClass::kSubnDirectedRoute : MgmtClass::kSubnLidRouted;
  m.method = s.method;
  m.status = static_cast<uint16_t>(s.status | (s.directed && s.returning ? kDirectionBit : 0));
  m.class_specific = s.directed ? static_cast<uint16_t>(s.hop_pointer << 8 | s.hop_count) : 0;
  m.transaction_id = s.transaction_id;
  m.attribute_id = s.attribute_id;
  m.attribute_modifier = s.attribute_modifier;
  put_be(m.data, kMKey, 8, s.m_key);
  std::copy(s.data.begin(), s.data.end(), m.data.begin() + kSmpDataAt);
  if (s.directed) {
    put_be(m.data, kDrSlid, 2, s.dr_slid);
    put_be(m.data, kDrDlid, 2, s.dr_dlid);
    std::copy(s.initial_path.begin(), s.initial_path.end(), m.data.begin() + kInitialPathAt);
    std::copy(s.return_path.begin(), s.return_path.end(), m.data.begin() + kReturnPathAt);
  }
  return encode_mad(m);
}

Result<Smp> decode_smp(std::span<const uint8_t> bytes) {
  auto m = decode_mad(bytes);
  if (!m) return m.error();
  const bool directed = m->mgmt_class == MgmtClass::kSubnDirectedRoute;
  if (!directed && m->mgmt_class != MgmtClass::kSubnLidRouted) {
    return make_error(Code::kMalformed, 1810,
                      fmt::format("smp: mgmt_class = {:#04x}, expected 0x01 or 0x81",
                                  static_cast<unsigned>(m->mgmt_class)));
  }
  // SMPs are base version 1, class version 1 (IBA 14.2.1); Smp does not carry them.
  if (m->base_version != 1 || m->class_version != 1) {
    return make_error(Code::kMalformed, 1812,
                      fmt::format("smp: base/class version = {}/{}, expected 1/1", m->base_version,
                                  m->class_version));
  }
  Smp s;
  s.directed = directed;
  s.method = m->method;
  s.transaction_id = m->transaction_id;
  s.attribute_id = m->attribute_id;
  s.attribute_modifier = m->attribute_modifier;
  s.m_key = get_be(m->data, kMKey, 8);
  std::copy_n(m->data.begin() + kSmpDataAt, kSmpDataBytes, s.data.begin());
  if (directed) {
    s.status = m->status & ~kDirectionBit;
    s.returning = m->status & kDirectionBit;
    s.hop_pointer = static_cast<uint8_t>(m->class_specific >> 8);
    s.hop_count = static_cast<uint8_t>(m->class_specific);
    if (s.hop_count > kSmpMaxHops) {
      return make_error(Code::kMalformed, 1811,
                        fmt::format("smp: hop_count = {}, at most {}", s.hop_count, kSmpMaxHops));
    }
    s.dr_slid = static_cast<uint16_t>(get_be(m->data, kDrSlid, 2));
    s.dr_dlid = static_cast<uint16_t>(get_be(m->data, kDrDlid, 2));
    std::copy_n(m->data.begin() + kInitialPathAt, s.initial_path.size(), s.initial_path.begin());
    std::copy_n(m->data.begin() + kReturnPathAt, s.return_path.size(), s.return_path.begin());
  } else {
    if (m->class_specific != 0) {
      return make_error(Code::kMalformed, 1813,
                        fmt::format("smp: a LID-routed SMP's class-specific field = {:#06x}, "
                                    "reserved (0)",
                                    m->class_specific));
    }
    s.status = m->status;
    s.returning = false;
  }
  return s;
}

std::string smp_status_text(uint16_t status) {
  switch ((status >> 2) & 0x7) {
    case 0:
      if (status == 0) return "ok";
      if (status & 1) return "busy";
      if (status & 2) return "redirect required";
      return fmt::format("status {:#06x}", status);  // class-specific bits
    case 1:
      return "bad base or class version";
    case 2:
      return "method not supported";
    case 3:
      return "method/attribute combination not supported";
    case 7:
      return "invalid value in the attribute or modifier";
    default:
      return fmt::format("status {:#06x}", status);
  }
}

SmpData encode_node_info(const NodeInfo& n) {
  SmpData d{};
  d[0] = n.base_version;
  d[1] = n.class_version;
  d[2] = n.node_type;
  d[3] = n.num_ports;
  put_be(d, 4, 8, n.system_image_guid);
  put_be(d, 12, 8, n.node_guid);
  put_be(d, 20, 8, n.port_guid);
  put_be(d, 28, 2, n.partition_cap);
  put_be(d, 30, 2, n.device_id);
  put_be(d, 32, 4, n.revision);
  d[36] = n.local_port_num;
  put_be(d, 37, 3, n.vendor_id);
  return d;
}

Result<NodeInfo> decode_node_info(const SmpData& d) {
  NodeInfo n;
  n.base_version = d[0];
  n.class_version = d[1];
  n.node_type = d[2];
  n.num_ports = d[3];
  n.system_image_guid = get_be(d, 4, 8);
  n.node_guid = get_be(d, 12, 8);
  n.port_guid = get_be(d, 20, 8);
  n.partition_cap = static_cast<uint16_t>(get_be(d, 28, 2));
  n.device_id = static_cast<uint16_t>(get_be(d, 30, 2));
  n.revision = static_cast<uint32_t>(get_be(d, 32, 4));
  n.local_port_num = d[36];
  n.vendor_id = static_cast<uint32_t>(get_be(d, 37, 3));
  if (n.node_type == 0 || n.node_type > 4) {
    return make_error(Code::kMalformed, 1820,
                      fmt::format("NodeInfo: node_type = {}, expected 1-4", n.node_type));
  }
  return n;
}

std::string decode_node_description(const SmpData& d) {
  auto end = std::find(d.begin(), d.end(), uint8_t{0});
  return std::string(d.begin(), end);
}

const char* ib_port_state_name(uint8_t state) {
  switch (state) {
    case 0:
      return "NoChange";
    case 1:
      return "Down";
    case 2:
      return "Initialize";
    case 3:
      return "Armed";
    case 4:
      return "Active";
    default:
      return "?";
  }
}

// PortInfo byte offsets (IBA 14.2.5.6, Table 155).
uint64_t PortInfo::m_key() const {
  return get_be(raw, 0, 8);
}
void PortInfo::set_m_key(uint64_t key) {
  put_be(raw, 0, 8, key);
}
uint8_t PortInfo::m_key_protect_bits() const {
  return get_bits_be(raw, 34, 6, 2);
}
void PortInfo::set_m_key_protect_bits(uint8_t bits) {
  put_bits_be(raw, 34, 6, 2, bits);
}
uint16_t PortInfo::m_key_lease_period() const {
  return static_cast<uint16_t>(get_be(raw, 26, 2));
}
void PortInfo::set_m_key_lease_period(uint16_t s) {
  put_be(raw, 26, 2, s);
}
uint16_t PortInfo::m_key_violations() const {
  return static_cast<uint16_t>(get_be(raw, 44, 2));
}
void PortInfo::set_m_key_violations(uint16_t n) {
  put_be(raw, 44, 2, n);
}
uint64_t PortInfo::gid_prefix() const {
  return get_be(raw, 8, 8);
}
uint16_t PortInfo::lid() const {
  return static_cast<uint16_t>(get_be(raw, 16, 2));
}
void PortInfo::set_lid(uint16_t lid) {
  put_be(raw, 16, 2, lid);
}
uint16_t PortInfo::master_sm_lid() const {
  return static_cast<uint16_t>(get_be(raw, 18, 2));
}
void PortInfo::set_master_sm_lid(uint16_t lid) {
  put_be(raw, 18, 2, lid);
}
uint32_t PortInfo::capability_mask() const {
  return static_cast<uint32_t>(get_be(raw, 20, 4));
}
uint8_t PortInfo::local_port_num() const {
  return raw[28];
}
uint8_t PortInfo::link_width_active() const {
  return raw[31];
}
uint8_t PortInfo::port_state() const {
  return get_bits_be(raw, 32, 0, 4);
}
void PortInfo::set_port_state(IbPortState s) {
  put_bits_be(raw, 32, 0, 4, static_cast<unsigned>(s));
}
uint8_t PortInfo::phys_state() const {
  return get_bits_be(raw, 33, 4, 4);
}
void PortInfo::set_phys_state(uint8_t s) {
  put_bits_be(raw, 33, 4, 4, s);
}
void PortInfo::set_link_down_default(uint8_t s) {
  put_bits_be(raw, 33, 0, 4, s);
}
uint8_t PortInfo::lmc() const {
  return get_bits_be(raw, 34, 0, 3);
}
void PortInfo::set_lmc(uint8_t lmc) {
  put_bits_be(raw, 34, 0, 3, lmc);
}
uint8_t PortInfo::link_speed_active() const {
  return get_bits_be(raw, 35, 4, 4);
}
uint8_t PortInfo::neighbor_mtu() const {
  return get_bits_be(raw, 36, 4, 4);
}
uint8_t PortInfo::mtu_cap() const {
  return get_bits_be(raw, 41, 0, 4);
}
uint8_t PortInfo::vl_cap() const {
  return get_bits_be(raw, 37, 4, 4);
}
uint8_t PortInfo::operational_vls() const {
  return get_bits_be(raw, 43, 4, 4);
}

unsigned ib_link_lanes(uint8_t width) {
  switch (width) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 0;
  }
}

unsigned ib_lane_half_gbaud(uint8_t speed) {
  switch (speed) {
    case 1:
      return 5;
    case 2:
      return 10;
    case 4:
      return 20;
    default:
      return 0;
  }
}

PortInfo PortInfo::for_set() const {
  PortInfo p = *this;
  p.set_port_state(IbPortState::kNoChange);
  p.set_phys_state(0);
  p.set_link_down_default(0);
  return p;
}

// SwitchInfo byte offsets (IBA 14.2.5.4, Table 148).
uint16_t SwitchInfo::linear_fdb_cap() const {
  return static_cast<uint16_t>(get_be(raw, 0, 2));
}
uint16_t SwitchInfo::linear_fdb_top() const {
  return static_cast<uint16_t>(get_be(raw, 6, 2));
}
void SwitchInfo::set_linear_fdb_top(uint16_t top) {
  put_be(raw, 6, 2, top);
}
bool SwitchInfo::port_state_change() const {
  return get_bits_be(raw, 11, 2, 1);
}
void SwitchInfo::set_port_state_change(bool v) {
  put_bits_be(raw, 11, 2, 1, v ? 1 : 0);
}

std::string sm_state_name(uint8_t state) {
  switch (static_cast<SmState>(state)) {
    case SmState::kNotActive:
      return "not active";
    case SmState::kDiscovering:
      return "discovering";
    case SmState::kStandby:
      return "standby";
    case SmState::kMaster:
      return "master";
  }
  return fmt::format("state {}", state);
}

SmpData encode_sm_info(const SmInfo& s) {
  SmpData d{};
  put_be(d, 0, 8, s.guid);
  put_be(d, 8, 8, s.sm_key);
  put_be(d, 16, 4, s.act_count);
  put_bits_be(d, 20, 4, 4, s.priority);
  put_bits_be(d, 20, 0, 4, s.sm_state);
  return d;
}

SmInfo decode_sm_info(const SmpData& d) {
  SmInfo s;
  s.guid = get_be(d, 0, 8);
  s.sm_key = get_be(d, 8, 8);
  s.act_count = static_cast<uint32_t>(get_be(d, 16, 4));
  s.priority = get_bits_be(d, 20, 4, 4);
  s.sm_state = get_bits_be(d, 20, 0, 4);
  return s;
}

}  // namespace galaxy::wire
