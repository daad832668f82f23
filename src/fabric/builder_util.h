// Shared by the builders in this folder (not a public header).
#pragma once

#include <string>
#include <utility>

#include "fabric/topology.h"

namespace galaxy::fabric::detail {

// Wraps a Topology under construction and keeps the first error, so that builder code reads
// as the wiring it describes instead of as error plumbing. A builder validates its parameters
// first; an error here means a wiring bug, and it is still reported, never ignored.
class TopologyWriter {
 public:
  TopologyWriter(uint32_t nodes, uint32_t ports) { topology_.reserve(nodes, ports); }

  uint32_t node(NodeKind kind, uint32_t ports, std::string name, Location location = {},
                uint8_t level = 0) {
    auto id = topology_.add_node(kind, ports, std::move(name), std::move(location), level);
    if (!id.ok()) {
      keep(id.status());
      return 0;
    }
    return *id;
  }

  void link(uint32_t a, uint32_t port_a, uint32_t b, uint32_t port_b) {
    keep(topology_.connect({a, static_cast<uint8_t>(port_a)}, {b, static_cast<uint8_t>(port_b)}));
  }

  Result<Topology> finish() {
    if (!status_.ok()) return status_.error();
    return std::move(topology_);
  }

 private:
  void keep(Status s) {
    if (status_.ok() && !s.ok()) status_ = std::move(s);
  }

  Topology topology_;
  Status status_;
};

}  // namespace galaxy::fabric::detail
