// Discovery, routing, verification and loading as one step, shared by `galaxy route`,
// `galaxy bringup` and `galaxy fabric up`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/session.h"

namespace galaxy::cli {

struct RouteOptions {
  SessionOptions session;
  std::string engine = nm::kDefaultRoutingEngine;
  bool list = false;
  bool eeprom = false;
  uint32_t verify_per_nrc = 0;
  uint32_t mps = 64;  // bringup only
};

// Fills `j` with the figures of each phase. Returns false (after reporting) on an error.
bool route_phases(RouteOptions& o, Session& s, nlohmann::json& j);

// A simulated fabric brought up as the management server does it (route_phases), its server
// endpoint then closed so that every NIC is free for hosts: what `simd` and the data
// benchmarks start from. Null (after reporting) on an error.
std::shared_ptr<sim::SimFabric> routed_sim_fabric(RouteOptions& o, nlohmann::json& phases);

}  // namespace galaxy::cli
