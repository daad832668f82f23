// Random management packets and descriptors for the round-trip tests.
#pragma once

#include <random>

#include "wire/mgmt.h"

namespace galaxy::wire::testing {

inline constexpr NmpType kAllNmpTypes[kNmpTypeCount] = {
    NmpType::kRegReadRequest,     NmpType::kRegReadResponse,    NmpType::kRegWriteRequest,
    NmpType::kRegWriteResponse,   NmpType::kRegError,           NmpType::kEepromReadRequest,
    NmpType::kEepromReadResponse, NmpType::kEepromWriteRequest, NmpType::kEepromWriteResponse,
    NmpType::kEepromError,        NmpType::kFaultReport,        NmpType::kSmInfoGet,
    NmpType::kSmInfoSet,          NmpType::kSmInfoResponse};

// Ports below `ports`: 32 keeps to the TH-2 field or its long variant (up to 31 hops), up to
// kMaxSwitchPorts reaches the wide one (up to 20 hops: no variant carries both).
inline SourceRoute random_route(std::mt19937_64& rng, unsigned ports = 32) {
  SourceRoute r;
  r.hop_num = static_cast<uint8_t>(rng() % ((ports > 32 ? kFieldRouteHops : kMaxRouteHops) + 1));
  for (unsigned i = 0; i < r.hop_num; ++i) r.hops[i] = static_cast<uint8_t>(rng() % ports);
  return r;
}

// Only the fields that `t` carries are set, so the value survives a round trip.
inline NmpData random_nmp_data(std::mt19937_64& rng, NmpType t) {
  NmpData d;
  d.count = static_cast<uint8_t>(rng() % 7);
  for (auto& a : d.address) a = static_cast<uint16_t>(rng() & 0x7FFF);
  for (auto& v : d.value) v = rng();
  for (auto& b : d.bytes) b = static_cast<uint8_t>(rng());
  d.error = static_cast<NmpError>(rng() % 7);
  d.error_address = static_cast<uint16_t>(rng());
  d.fault_code = static_cast<uint8_t>(rng());
  d.fault_port = static_cast<uint8_t>(rng());
  d.fault_severity = static_cast<uint8_t>(rng());
  d.fault_detail = static_cast<uint32_t>(rng());
  d.sm.guid = rng();
  d.sm.act_count = static_cast<uint32_t>(rng());
  d.sm.priority = static_cast<uint8_t>(rng() % 16);
  d.sm.state = static_cast<uint8_t>(rng() % 4);
  d.sm.control = static_cast<uint8_t>(rng() % (kMaxSmControl + 1));
  d.sm.successor_chip = static_cast<uint16_t>(rng());
  d.sm.successor_vp = static_cast<uint8_t>(rng());
  if (!is_eeprom(t)) d.count %= kMaxRegistersPerPacket + 1;
  return carried_nmp_data(t, d);
}

}  // namespace galaxy::wire::testing
