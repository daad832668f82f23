#include "chip/nrc.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "chip/forwarding.h"
#include "chip/nma.h"
#include "chip/refusal.h"

namespace galaxy::chip {

using wire::NmpError;

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

Result<uint8_t> Nrc::route_data(uint8_t in_port, uint32_t dest) {
  if (in_port >= num_ports())
    return make_error(Code::kOutOfRange, 2030,
                      fmt::format("input port = {} exceeds {} ports", in_port, num_ports()));
  PortSet allowed = tables_[in_port]->get(dest);
  int best = choose_data_output(
      allowed, dest, [&](uint8_t p) { return port_usable(p); },
      [&](uint8_t p) { return port(p).output_load; });
  if (best < 0) {
    count_dirty(in_port);
    return make_error(Code::kNotFound, 2031,
                      fmt::format("no usable route from input port {} to destination {} "
                                  "(allowed set 0x{:06x})",
                                  in_port, dest, allowed));
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

Status Nrc::set_routes(uint32_t input_mask, uint32_t first, uint32_t count, PortSet ports) {
  if ((input_mask & ~port_mask()) || (ports & ~port_mask()))
    return make_error(Code::kOutOfRange, 2032,
                      fmt::format("route: input mask 0x{:x} or port set 0x{:x} names a port "
                                  "beyond {}",
                                  input_mask, ports, num_ports()));
  if (count == 0 || first + count > kMaxRouteDestinations)
    return make_error(
        Code::kOutOfRange, 2033,
        fmt::format("route: first = {} count = {} outside 65,536 destinations", first, count));
  // Group the masked ports by the table they share now; a group that covers every user of
  // its table edits it in place, otherwise it gets its own copy.
  std::map<RouteTable*, std::vector<uint8_t>> masked, all_users;
  for (uint8_t p = 0; p < num_ports(); ++p) {
    all_users[tables_[p].get()].push_back(p);
    if ((input_mask >> p) & 1) masked[tables_[p].get()].push_back(p);
  }
  for (auto& [table, ports_here] : masked) {
    std::shared_ptr<RouteTable> target = tables_[ports_here[0]];
    if (ports_here.size() != all_users[table].size())
      target = std::make_shared<RouteTable>(*target);
    GALAXY_TRY(target->set_range(first, count, ports));
    for (uint8_t p : ports_here) tables_[p] = target;
  }
  rt_entries_written_ += uint64_t{count} * static_cast<uint64_t>(__builtin_popcount(input_mask));
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
      uint32_t mask = static_cast<uint32_t>(rt_select_ & 0xFFFFFF);
      if (mask == 0) return {NmpError::kBadValue, 0};
      uint8_t p = static_cast<uint8_t>(__builtin_ctz(mask));
      if (p >= num_ports()) return {NmpError::kBadValue, 0};
      return {NmpError::kNone, tables_[p]->get(static_cast<uint32_t>((rt_select_ >> 24) & 0xFFFF))};
    }
    case reg::kRtEntriesWritten:
      return {NmpError::kNone, rt_entries_written_};
    case reg::kRtStatus:
      return {NmpError::kNone, rt_status_};
    default:
      return {NmpError::kAddressOutOfRange, 0};
  }
}

NmpError Nrc::check_specific(uint16_t addr, uint64_t value) const {
  switch (addr) {
    case reg::kRtSelect: {
      uint64_t mask = value & 0xFFFFFF;
      uint64_t first = (value >> 24) & 0xFFFF;
      uint64_t count = (value >> 40) & 0xFFFF;
      if ((value >> 56) || (mask & ~uint64_t{port_mask()}) || count == 0 ||
          first + count > kMaxRouteDestinations)
        return NmpError::kBadValue;
      return NmpError::kNone;
    }
    case reg::kRtData:
      return (value & ~uint64_t{port_mask()}) ? NmpError::kBadValue : NmpError::kNone;
    case reg::kRtEntriesWritten:
    case reg::kRtStatus:
      return NmpError::kReadOnly;
    default:
      return NmpError::kAddressOutOfRange;
  }
}

void Nrc::write_specific(uint16_t addr, uint64_t value) {
  if (addr == reg::kRtSelect) {
    rt_select_ = value;
  } else if (addr == reg::kRtData) {
    uint32_t count = static_cast<uint32_t>((rt_select_ >> 40) & 0xFFFF);
    Status s =
        rt_select_ == 0
            ? Status(make_error(Code::kInvalidArgument, 2034, "RT_DATA written before RT_SELECT"))
            : set_routes(static_cast<uint32_t>(rt_select_ & 0xFFFFFF),
                         static_cast<uint32_t>((rt_select_ >> 24) & 0xFFFF), count,
                         static_cast<PortSet>(value));
    rt_status_ = s.ok() ? 0 : 1;
  }
}

Status Nrc::apply_boot_route(const BootRoute& r) {
  return set_routes(r.input_mask, r.first, r.count, r.ports);
}

}  // namespace galaxy::chip
