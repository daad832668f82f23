// Helpers shared by the simulated-engine tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/sim/calibration.h"
#include "engine/sim/sim_fabric.h"
#include "fabric/builders.h"

namespace galaxy::sim::testing {

// A handler the queues never call; distinct addresses are enough to check they come back intact.
class NullHandler final : public EventHandler {
 public:
  void handle(Time, uint64_t, uint64_t) override {}
};

inline std::unique_ptr<SimFabric> make(const std::string& spec, uint64_t seed = 1) {
  auto topo = fabric::build_topology(spec);
  EXPECT_TRUE(topo.ok()) << topo.error().to_string();
  auto timing = default_timing();
  EXPECT_TRUE(timing.ok()) << timing.error().to_string();
  SimOptions o;
  o.seed = seed;
  auto f = SimFabric::create(*topo, *timing, o);
  EXPECT_TRUE(f.ok());
  return std::move(*f);
}

// Minimal routes, as a routing engine would program them: every NRC may send a packet for a
// NIC through every port that brings it one hop closer.
inline void program_minimal_routes(SimFabric& f) {
  const auto& topo = f.topology();
  for (uint32_t i = 0; i < topo.num_nics(); ++i) {
    const uint32_t dst = topo.nic_node(i);
    auto ddist = topo.bfs_distances(dst);
    for (uint32_t v = 0; v < topo.num_nodes(); ++v) {
      if (topo.is_nic(v)) continue;
      chip::PortSet ports = 0;
      for (uint8_t p = 0; p < topo.num_ports(v); ++p) {
        auto peer = topo.peer({v, p});
        if (peer &&
            (peer->node == dst || (!topo.is_nic(peer->node) && ddist[peer->node] < ddist[v])))
          ports |= 1u << p;
      }
      ASSERT_TRUE(
          f.nrc(v).set_routes(0xFFFFFF & ((1u << topo.num_ports(v)) - 1), dst, 1, ports).ok());
    }
  }
}

}  // namespace galaxy::sim::testing
