// State shared by both chips: identity, the common register block, per-port link-layer state,
// the EEPROM, M_Key protection and the NMA (docs/system.md 1.3, 1.4, 2.1). No clock, no threads:
// the engines drive these objects and add time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "chip/damq.h"
#include "chip/eeprom.h"
#include "chip/port_set.h"
#include "chip/registers.h"
#include "chip/thermal.h"
#include "wire/mgmt.h"

namespace galaxy::chip {

class Nma;

enum class LinkState : uint8_t { kDown = 0, kTraining = 1, kUp = 2 };

// Fault events an NMA can report actively (docs/system.md 2.5.3); bit i of FAULT_MASK masks code i.
enum class FaultCode : uint8_t {
  kLinkDown = 0,
  kLinkUp = 1,
  kCrcErrorBurst = 2,
  kRetransThreshold = 3,
  kOverTemperature = 4,
  kMKeyViolation = 5,
  kDirtyPacket = 6,
  kBistFailed = 7,
};
inline constexpr uint8_t kFaultCodeCount = 8;
enum class Severity : uint8_t { kInfo = 0, kMinor = 1, kMajor = 2, kCritical = 3 };
Severity fault_severity(FaultCode c);
std::string_view fault_name(FaultCode c);
std::string_view severity_name(Severity s);

struct PeerIdentity {
  bool valid = false;
  wire::ChipType type = wire::ChipType::kNic;
  wire::ChipId chip_id = 0;
  uint8_t port = 0;
  uint8_t num_ports = 0;  // the peer chip's radix, learnt with its identity
  bool operator==(const PeerIdentity&) const = default;
};

// The fields every forwarded packet reads (link, ctrl, output_load, the counters) come first,
// so that an NRC's choice among its allowed outputs touches one cache line per port.
struct PortState {
  LinkState link = LinkState::kDown;
  uint8_t lanes = 0;
  PeerIdentity peer;         // learnt when the link comes up (docs/system.md 1.4)
  uint64_t ctrl = 1;         // PORT_CTRL: [0] enable, [1] force down
  uint64_t output_load = 0;  // flits waiting for this output; the adaptive choice reads it
  uint64_t tx_flits = 0;
  uint64_t rx_flits = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_packets = 0;
  uint64_t handshakes = 0;
  uint64_t retransmissions = 0;
  uint64_t crc_errors = 0;
  uint64_t dirty_discards = 0;
  uint64_t link_params = 0;
  uint64_t bist_ctrl = 0;
  bool bist_running = false;
  bool bist_done = false;
  bool bist_no_wire = false;  // done, with nothing to test: a link of a live fabric inside a host
  uint64_t bist_flits = 0;
  uint64_t bist_errors = 0;
  bool trained = false;  // the link has been up since power-on
  VcState vc;            // input buffer, credits for the peer's, per-VC counters (chip/damq.h)

  // Retransmissions per million flits sent (RETRANS_RATE).
  uint64_t retrans_rate_ppm() const {
    return tx_flits == 0 ? 0 : retransmissions * 1000000 / tx_flits;
  }
};

// Result of one register access as the NMA sees it.
struct RegAccess {
  wire::NmpError error = wire::NmpError::kNone;
  uint64_t value = 0;
};

class Chip {
 public:
  Chip(wire::ChipType type, uint16_t num_ports, uint32_t address_space);
  virtual ~Chip();
  Chip(const Chip&) = delete;
  Chip& operator=(const Chip&) = delete;

  wire::ChipType type() const { return type_; }
  uint16_t num_ports() const { return static_cast<uint16_t>(ports_.size()); }
  uint32_t address_space() const { return address_space_; }

  // Identity: an unconfigured chip answers only DestID all-ones (docs/system.md 2.2).
  bool configured() const { return id_valid_; }
  wire::ChipId chip_id() const { return id_valid_ ? chip_id_ : wire::kUnconfiguredId; }
  void set_chip_id(wire::ChipId id) {
    chip_id_ = id;
    id_valid_ = true;
  }

  // Register access by management (NMA) or by a test. check_write validates without effect;
  // write_register applies a value that check_write accepted.
  RegAccess read_register(uint16_t addr);
  wire::NmpError check_write(uint16_t addr, uint64_t value) const;
  void write_register(uint16_t addr, uint64_t value);

  // M_Key protection (docs/system.md 3 "Protection"): level 0 none, 1 writes need the key,
  // 2 reads and writes need it. Returns false and counts a violation when refused. `now_ps` is
  // the engine's clock in picoseconds: the lease (MKEY_LEASE seconds, 0 none) starts at the
  // first refusal, stops at the next request with the key, and when it runs out the protection
  // level drops to 0 (IBA 14.2.4), so that a successor to a dead server can take the chip over.
  bool key_allows(bool write, uint64_t presented_key, uint64_t now_ps);
  uint64_t mkey_violations() const { return mkey_violations_; }

  Eeprom& eeprom() { return eeprom_; }
  const Eeprom& eeprom() const { return eeprom_; }
  // Power-on: load configuration registers and route tables from the EEPROM boot image. A blank
  // EEPROM leaves the chip unconfigured; a bad image changes nothing and is reported in
  // BOOT_STATUS and the returned status.
  Status power_on();

