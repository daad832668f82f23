// The network routing chip (docs/system.md 1.2, 2.4): 24 ports, 6 VCs, management packets source
// routed on VC3 (forward / absorb / generate), data packets table routed per input port with an
// adaptive choice among the allowed outputs by output load.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "chip/chip.h"
#include "chip/data_vc.h"
#include "chip/route_table.h"

namespace galaxy::chip {

inline constexpr uint16_t kNrcPorts = 24;

struct MgmtRouting {
  enum class Action : uint8_t { kForward, kAbsorb, kDrop };
  Action action = Action::kDrop;
  uint8_t out_port = 0;
};

class Nrc : public Chip {
 public:
  explicit Nrc(uint16_t num_ports = kNrcPorts);

  // A management packet arrived on `in_port`. Forward: the head flit's hop count has been
  // advanced in `packet`; send it out of `out_port`. Absorb: hand it to nma().process().
  // Drop: malformed, misrouted or the next port is down; counted as a dirty discard.
  MgmtRouting route_mgmt(uint8_t in_port, std::span<uint8_t> packet);

  // A data packet for NIC `dest` arrived on `in_port`: the allowed set from that port's route
  // table, then chip::choose_data_output (chip/forwarding.h): the least-loaded usable output,
  // equal loads broken by the destination. kNotFound if no usable route.
  Result<uint8_t> route_data(uint8_t in_port, uint32_t dest, uint8_t hops_passed = 0);
  // A data packet this NRC sends itself (a refusal), answering through `in_port`:
  // chip::choose_own_output. kNotFound if no usable route.
  Result<uint8_t> route_own(uint8_t in_port, uint32_t dest);
  PortSet allowed_ports(uint8_t in_port, uint32_t dest) const {
    return tables_[in_port]->get(dest);
  }
  // The VC rule of a port (VC_RULES, chip/data_vc.h) and the VC a data packet of `kind` that
  // came in on `in_port` over `vc_in` leaves by `out_port` on (chip::next_vc_class).
  uint8_t vc_rule(uint8_t port) const {
    return static_cast<uint8_t>((vc_rules_[vc_rules_word(port)] >> vc_rule_shift(port)) & 0xFu);
  }
  uint8_t data_vc_out(wire::PacketKind kind, uint8_t vc_in, uint8_t in_port,
                      uint8_t out_port) const {
    return data_vc(kind, next_vc_class(vc_class_of(vc_in), vc_rule(in_port), vc_rule(out_port)));
  }

  // The same operation as an RT_SELECT + RT_DATA register write (and as a boot route record):
  // the ports in `mask` of every entry in the range, on every input port in `inputs`, become
  // those of `ports`; the entries' other ports keep their value.
  Status set_routes(PortSet inputs, uint32_t first, uint32_t count, PortSet ports,
                    PortSet mask = PortSet::first(kMaxSwitchPorts));
  const RouteTable& route_table(uint8_t in_port) const { return *tables_[in_port]; }
  size_t distinct_tables() const;
  size_t route_memory_bytes() const;

 protected:
  RegAccess read_specific(uint16_t addr) override;
  wire::NmpError check_specific(uint16_t addr, uint64_t value) const override;
  void write_specific(uint16_t addr, uint64_t value) override;
  Status apply_boot_route(const BootRoute& r) override;
  void reset_specific() override;

 private:
  PortSet port_mask() const { return PortSet::first(num_ports()); }

  // Input ports with identical tables share one (copy on write in set_routes).
  std::vector<std::shared_ptr<RouteTable>> tables_;
  uint64_t rt_select_ = 0;
  uint64_t rt_entries_written_ = 0;
  uint64_t rt_status_ = 0;
  std::array<uint64_t, reg::kVcRulesWords> vc_rules_{};
};

}  // namespace galaxy::chip
