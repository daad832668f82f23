#include "chip/nrc.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "chip/forwarding.h"
#include "chip/nma.h"
#include "chip/refusal.h"
#include "chip/rt_select.h"

namespace galaxy::chip {

using wire::NmpError;

namespace {
// Which VC_RULES register `addr` is, or kVcRulesWords when none.
unsigned vc_rules_word(uint16_t addr) {
  return addr >= reg::kVcRules && addr < reg::kVcRules + reg::kVcRulesWords
             ? static_cast<unsigned>(addr - reg::kVcRules)
             : reg::kVcRulesWords;
}
}  // namespace

Nrc::Nrc(uint16_t num_ports)
    : Chip(wire::ChipType::kNrc, num_ports, reg::kNrcAddressSpace),
      tables_(num_ports, std::make_shared<RouteTable>()) {}

MgmtRouting Nrc::route_mgmt(uint8_t in_port, std::span<uint8_t> packet) {
  auto head = wire::peek_mgmt_head(packet);
  if (!head.ok()) {
    count_dirty(in_port);
    return {};
  }
  if (head->hop_count < head->route_hop_num) {
    uint8_t out = head->next_port;
    if (!port_usable(out)) {
      count_dirty(in_port);
      return {};
    }
    wire::set_mgmt_hop_count(packet, static_cast<uint8_t>(head->hop_count + 1));
    return {MgmtRouting::Action::kForward, out};
  }
  if (head->hop_count == head->route_hop_num) return {MgmtRouting::Action::kAbsorb, 0};
  count_dirty(in_port);  // hop count beyond the route: misrouted
  return {};
}

// A discarded MP's refusal carries this id (chip/refusal.h).
static_assert(kErrNoUsableRoute == 2031);
static_assert(kErrHopLimit == 2037);

Result<uint8_t> Nrc::route_data(uint8_t in_port, uint32_t dest, uint8_t hops_passed) {
  if (in_port >= num_ports())
    return make_error(Code::kOutOfRange, 2030,
                      fmt::format("input port = {} exceeds {} ports", in_port, num_ports()));
  if (!within_hop_limit(hops_passed)) {
    count_dirty(in_port);
    return make_error(Code::kNotFound, 2037,
                      fmt::format("a packet to destination {} on input port {} has passed {} "
                                  "NRCs, the most a data packet passes (a routing loop)",
                                  dest, in_port, hops_passed));
  }
  PortSet allowed = tables_[in_port]->get(dest);
  const bool fixed = (chip_ctrl() & reg::kCtrlFixedChoice) != 0;
  int best = choose_data_output(
      allowed, dest, [&](uint8_t p) { return port_usable(p); },
      [&](uint8_t p) { return fixed ? uint64_t{0} : port(p).output_load; });
  if (best < 0) {
    count_dirty(in_port);
    return make_error(Code::kNotFound, 2031,
                      fmt::format("no usable route from input port {} to destination {} "
                                  "(allowed set {})",
                                  in_port, dest, to_hex(allowed)));
  }
  return static_cast<uint8_t>(best);
}

Result<uint8_t> Nrc::route_own(uint8_t in_port, uint32_t dest) {
  int best = choose_own_output(
      num_ports(), in_port, dest, [&](uint8_t p) { return tables_[p]->get(dest); },
      [&](uint8_t p) { return port_usable(p); }, [&](uint8_t p) { return port(p).output_load; },
      [&](uint8_t p) { return port(p).peer.valid && port(p).peer.chip_id == dest; });
  if (best < 0)
    return make_error(Code::kNotFound, 2036,
                      fmt::format("no usable route from this NRC to destination {}", dest));
  return static_cast<uint8_t>(best);
}

Status Nrc::set_routes(PortSet inputs, uint32_t first, uint32_t count, PortSet ports,
                       PortSet mask) {
  if (inputs.beyond(num_ports()) || ports.beyond(num_ports()))
    return make_error(Code::kOutOfRange, 2032,
                      fmt::format("route: input ports {} or port set {} names a port beyond {}",
                                  to_hex(inputs), to_hex(ports), num_ports()));
  if (count == 0 || first + count > kMaxRouteDestinations)
    return make_error(Code::kOutOfRange, 2033,
                      fmt::format("route: first = {} count = {} outside {} destinations", first,
                                  count, kMaxRouteDestinations));
  mask &= port_mask();
  const bool whole = mask == port_mask();
  // Group the masked ports by the table they share now; a group that covers every user of
  // its table edits it in place, otherwise it gets its own copy.
  std::map<RouteTable*, std::vector<uint8_t>> masked, all_users;
  for (uint8_t p = 0; p < num_ports(); ++p) {
    all_users[tables_[p].get()].push_back(p);
    if (inputs.test(p)) masked[tables_[p].get()].push_back(p);
  }
  for (auto& [table, ports_here] : masked) {
    std::shared_ptr<RouteTable> target = tables_[ports_here[0]];
    if (ports_here.size() != all_users[table].size())
      target = std::make_shared<RouteTable>(*target);
    if (whole)
      GALAXY_TRY(target->set_range(first, count, ports));
    else
      GALAXY_TRY(target->assign_range(first, count, ports, mask));
    for (uint8_t p : ports_here) tables_[p] = target;
  }
  rt_entries_written_ += uint64_t{count} * static_cast<uint64_t>(inputs.count());
  return {};
}

size_t Nrc::distinct_tables() const {
  std::set<const RouteTable*> s;
  for (const auto& t : tables_) s.insert(t.get());
  return s.size();
}

size_t Nrc::route_memory_bytes() const {
  std::set<const RouteTable*> s;
  size_t n = tables_.capacity() * sizeof(tables_[0]);
  for (const auto& t : tables_)
    if (s.insert(t.get()).second) n += t->memory_bytes();
  return n;
}

RegAccess Nrc::read_specific(uint16_t addr) {
  switch (addr) {
    case reg::kRtSelect:
      return {NmpError::kNone, rt_select_};
    case reg::kRtData: {
      const RtSelect sel = RtSelect::decode(rt_select_);
      const int p = sel.inputs(num_ports()).lowest();
      if (p < 0) return {NmpError::kBadValue, 0};
      return {NmpError::kNone, sel.data_value(tables_[static_cast<size_t>(p)]->get(sel.first))};
    }
    case reg::kRtEntriesWritten:
      return {NmpError::kNone, rt_entries_written_};
    case reg::kRtStatus:
      return {NmpError::kNone, rt_status_};
    default:
      if (vc_rules_word(addr) < reg::kVcRulesWords)
        return {NmpError::kNone, vc_rules_[addr - reg::kVcRules]};
      return {NmpError::kAddressOutOfRange, 0};
  }
}

NmpError Nrc::check_specific(uint16_t addr, uint64_t value) const {
  switch (addr) {
    case reg::kRtSelect:
      return RtSelect::valid(value, num_ports()) ? NmpError::kNone : NmpError::kBadValue;
    case reg::kRtData:
      // The value alone is checked (the NMA checks a packet's registers before writing any):
      // no bit beyond the ports a half can name. A set naming a missing port of the upper half
      // is refused when written (RT_STATUS).
      return (value & ~port_mask().word(0)) ? NmpError::kBadValue : NmpError::kNone;
    case reg::kRtEntriesWritten:
    case reg::kRtStatus:
      return NmpError::kReadOnly;
    default:
      if (const unsigned w = vc_rules_word(addr); w < reg::kVcRulesWords) {
        // No rule for a port the switch does not have.
        const unsigned first = w * reg::kVcRulesPerWord;
        const unsigned here =
            num_ports() > first ? std::min<unsigned>(num_ports() - first, reg::kVcRulesPerWord) : 0;
        const uint64_t allowed =
            here == reg::kVcRulesPerWord ? ~uint64_t{0} : (uint64_t{1} << (kVcRuleBits * here)) - 1;
        return (value & ~allowed) ? NmpError::kBadValue : NmpError::kNone;
      }
      return NmpError::kAddressOutOfRange;
  }
}

void Nrc::write_specific(uint16_t addr, uint64_t value) {
  if (addr == reg::kRtSelect) {
    rt_select_ = value;
  } else if (addr == reg::kRtData) {
    const RtSelect sel = RtSelect::decode(rt_select_);
    Status s =
        rt_select_ == 0
            ? Status(make_error(Code::kInvalidArgument, 2034, "RT_DATA written before RT_SELECT"))
            : set_routes(sel.inputs(num_ports()), sel.first, sel.count, sel.data_ports(value),
                         sel.data_mask(num_ports()));
    rt_status_ = s.ok() ? 0 : 1;
  } else if (const unsigned w = vc_rules_word(addr); w < reg::kVcRulesWords) {
    vc_rules_[w] = value;
  }
}

void Nrc::reset_specific() {
  tables_.assign(num_ports(), std::make_shared<RouteTable>());
  rt_select_ = rt_entries_written_ = rt_status_ = 0;
  vc_rules_ = {};
}

Status Nrc::apply_boot_route(const BootRoute& r) {
  return set_routes(r.inputs, r.first, r.count, r.ports);
}

}  // namespace galaxy::chip
