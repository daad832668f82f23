// Checks shared by the topology-reader fuzz targets (fuzz_topology_*.cc): a parsed Topology is
// self-consistent, and a written-then-reread one is the same graph. Violations abort().
#pragma once

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fabric/io.h"
#include "fabric/topology.h"

namespace galaxy::fuzz {

// Every link is symmetric and in range; linked ports number exactly 2 * num_links().
inline void check_topology(const fabric::Topology& t) {
  using fabric::PortRef;
  uint64_t linked = 0;
  uint32_t nics = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    uint32_t ports = t.num_ports(v);
    // A topology holds nodes as wide as InfiniBand's (254 ports); the chip models stop earlier
    // and refuse wider ones by name.
    if (ports == 0 || ports > fabric::kMaxTopologyPorts) std::abort();
    if (t.peer({v, static_cast<uint8_t>(ports)})) std::abort();
    if (t.is_nic(v)) {
      if (t.nic_index(v) != nics || t.nic_node(nics) != v) std::abort();
      ++nics;
    }
    for (uint32_t p = 0; p < ports; ++p) {
      PortRef a{v, static_cast<uint8_t>(p)};
      auto b = t.peer(a);
      if (!b) continue;
      ++linked;
      if (b->node >= t.num_nodes() || b->port >= t.num_ports(b->node) || *b == a) std::abort();
      auto back = t.peer(*b);
      if (!back || *back != a) std::abort();
    }
  }
  if (nics != t.num_nics() || linked != 2 * uint64_t{t.num_links()}) std::abort();
}

// What a name or role becomes in JSON text: bytes that are not UTF-8 turn into U+FFFD (io.h).
inline std::string as_json_text(const std::string& s) {
  using nlohmann::json;
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

// Same nodes (kind, ports, name, location, level) and the same peer on every port; `text` maps
// a name or role of `a` to what `b` should hold.
template <class TextMap>
void check_same(const fabric::Topology& a, const fabric::Topology& b, TextMap text) {
  if (a.num_nodes() != b.num_nodes() || a.num_links() != b.num_links()) std::abort();
  for (uint32_t v = 0; v < a.num_nodes(); ++v) {
    fabric::Location loc = a.location(v);
    loc.role = text(loc.role);
    if (a.kind(v) != b.kind(v) || a.num_ports(v) != b.num_ports(v) ||
        text(a.name(v)) != b.name(v) || loc != b.location(v) || a.level(v) != b.level(v))
      std::abort();
    for (uint32_t p = 0; p < a.num_ports(v); ++p) {
      fabric::PortRef r{v, static_cast<uint8_t>(p)};
      if (a.peer(r) != b.peer(r)) std::abort();
    }
  }
}

// write_json and write_dot both reproduce the graph; dot carries any bytes, JSON only UTF-8.
inline void check_round_trips(const fabric::Topology& t) {
  auto json = fabric::read_json(fabric::write_json(t));
  if (!json.ok()) std::abort();
  check_same(t, *json, as_json_text);
  auto dot = fabric::read_dot(fabric::write_dot(t));
  if (!dot.ok()) std::abort();
  check_same(t, *dot, [](const std::string& s) { return s; });
}

}  // namespace galaxy::fuzz
