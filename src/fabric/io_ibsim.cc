#include "fabric/io_ibsim.h"

#include <fmt/format.h>

namespace galaxy::fabric {
namespace {

// ibsim reads a node id up to the next '"'; names holding one are written with "'" instead.
std::string node_id(const Topology& t, uint32_t node) {
  std::string s = t.name(node);
  for (char& c : s)
    if (c == '"' || c == '\n' || c == '\r') c = '\'';
  return s;
}

}  // namespace

std::string write_ibsim_net(const Topology& t) {
  std::string out = "# ibsim net file written by Galaxy\n\n";
  for (int pass = 0; pass < 2; ++pass) {  // switches first, then HCAs
    for (uint32_t n = 0; n < t.num_nodes(); ++n) {
      if (t.is_nic(n) != (pass == 1)) continue;
      out += fmt::format("{}\t{} \"{}\"\n", t.is_nic(n) ? "Hca" : "Switch", t.num_ports(n),
                         node_id(t, n));
      for (uint32_t p = 0; p < t.num_ports(n); ++p) {
        auto peer = t.peer({n, static_cast<uint8_t>(p)});
        if (!peer) continue;
        out += fmt::format("[{}]\t\"{}\"[{}]\n", p + 1, node_id(t, peer->node), peer->port + 1u);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace galaxy::fabric
