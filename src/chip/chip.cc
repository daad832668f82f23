#include "chip/chip.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/time_units.h"
#include "chip/nma.h"
#include "chip/route_table.h"
#include "wire/flit.h"

namespace galaxy::chip {

using wire::NmpError;

Severity fault_severity(FaultCode c) {
  switch (c) {
    case FaultCode::kLinkDown:
      return Severity::kCritical;
    case FaultCode::kBistFailed:
    case FaultCode::kOverTemperature:
    case FaultCode::kRetransThreshold:
      return Severity::kMajor;
    case FaultCode::kCrcErrorBurst:
    case FaultCode::kMKeyViolation:
    case FaultCode::kDirtyPacket:
      return Severity::kMinor;
    case FaultCode::kLinkUp:
      return Severity::kInfo;
  }
  return Severity::kInfo;
}

std::string_view fault_name(FaultCode c) {
  switch (c) {
    case FaultCode::kLinkDown:
      return "link_down";
    case FaultCode::kLinkUp:
      return "link_up";
    case FaultCode::kCrcErrorBurst:
      return "crc_error_burst";
    case FaultCode::kRetransThreshold:
      return "retransmission_threshold";
    case FaultCode::kOverTemperature:
      return "over_temperature";
    case FaultCode::kMKeyViolation:
      return "mkey_violation";
    case FaultCode::kDirtyPacket:
      return "dirty_packet";
    case FaultCode::kBistFailed:
      return "bist_failed";
  }
  return "unknown";
}

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kMinor:
      return "minor";
    case Severity::kMajor:
      return "major";
    case Severity::kCritical:
      return "critical";
  }
  return "unknown";
}

Chip::Chip(wire::ChipType type, uint16_t num_ports, uint32_t address_space)
    : type_(type), address_space_(address_space), ports_(num_ports) {
  nma_ = std::make_unique<Nma>(*this);
}

Chip::~Chip() = default;

namespace {
bool in_port_block(uint16_t addr, size_t num_ports, uint8_t* port, uint16_t* offset) {
  if (addr < reg::kPortBase) return false;
  uint32_t rel = addr - reg::kPortBase;
  uint32_t p = rel / reg::kPortStride;
  if (p >= num_ports) return false;
  *port = static_cast<uint8_t>(p);
  *offset = static_cast<uint16_t>(rel % reg::kPortStride);
  return true;
}

uint64_t peer_word(const PortState& s) {
  return reg::encode_peer(s.peer.valid, s.peer.type == wire::ChipType::kNrc, s.peer.port,
                          s.link == LinkState::kUp, s.peer.chip_id, s.peer.num_ports);
}

uint64_t wide_peer_word(const PortState& s) {
  reg::WidePeer w;
  w.linked = s.peer.valid && s.link == LinkState::kUp;
  w.nrc = s.peer.type == wire::ChipType::kNrc;
  w.port = s.peer.port;
  w.chip = s.peer.chip_id;
  w.ports = s.peer.num_ports;
  return reg::encode_wide_peer(w);
}

// Ports 2i and 2i+1 of a peer summary register, in the format `word`; ports the chip does
// not have read as "no peer".
template <typename Word>
uint64_t summary_pair(const std::vector<PortState>& ports, size_t i, Word word) {
  size_t p = 2 * i;
  uint64_t v = p < ports.size() ? word(ports[p]) : 0;
  if (p + 1 < ports.size()) v |= word(ports[p + 1]) << 32;
  return v;
}

// PEER_SUMMARY_HIGH register i: bit 16 of the chip id of ports 64i .. 64i + 63's linked peers.
uint64_t summary_high(const std::vector<PortState>& ports, size_t i) {
  uint64_t v = 0;
  for (size_t b = 0; b < 64 && 64 * i + b < ports.size(); ++b) {
    const PortState& s = ports[64 * i + b];
    if (s.peer.valid && s.link == LinkState::kUp)
      v |= uint64_t{wire::chip_id_high(s.peer.chip_id)} << b;
  }
  return v;
}
}  // namespace

