#pragma once

#include <memory>

#include "engine/sim/sim_fabric.h"
#include "fabric/builders.h"
#include "glex/sim_device.h"
#include "nm/fabric_map.h"
#include "nm/glex_port.h"
#include "nm/requester.h"

namespace galaxy::nm::testing {

// A simulated fabric with a management server on NIC index 0, as tests need it.
struct SimServer {
  std::unique_ptr<sim::SimFabric> fabric;
  std::unique_ptr<glex_device> device;
  std::unique_ptr<GlexMgmtPort> port;
  uint32_t server_node = 0;

  static SimServer make(const std::string& spec, uint64_t seed = 1) {
    SimServer s;
    auto topo = fabric::build_topology(spec).value();
    s.fabric = std::move(
        sim::SimFabric::create(topo, sim::default_timing().value(), {seed, true}).value());
    s.server_node = s.fabric->topology().nic_node(0);
    s.device = glex::open_sim_device(*s.fabric, s.server_node);
    s.port = std::move(GlexMgmtPort::open(s.device.get()).value());
    return s;
  }
  FabricMap oracle() const { return map_from_topology(fabric->topology(), server_node).value(); }
};

}  // namespace galaxy::nm::testing
