// InfiniBand subnets built by hand for the SM's tests (nm/ib_subnet.h as discovery fills it):
// nodes, cables, and the small two-level fat tree several tests share.
#pragma once

#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include "nm/ib_subnet.h"

namespace galaxy::nm {

struct Builder {
  IbSubnet net;
  uint32_t add(wire::IbNodeType type, uint8_t ports, const std::string& desc) {
    IbNode n;
    n.info.node_type = static_cast<uint8_t>(type);
    n.info.num_ports = ports;
    n.info.node_guid = 0x1000 + net.nodes.size();
    n.description = desc;
    n.ports.resize(ports + 1u);
    for (auto& p : n.ports) p.known = true;
    net.by_guid[n.info.node_guid] = static_cast<uint32_t>(net.nodes.size());
    net.nodes.push_back(std::move(n));
    return static_cast<uint32_t>(net.nodes.size() - 1);
  }
  void link(uint32_t a, uint8_t pa, uint32_t b, uint8_t pb) {
    for (auto [n, p, m, q] : {std::tuple{a, pa, b, pb}, std::tuple{b, pb, a, pa}}) {
      IbPort& port = net.nodes[n].ports[p];
      port.peer_node = m;
      port.peer_port = q;
      if (!net.nodes[n].is_switch()) {
        port.entered = true;
        port.path = {1};
      }
    }
  }
  // Every node's directed route from the SM's node (breadth first, as discovery finds them): a
  // route leaves the SM's CA by its port and passes through switches only.
  void set_paths() {
    std::vector<bool> seen(net.nodes.size(), false);
    std::deque<uint32_t> todo{net.sm_node};
    seen[net.sm_node] = true;
    net.nodes[net.sm_node].path.clear();
    while (!todo.empty()) {
      const uint32_t u = todo.front();
      todo.pop_front();
      IbNode& node = net.nodes[u];
      if (!node.is_switch() && u != net.sm_node) continue;
      for (uint32_t p = 1; p < node.ports.size(); ++p) {
        if (!node.is_switch() && p != net.sm_port) continue;
        const IbPort& port = node.ports[p];
        if (!port.linked() || seen[port.peer_node]) continue;
        seen[port.peer_node] = true;
        net.nodes[port.peer_node].path = node.path;
        net.nodes[port.peer_node].path.push_back(static_cast<uint8_t>(p));
        todo.push_back(port.peer_node);
      }
    }
  }
};

// Two leaves under two spines; each leaf has two one-port CAs; a two-port CA hangs off leaf 1
// by its port 2 only.
inline Builder two_level() {
  Builder b;
  using T = wire::IbNodeType;
  uint32_t s0 = b.add(T::kSwitch, 8, "spine0"), s1 = b.add(T::kSwitch, 8, "spine1");
  uint32_t l0 = b.add(T::kSwitch, 8, "leaf0"), l1 = b.add(T::kSwitch, 8, "leaf1");
  b.link(l0, 7, s0, 1);
  b.link(l0, 8, s1, 1);
  b.link(l1, 7, s0, 2);
  b.link(l1, 8, s1, 2);
  for (uint32_t i = 0; i < 4; ++i) {
    uint32_t ca = b.add(T::kCa, 1, "host" + std::to_string(i) + " HCA-1");
    b.link(ca, 1, i < 2 ? l0 : l1, static_cast<uint8_t>(1 + i % 2));
  }
  uint32_t dual = b.add(T::kCa, 2, "dual HCA-1");
  b.link(dual, 2, l1, 5);
  b.net.sm_node = 4;
  b.net.sm_port = 1;
  return b;
}

}  // namespace galaxy::nm