RegAccess Chip::read_register(uint16_t addr) {
  if (addr >= address_space_) return {NmpError::kAddressOutOfRange, 0};
  switch (addr) {
    case reg::kChipIdent:
      return {NmpError::kNone,
              static_cast<uint64_t>(type_) | (uint64_t{num_ports()} << 8) | (uint64_t{1} << 16)};
    case reg::kChipId:
      return {NmpError::kNone, reg::encode_chip_id(chip_id_, id_valid_, wide_ids_)};
    case reg::kChipCtrl:
      return {NmpError::kNone, ctrl_};
    case reg::kMKey:
      return {NmpError::kNone, 0};  // the key is never read back
    case reg::kMKeyViolations:
      return {NmpError::kNone, mkey_violations_};
    case reg::kMKeyLease:
      return {NmpError::kNone, mkey_lease_s_};
    case reg::kTemperature:
      return {NmpError::kNone, static_cast<uint64_t>(temperature_mc_)};
    case reg::kTempLimit:
      return {NmpError::kNone, static_cast<uint64_t>(temp_limit_mc_)};
    case reg::kVoltage:
      return {NmpError::kNone, voltage_mv_};
    case reg::kPowerCycles:
      return {NmpError::kNone, power_cycles_};
    case reg::kFaultEnable:
      return {NmpError::kNone, fault_enable_};
    case reg::kFaultMask:
      return {NmpError::kNone, fault_mask_};
    case reg::kFaultRouteLo:
      return {NmpError::kNone, fault_route_lo_};
    case reg::kFaultRouteHi:
      return {NmpError::kNone, fault_route_hi_};
    case reg::kFaultRouteExt:
      return {NmpError::kNone, fault_route_ext_};
    case reg::kFaultDest:
      return {NmpError::kNone, fault_dest_};
    case reg::kFaultStatus:
      return {NmpError::kNone, fault_status_};
    case reg::kFaultsReported:
      return {NmpError::kNone, faults_reported_};
    case reg::kNmaDropped:
      return {NmpError::kNone, nma_dropped_};
    case reg::kNmaErrors:
      return {NmpError::kNone, nma_errors_};
    case reg::kNmaRequests:
      return {NmpError::kNone, nma_requests_};
    case reg::kBootStatus:
      return {NmpError::kNone, boot_status_};
    case reg::kDirtyDiscards: {
      // Every port's count plus those of no port, so that an engine that keeps the per-port
      // counts itself (the live daemon syncs them from the segment) reads the same total.
      uint64_t all = dirty_discards_;
      for (const PortState& ps : ports_) all += ps.dirty_discards;
      return {NmpError::kNone, all};
    }
    case reg::kScratch:
      return {NmpError::kNone, scratch_};
    default:
      break;
  }
  if (addr >= reg::kPeerSummary && addr < reg::kPeerSummary + reg::kPeerSummaryWords)
    return {NmpError::kNone, summary_pair(ports_, addr - reg::kPeerSummary, peer_word)};
  if (addr >= reg::kPeerSummaryWide && addr < reg::kPeerSummaryWide + reg::kPeerSummaryWideWords)
    return {NmpError::kNone, summary_pair(ports_, addr - reg::kPeerSummaryWide, wide_peer_word)};
  if (addr >= reg::kPeerSummaryHigh && addr < reg::kPeerSummaryHigh + reg::kPeerSummaryHighWords)
    return {NmpError::kNone, summary_high(ports_, addr - reg::kPeerSummaryHigh)};
  uint8_t p;
  uint16_t off;
  if (in_port_block(addr, ports_.size(), &p, &off)) {
    const PortState& s = ports_[p];
    switch (off) {
      case reg::port::kIdent:
        return {NmpError::kNone, uint64_t{p} | (uint64_t{wire::chip_id_low(chip_id())} << 8) |
                                     (uint64_t(type_) << 24) |
                                     (uint64_t{wire::chip_id_high(chip_id())} << 26)};
      case reg::port::kPeerIdent:
        return {NmpError::kNone, peer_word(s) | wide_peer_word(s) << 32};
      case reg::port::kLinkState:
        return {NmpError::kNone, static_cast<uint64_t>(s.link) | (uint64_t{s.lanes} << 8)};
      case reg::port::kHandshakes:
        return {NmpError::kNone, s.handshakes};
      case reg::port::kRetransmissions:
        return {NmpError::kNone, s.retransmissions};
      case reg::port::kRetransRate:
        return {NmpError::kNone, s.retrans_rate_ppm()};
      case reg::port::kCrcErrors:
        return {NmpError::kNone, s.crc_errors};
      case reg::port::kTxFlits:
        return {NmpError::kNone, s.tx_flits};
      case reg::port::kRxFlits:
        return {NmpError::kNone, s.rx_flits};
      case reg::port::kDirtyDiscards:
        return {NmpError::kNone, s.dirty_discards};
      case reg::port::kTxPackets:
        return {NmpError::kNone, s.tx_packets};
      case reg::port::kRxPackets:
        return {NmpError::kNone, s.rx_packets};
      case reg::port::kOutputLoad:
        return {NmpError::kNone, s.output_load};
      case reg::port::kVcBuffered:
        return {NmpError::kNone, Damq::pack([&](uint8_t v) { return s.vc.buffered.used(v); })};
      case reg::port::kVcCredits:
        return {NmpError::kNone, Damq::pack([&](uint8_t v) { return s.vc.credits.room(v); })};
      case reg::port::kCreditStalls:
        return {NmpError::kNone, s.vc.credit_stalls};
      case reg::port::kPortCtrl:
        return {NmpError::kNone, s.ctrl};
      case reg::port::kBistCtrl:
        return {NmpError::kNone, s.bist_ctrl};
      case reg::port::kBistStatus:
        return {NmpError::kNone, (s.bist_running ? 1u : 0u) | (s.bist_done ? 2u : 0u) |
                                     (s.bist_no_wire ? 4u : 0u) | (s.bist_flits << 32)};
      case reg::port::kBistErrors:
        return {NmpError::kNone, s.bist_errors};
      case reg::port::kLinkParams:
        return {NmpError::kNone, s.link_params};
      default:
        if (off >= reg::port::kVcTxPackets && off < reg::port::kVcTxPackets + kNumVcs)
          return {NmpError::kNone, s.vc.tx_packets[off - reg::port::kVcTxPackets]};
        return {NmpError::kAddressOutOfRange, 0};
    }
  }
  return read_specific(addr);
}

