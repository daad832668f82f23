// What the InfiniBand subnet manager knows of its subnet (docs/system.md 3): every node found by
// directed-route discovery with its NodeInfo, description and the directed route that reaches
// it, every port's PortInfo and far end, and the LIDs it assigns. Node and port numbers are
// IBA's: ports[0] is a switch's management port, CA ports count from 1.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "wire/ib_smp.h"

namespace galaxy::nm {

inline constexpr uint32_t kNoIbNode = UINT32_MAX;

struct IbPort {
  bool known = false;  // PortInfo read
  wire::PortInfo info;
  uint32_t peer_node = kNoIbNode;
  uint8_t peer_port = 0;
  // A CA port: the directed route that enters the CA through this port (IBA: a CA's SMA
  // answers and accepts Sets for the port an SMP arrived on).
  std::vector<uint8_t> path;
  uint64_t guid = 0;     // the port GUID (a switch: port 0's; a CA: each entered port's)
  bool entered = false;  // a CA port the SM reached its CA through (path above; a LID)
  uint16_t lid = 0;      // assigned: a switch's port 0, a CA's linked ports
  bool linked() const { return peer_node != kNoIbNode; }
};

struct IbNode {
  wire::NodeInfo info;
  std::string description;
  std::vector<uint8_t> path;  // the directed route to the node (a CA: through its first port)
  wire::SwitchInfo switch_info;
  std::vector<IbPort> ports;  // [0 .. num_ports]
  bool is_switch() const {
    return info.node_type == static_cast<uint8_t>(wire::IbNodeType::kSwitch);
  }
  uint16_t lid() const { return ports.empty() ? 0 : ports[0].lid; }  // a switch's
};

// One port of the subnet as users name it: a CA port, or a switch (port 0).
struct IbEndpoint {
  uint32_t node = kNoIbNode;
  uint8_t port = 0;
  bool operator==(const IbEndpoint&) const = default;
};

// Another subnet manager discovery found: a port whose CapabilityMask says IsSM, and the SMInfo
// it answered (IBA 14.4: what an SM learns of the others before it takes a role).
struct IbSmSeen {
  IbEndpoint port;  // a CA port, or a switch's port 0
  uint16_t lid = 0;
  bool answered = false;
  std::string error;  // why not
  wire::SmInfo info;
};

struct IbSubnet {
  std::vector<IbNode> nodes;  // discovery order; the SM's node first
  std::unordered_map<uint64_t, uint32_t> by_guid;
  uint32_t sm_node = kNoIbNode;
  uint8_t sm_port = 0;
  std::vector<std::string> problems;  // e.g. a link seen differently from its two ends
  std::vector<IbSmSeen> sms;          // the other SMs, as discovery found them

  uint32_t num_switches() const;
  uint32_t num_ca_ports() const;  // linked CA ports: one LID each
  uint64_t num_links() const;
  // The SM's own LID (its switch's, or its CA port's).
  uint16_t sm_lid() const;
  // "S-0002c90200400001" / "H-..." as ibnetdiscover names nodes, and the description.
  std::string name(uint32_t node) const;
  // The LID a port holds as discovery read it (a switch's: port 0's); 0 when none.
  uint16_t held_lid(IbEndpoint e) const;
  // A port named as infiniband-diags users name it: a LID ("12", "lid:12"), a node or port
  // GUID ("0x0002c90200400001"), ibnetdiscover's node name ("S-0002c90200400001", "H-..."), or
  // a node description ("node018 HCA-1"). A CA named by its node is its lowest port discovery
  // entered it by. Errors name the text and why (none, or several nodes share a description).
  Result<IbEndpoint> find(const std::string& text) const;
};

}  // namespace galaxy::nm
