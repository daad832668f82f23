// The port a NIC's packets, data and management, leave on: its lowest-numbered port whose link is
// up and leads to an NRC. One rule for the chip as it runs (chip::Nic, with the link states and
// the peer identities its ports learnt) and for every plan of the fabric (routing, path trace,
// offered loads), where every cabled link counts as up. A TH-2 NIC has one port; an InfiniBand
// HCA imported from ibnetdiscover may be cabled on any of its ports, or to another HCA.
#pragma once

#include <cstdint>
#include <optional>

namespace galaxy::chip {

template <class LeadsToNrc>
std::optional<uint8_t> network_port(unsigned num_ports, LeadsToNrc&& leads_to_nrc) {
  for (unsigned p = 0; p < num_ports; ++p)
    if (leads_to_nrc(static_cast<uint8_t>(p))) return static_cast<uint8_t>(p);
  return std::nullopt;
}

// The rule on a planned fabric: `Plan` is fabric::Topology (chip/ does not see fabric/; the
// callers above both do). nullopt for a node that is not a NIC or has no port cabled to an NRC.
template <class Plan>
std::optional<uint8_t> planned_network_port(const Plan& t, uint32_t nic) {
  if (nic >= t.num_nodes() || !t.is_nic(nic)) return std::nullopt;
  return network_port(t.num_ports(nic), [&](uint8_t p) {
    const auto q = t.peer({nic, p});
    return q && !t.is_nic(q->node);
  });
}

}  // namespace galaxy::chip