NmpError Chip::check_write(uint16_t addr, uint64_t value) const {
  if (addr >= address_space_) return NmpError::kAddressOutOfRange;
  switch (addr) {
    case reg::kChipId:
      return (value >> 19) == 0 && reg::chip_id_value(value) != wire::kUnconfiguredId
                 ? NmpError::kNone
                 : NmpError::kBadValue;
    case reg::kChipCtrl:
      // [1:0] M_Key level 0-2; [2] fixed output choice, an NRC's only.
      return (value & 3) <= 2 && (value >> 3) == 0 &&
                     ((value & reg::kCtrlFixedChoice) == 0 || type_ == wire::ChipType::kNrc)
                 ? NmpError::kNone
                 : NmpError::kBadValue;
    case reg::kMKey:
    case reg::kFaultMask:
    case reg::kFaultRouteLo:
    case reg::kFaultStatus:
    case reg::kScratch:
      return NmpError::kNone;
    case reg::kFaultEnable:
      return value <= 1 ? NmpError::kNone : NmpError::kBadValue;
    case reg::kFaultRouteHi:
      return (value >> 41) == 0 ? NmpError::kNone : NmpError::kBadValue;
    case reg::kFaultRouteExt:
      return (value >> wire::kSourceRouteExtBits) == 0 ? NmpError::kNone : NmpError::kBadValue;
    case reg::kMKeyLease:
      return (value >> 16) == 0 ? NmpError::kNone : NmpError::kBadValue;
    case reg::kTempLimit:  // 0 .. 200 °C
      return value <= 200'000 ? NmpError::kNone : NmpError::kBadValue;
    case reg::kFaultDest:
      return (value >> 23) == 0 ? NmpError::kNone : NmpError::kBadValue;
    case reg::kChipIdent:
    case reg::kMKeyViolations:
    case reg::kTemperature:
    case reg::kVoltage:
    case reg::kPowerCycles:
    case reg::kFaultsReported:
    case reg::kNmaDropped:
    case reg::kNmaErrors:
    case reg::kNmaRequests:
    case reg::kBootStatus:
    case reg::kDirtyDiscards:
      return NmpError::kReadOnly;
    default:
      break;
  }
  if ((addr >= reg::kPeerSummary && addr < reg::kPeerSummary + reg::kPeerSummaryWords) ||
      (addr >= reg::kPeerSummaryWide &&
       addr < reg::kPeerSummaryWide + reg::kPeerSummaryWideWords) ||
      (addr >= reg::kPeerSummaryHigh && addr < reg::kPeerSummaryHigh + reg::kPeerSummaryHighWords))
    return NmpError::kReadOnly;
  uint8_t p;
  uint16_t off;
  if (in_port_block(addr, ports_.size(), &p, &off)) {
    switch (off) {
      case reg::port::kPortCtrl:
        return value <= 3 ? NmpError::kNone : NmpError::kBadValue;
      case reg::port::kBistCtrl:
        return ((value >> 40) == 0 && ((value >> 32) & 0xFF) <= 100 && (value & 3) != 3)
                   ? NmpError::kNone
                   : NmpError::kBadValue;
      case reg::port::kLinkParams:
        return NmpError::kNone;
      default:
        return off < reg::port::kEnd ? NmpError::kReadOnly : NmpError::kAddressOutOfRange;
    }
  }
  return check_specific(addr, value);
}

