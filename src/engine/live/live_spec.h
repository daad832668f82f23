// A live fabric description (docs/live.md): a topology from a builder spec or a file,
// the hosts that run it, and which host owns each chip. Every process of the fabric parses the
// same description, so every one derives the same assignment.
//
//   live:<topology>[,name=<fabric>],hosts=<host>:<ip>[:<udp port>],<host>:<ip>[:<port>]...
//   e.g. live:fattree:k=4,levels=2,hosts=h1:127.0.0.1,h2:127.0.0.1
//   live:file:<path.json>,hosts=...       (the topology from a file)
//   live:<path>.json                       (all in a file: name, topology, hosts; docs/live.md)
// `hosts=` comes last; host ports default to 7400 + host index. NICs are dealt to hosts in
// contiguous blocks; an NRC goes to the host owning most of its NIC neighbours, otherwise to
// hosts in turn (the spine of a fat tree is spread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/topology.h"

namespace galaxy::live {

struct LiveHost {
  std::string name;
  std::string ip;
  uint16_t port = 0;
};

struct LiveFabric {
  std::string name = "galaxy";  // names the shared segments: /dev/shm/galaxy.<name>.<host>
  std::string spec;             // as given
  fabric::Topology topology;
  std::vector<LiveHost> hosts;
  std::vector<uint16_t> host_of;  // per node

  int host_index(const std::string& host_name) const;
  // A port whose link ends on another host: it runs over UDP.
  bool crosses_hosts(fabric::PortRef p) const;
};

Result<LiveFabric> parse_live_fabric(const std::string& spec);
bool is_live_spec(const std::string& spec);

}  // namespace galaxy::live