  // Link-layer events from the engine. A link coming up again after it was up is a fault
  // report (kLinkUp); its first training after power-on is not.
  void link_up(uint8_t port, const PeerIdentity& peer, uint8_t lanes = 8);
  void link_down(uint8_t port);
  // PORT_CTRL bit 1 holds a port's link down. The chip drops its own end when the bit is set;
  // the engine takes the ports whose bit changed after a management
  // write, takes the whole link down at both ends, and lets it train again once neither end
  // holds it down.
  // A chip switched off holds all its links down.
  bool port_forced_down(uint8_t p) const {
    return p < ports_.size() && (!powered_ || (ports_[p].ctrl & 2));
  }
  PortSet take_link_control_changes() { return std::exchange(link_control_changes_, PortSet{}); }
  PortState& port(uint8_t p) { return ports_[p]; }
  const PortState& port(uint8_t p) const { return ports_[p]; }
  bool port_usable(uint8_t p) const {
    return powered_ && p < ports_.size() && ports_[p].link == LinkState::kUp &&
           (ports_[p].ctrl & 3) == 1;
  }
  // BIST started through BIST_CTRL is finished by the engine with the measured outcome.
  void complete_bist(uint8_t port, uint64_t flits, uint64_t errors, bool no_wire = false);

  // Power, as the monitor board's regulator and reset line drive it (chip/monitor_board.h). A
  // chip switched off holds every link down (the engine takes the changed ports, as after a
  // PORT_CTRL write), serves no management and loses its volatile state: switching it on, or
  // a hard reset, starts it from its EEPROM as at power-on. `now_ps` is the engine's clock.
  bool powered() const { return powered_; }
  void switch_off(uint64_t now_ps);
  Status switch_on(uint64_t now_ps);

  // Temperature and core voltage (chip/thermal.h), brought to `now_ps` from the flits the ports
  // sent since the last call; crossing TEMP_LIMIT raises kOverTemperature.
  void advance_thermal(uint64_t now_ps);
  int64_t temperature_mc() const { return temperature_mc_; }
  uint64_t voltage_mv() const { return voltage_mv_; }
  // The air the chip draws (a failed fan, a hot aisle): the model's ambient from now on.
  void set_ambient_mc(int64_t milli_celsius) { ambient_mc_ = milli_celsius; }
  void count_dirty(uint8_t port);

  // Active fault reporting: latches FAULT_STATUS and, if enabled and unmasked, queues a report
  // in the NMA. Returns true when a report was queued.
  bool raise_fault(FaultCode code, uint8_t port, uint32_t detail);

  Nma& nma() { return *nma_; }

 protected:
  uint64_t chip_ctrl() const { return ctrl_; }  // CHIP_CTRL
  // Chip-specific register blocks (route tables, VPs, error buffer).
  virtual RegAccess read_specific(uint16_t addr);
  virtual wire::NmpError check_specific(uint16_t addr, uint64_t value) const;
  virtual void write_specific(uint16_t addr, uint64_t value);
  // Route records of a boot image; only the NRC has route tables.
  virtual Status apply_boot_route(const BootRoute& r);
  // The chip-specific state a power cycle loses (route tables, VC rules).
  virtual void reset_specific() {}

 private:
  friend class Nma;
  wire::ChipType type_;
  uint32_t address_space_;
  wire::ChipId chip_id_ = 0;
  bool wide_ids_ = false;  // CHIP_ID [18]
  bool id_valid_ = false;
  uint64_t ctrl_ = 0;
  uint64_t mkey_ = 0;
  uint64_t mkey_violations_ = 0;
  uint64_t mkey_lease_s_ = 0;
  std::optional<uint64_t> lease_ends_ps_;  // the running lease, if a request was refused
  // Everything a power cycle or a hard reset loses, back to its power-on value.
  void reset_volatile();
  bool powered_ = true;
  uint64_t power_cycles_ = 0;
  int64_t ambient_mc_ = thermal::kAmbientMc;
  int64_t temperature_mc_ = thermal::kAmbientMc + thermal::kIdleRiseMc;
  uint64_t voltage_mv_ = thermal::kNominalCoreMv;
  int64_t temp_limit_mc_ = thermal::kDefaultLimitMc;
  bool over_temperature_ = false;
  std::optional<uint64_t> thermal_at_ps_;  // the model's last step
  uint64_t thermal_tx_flits_ = 0;          // the ports' flits sent then
  uint64_t fault_enable_ = 0;
  uint64_t fault_mask_ = 0;
  uint64_t fault_route_lo_ = 0;
  uint64_t fault_route_hi_ = 0;
  uint64_t fault_route_ext_ = 0;
  uint64_t fault_dest_ = 0;
  uint64_t fault_status_ = 0;
  uint64_t faults_reported_ = 0;
  uint64_t nma_dropped_ = 0;
  uint64_t nma_errors_ = 0;
  uint64_t nma_requests_ = 0;
  uint64_t boot_status_ = 0;
  uint64_t dirty_discards_ = 0;  // of no port; DIRTY_DISCARDS adds the ports' counts
  uint64_t scratch_ = 0;
  PortSet link_control_changes_;
  std::vector<PortState> ports_;
  Eeprom eeprom_;
  std::unique_ptr<Nma> nma_;
};

// Whether the ports let a link between port `pa` of `a` and port `pb` of `b` be up: neither end
// holds it down (PORT_CTRL bit 1). The engine adds what ports cannot know: a cut cable, the link
// layer's training (between live hosts each end's Link carries its own end's answer).
inline bool link_allowed(const Chip& a, uint8_t pa, const Chip& b, uint8_t pb) {
  return !a.port_forced_down(pa) && !b.port_forced_down(pb);
}

}  // namespace galaxy::chip