void Chip::write_register(uint16_t addr, uint64_t value) {
  switch (addr) {
    case reg::kChipId:
      chip_id_ = reg::chip_id_value(value);
      id_valid_ = reg::chip_id_valid(value);
      wide_ids_ = reg::chip_id_wide(value);
      return;
    case reg::kChipCtrl:
      ctrl_ = value;
      return;
    case reg::kTempLimit:
      temp_limit_mc_ = static_cast<int64_t>(value);
      over_temperature_ = false;  // compared with the new limit at the next step
      return;
    case reg::kMKey:
      mkey_ = value;
      return;
    case reg::kMKeyLease:
      mkey_lease_s_ = value;
      lease_ends_ps_.reset();
      return;
    case reg::kFaultEnable:
      fault_enable_ = value;
      return;
    case reg::kFaultMask:
      fault_mask_ = value;
      return;
    case reg::kFaultRouteLo:
      fault_route_lo_ = value;
      return;
    case reg::kFaultRouteHi:
      fault_route_hi_ = value;
      return;
    case reg::kFaultRouteExt:
      fault_route_ext_ = value;
      return;
    case reg::kFaultDest:
      fault_dest_ = value;
      return;
    case reg::kFaultStatus:
      fault_status_ &= ~value;
      return;  // write 1 to clear
    case reg::kScratch:
      scratch_ = value;
      return;
    default:
      break;
  }
  uint8_t p;
  uint16_t off;
  if (in_port_block(addr, ports_.size(), &p, &off)) {
    PortState& s = ports_[p];
    switch (off) {
      case reg::port::kPortCtrl: {
        bool was_down = (s.ctrl & 2) != 0;
        if (was_down != ((value & 2) != 0)) link_control_changes_.set(p);
        s.ctrl = value;
        if ((value & 2) && !was_down && s.link == LinkState::kUp) link_down(p);
        return;
      }
      case reg::port::kBistCtrl:
        s.bist_ctrl = value;
        if (value & 1) {
          s.bist_running = true;
          s.bist_done = s.bist_no_wire = false;
          s.bist_flits = s.bist_errors = 0;
        } else if (value & 2) {
          s.bist_running = false;
        }
        return;
      case reg::port::kLinkParams:
        s.link_params = value;
        return;
      default:
        return;
    }
  }
  write_specific(addr, value);
}

RegAccess Chip::read_specific(uint16_t) {
  return {NmpError::kAddressOutOfRange, 0};
}
NmpError Chip::check_specific(uint16_t, uint64_t) const {
  return NmpError::kAddressOutOfRange;
}
void Chip::write_specific(uint16_t, uint64_t) {}
Status Chip::apply_boot_route(const BootRoute&) {
  return make_error(Code::kUnsupported, 2020,
                    "boot image: route record on a chip without route tables");
}

bool Chip::key_allows(bool write, uint64_t presented_key, uint64_t now_ps) {
  const uint64_t level = ctrl_ & 3;
  const bool needed = level >= 2 || (level == 1 && write);
  if (!needed) return true;
  if (presented_key == mkey_) {
    lease_ends_ps_.reset();
    return true;
  }
  if (mkey_lease_s_ != 0) {
    if (!lease_ends_ps_) {
      lease_ends_ps_ = now_ps + mkey_lease_s_ * units::kSecond;
    } else if (now_ps >= *lease_ends_ps_) {
      // The holder of the key said nothing for a whole lease: protection ends.
      ctrl_ &= ~uint64_t{3};
      lease_ends_ps_.reset();
      return true;
    }
  }
  ++mkey_violations_;
  raise_fault(FaultCode::kMKeyViolation, 0, static_cast<uint32_t>(mkey_violations_));
  return false;
}

Status Chip::power_on() {
  auto image = read_boot_image(eeprom_);
  if (!image.ok()) {
    bool blank = image.error().code == Code::kNotFound;
    boot_status_ = blank ? 0 : (static_cast<uint64_t>(image.error().id & 0xFF) << 8);
    if (blank) return {};
    return image.error();
  }
  // Validate every record before applying any, so a bad image changes nothing.
  for (const auto& r : image->registers) {
    NmpError e = check_write(r.address, r.value);
    if (e != NmpError::kNone) {
      boot_status_ = uint64_t{0x30} << 8;
      return make_error(Code::kMalformed, 2021,
                        fmt::format("boot image: register 0x{:03x} value 0x{:x} refused: {}",
                                    r.address, r.value, wire::nmp_error_name(e)));
    }
  }
  for (const auto& r : image->routes) {
    if (type_ != wire::ChipType::kNrc || r.count == 0 ||
        uint32_t{r.first} + r.count > kMaxRouteDestinations || r.inputs.beyond(num_ports()) ||
        r.ports.beyond(num_ports())) {
      boot_status_ = uint64_t{0x31} << 8;
      return make_error(Code::kMalformed, 2022,
                        fmt::format("boot image: route record first={} count={} inputs={} "
                                    "ports={} is invalid for this chip",
                                    r.first, r.count, to_hex(r.inputs), to_hex(r.ports)));
    }
  }
  for (const auto& r : image->registers) write_register(r.address, r.value);
  for (const auto& r : image->routes) GALAXY_TRY(apply_boot_route(r));
  boot_status_ = 1 | (uint64_t{image->registers.size() + image->routes.size()} << 16);
  return {};
}

void Chip::reset_volatile() {
  ctrl_ = 0;
  mkey_ = 0;
  mkey_violations_ = 0;
  mkey_lease_s_ = 0;
  lease_ends_ps_.reset();
  temp_limit_mc_ = thermal::kDefaultLimitMc;
  over_temperature_ = false;
  fault_enable_ = fault_mask_ = fault_route_lo_ = fault_route_hi_ = fault_route_ext_ = 0;
  fault_dest_ = fault_status_ = faults_reported_ = 0;
  nma_dropped_ = nma_errors_ = nma_requests_ = 0;
  boot_status_ = dirty_discards_ = scratch_ = 0;
  chip_id_ = 0;
  id_valid_ = false;
  for (PortState& s : ports_) {
    // The link itself is the engine's: it follows port_forced_down and calls link_down/up.
    const LinkState link = s.link;
    const uint8_t lanes = s.lanes;
    const PeerIdentity peer = s.peer;
    s = PortState{};
    s.link = link;
    s.lanes = lanes;
    s.peer = peer;
  }
  thermal_tx_flits_ = 0;
  nma_ = std::make_unique<Nma>(*this);
  reset_specific();
}

void Chip::switch_off(uint64_t now_ps) {
  if (!powered_) return;
  advance_thermal(now_ps);
  powered_ = false;
  voltage_mv_ = 0;
  reset_volatile();
  link_control_changes_ = PortSet::first(num_ports());
}

Status Chip::switch_on(uint64_t now_ps) {
  if (powered_) return {};
  advance_thermal(now_ps);  // cooled while off
  powered_ = true;
  ++power_cycles_;
  link_control_changes_ = PortSet::first(num_ports());
  // Links train again from scratch: their first training is no fault (link_up).
  for (PortState& s : ports_) s.trained = false;
  return power_on();
}

void Chip::advance_thermal(uint64_t now_ps) {
  uint64_t flits = 0;
  unsigned up = 0;
  for (const PortState& s : ports_) {
    flits += s.tx_flits;
    up += s.link == LinkState::kUp ? 1 : 0;
  }
  if (!thermal_at_ps_ || now_ps <= *thermal_at_ps_ || flits < thermal_tx_flits_) {
    // The first step, a clock that did not move, or counters that started again.
    if (!thermal_at_ps_ || now_ps > *thermal_at_ps_) thermal_at_ps_ = now_ps;
    thermal_tx_flits_ = flits;
    return;
  }
  const double seconds = static_cast<double>(now_ps - *thermal_at_ps_) * 1e-12;
  const double capacity = seconds * (wire::kLinkBitsPerSecond / wire::kFlitBits) * up;
  const double load =
      capacity > 0 ? std::min(1.0, static_cast<double>(flits - thermal_tx_flits_) / capacity) : 0;
  thermal_at_ps_ = now_ps;
  thermal_tx_flits_ = flits;
  temperature_mc_ =
      thermal::step_mc(temperature_mc_, thermal::settled_mc(powered_, load, ambient_mc_), seconds);
  voltage_mv_ = thermal::core_mv(powered_, load);
  if (!powered_) return;
  if (!over_temperature_ && temperature_mc_ >= temp_limit_mc_) {
    over_temperature_ = true;
    raise_fault(FaultCode::kOverTemperature, 0, static_cast<uint32_t>(temperature_mc_ / 1000));
  } else if (over_temperature_ &&
             temperature_mc_ < temp_limit_mc_ - thermal::kOverTemperatureHysteresisMc) {
    over_temperature_ = false;
  }
}

void Chip::link_up(uint8_t p, const PeerIdentity& peer, uint8_t lanes) {
  PortState& s = ports_[p];
  if (s.link == LinkState::kUp) return;
  s.link = LinkState::kUp;
  s.lanes = lanes;
  s.peer = peer;
  ++s.handshakes;
  if (std::exchange(s.trained, true)) raise_fault(FaultCode::kLinkUp, p, s.handshakes);
}

void Chip::link_down(uint8_t p) {
  PortState& s = ports_[p];
  if (s.link == LinkState::kDown) return;
  s.link = LinkState::kDown;
  s.lanes = 0;
  raise_fault(FaultCode::kLinkDown, p, s.handshakes);
}

void Chip::complete_bist(uint8_t p, uint64_t flits, uint64_t errors, bool no_wire) {
  PortState& s = ports_[p];
  s.bist_running = false;
  s.bist_done = true;
  s.bist_no_wire = no_wire;
  s.bist_flits = flits;
  s.bist_errors = errors;
  if (errors) raise_fault(FaultCode::kBistFailed, p, static_cast<uint32_t>(errors));
}

void Chip::count_dirty(uint8_t p) {
  if (p < ports_.size())
    ++ports_[p].dirty_discards;
  else
    ++dirty_discards_;
}

bool Chip::raise_fault(FaultCode code, uint8_t p, uint32_t detail) {
  if (!powered_) return false;  // a chip switched off reports nothing
  fault_status_ |= uint64_t{1} << static_cast<uint8_t>(code);
  if (!(fault_enable_ & 1) || (fault_mask_ >> static_cast<uint8_t>(code)) & 1) return false;
  if (!nma_->queue_fault_report(code, p, detail)) return false;
  ++faults_reported_;
  return true;
}

}  // namespace galaxy::chip
