// The fabric graph: chips (NICs and NRCs) joined by full-duplex port-to-port links.
//
// Sized for the full TH-2 model (docs/system.md 2.7: ~24,000 chips, ~75,000 links): per-node data
// lives in flat vectors and every port has one slot in a flat peer array, so peer() is O(1)
// and the whole TH-2 graph takes a few MiB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/radix.h"
#include "base/status.h"

namespace galaxy::fabric {

enum class NodeKind : uint8_t { kNic, kNrc };

const char* node_kind_name(NodeKind kind);  // "nic" / "nrc"

// The widest switch any layer handles (base/radix.h); ports above 31 are named by the wide
// variant of the management packet (docs/protocol.md). Builders make chips up to this radix.
inline constexpr uint32_t kMaxPorts = kMaxSwitchPorts;
// The widest node a topology holds: InfiniBand numbers ports in 8 bits (1..254; 255 is
// reserved), so any fabric ibnetdiscover prints loads and can be shown, checked and written.
// The chip models stop at kMaxPorts: an engine refuses a wider node by name.
inline constexpr uint32_t kMaxTopologyPorts = 254;
inline constexpr uint32_t kNoNode = UINT32_MAX;

// Where a chip sits in the machine room; -1 = not applicable.
struct Location {
  int32_t cabinet = -1;
  int32_t chassis = -1;
  int32_t switch_index = -1;  // the switch (a box of one or more NRCs) the chip belongs to
  int32_t nrc_index = -1;     // position of the NRC inside a multi-NRC switch
  std::string role;           // "bottom-edge", "leaf", "root-middle", "router", "nic" ...

  bool operator==(const Location&) const = default;
};

// What InfiniBand (or a file) says about a chip beyond the graph: GUID, NodeDescription, LIDs.
// Builders set none; ibnetdiscover input sets what it prints.
struct Identity {
  uint64_t guid = 0;        // node GUID; 0 = unknown
  std::string description;  // NodeDescription ("node018 HCA-1"); "" = none
  // A switch: one LID (its port 0's). A CA: one per port (port p's base LID at [p]; 0 = none).
  std::vector<uint16_t> lids;

  bool empty() const { return guid == 0 && description.empty() && lids.empty(); }
  bool operator==(const Identity&) const = default;
};

// "S-0002c90200400001": the name ibnetdiscover gives a node (S switch, H CA, R router).
std::string guid_name(char prefix, uint64_t guid);
// "0x2c90300500001" or a GUID name "H-0002c90300500001" -> the GUID; nullopt for anything else
// (bare hex is not taken: chip ids and names such as "add1" would read as GUIDs).
std::optional<uint64_t> parse_guid(std::string_view text);

struct PortRef {
  uint32_t node = kNoNode;
  uint8_t port = 0;

  bool operator==(const PortRef&) const = default;
};

class Topology {
 public:
  // Adds a chip and returns its id (ids are dense, in order of addition). NICs also get the
  // next NIC index. Errors: ports == 0 or > kMaxTopologyPorts.
  Result<uint32_t> add_node(NodeKind kind, uint32_t ports, std::string name, Location location = {},
                            uint8_t level = 0);
  // Joins two free ports. Errors: node or port out of range, port already linked, a == b.
  Status connect(PortRef a, PortRef b);

  // Reserve capacity when the final size is known (builders), to keep peak memory low.
  void reserve(uint32_t nodes, uint32_t ports);

  uint32_t num_nodes() const { return static_cast<uint32_t>(kind_.size()); }
  uint32_t num_nodes(NodeKind kind) const {
    return kind == NodeKind::kNic ? num_nics() : num_nodes() - num_nics();
  }
  uint32_t num_nics() const { return static_cast<uint32_t>(nic_nodes_.size()); }
  uint32_t num_nrcs() const { return num_nodes() - num_nics(); }
  uint32_t num_links() const { return num_links_; }

  NodeKind kind(uint32_t node) const { return kind_[node]; }
  bool is_nic(uint32_t node) const { return kind_[node] == NodeKind::kNic; }
  uint32_t num_ports(uint32_t node) const { return first_port_[node + 1] - first_port_[node]; }
  const std::string& name(uint32_t node) const { return name_[node]; }
  const Location& location(uint32_t node) const { return location_[node]; }
  uint8_t level(uint32_t node) const { return level_[node]; }
  // Stored only once some node has one, so generated fabrics pay nothing for them.
  const Identity& identity(uint32_t node) const {
    return node < identity_.size() ? identity_[node] : kNoIdentity;
  }
  void set_identity(uint32_t node, Identity identity);
  bool has_identities() const { return !identity_.empty(); }

  // The far end of a port's link; nullopt when the port is free or out of range.
  std::optional<PortRef> peer(PortRef p) const;

  // Dense NIC numbering 0..num_nics()-1: the destination id of table-routed data packets
  // (docs/system.md 1.2). nic_index() of an NRC is kNoNode.
  uint32_t nic_index(uint32_t node) const { return nic_index_[node]; }
  uint32_t nic_node(uint32_t index) const { return nic_nodes_[index]; }

  // For every node: the number of NRCs on a shortest path from `source` to it, counting the node
  // itself when it is an NRC and never the source (so a NIC's own NRC is 1, and two NICs on one
  // NRC are 1 apart). Paths never pass through a NIC. Unreachable nodes: kNoNode.
  std::vector<uint32_t> bfs_distances(uint32_t source) const;

  // Linear scan; for readers and tests, not for hot paths.
  std::optional<uint32_t> find_node(const std::string& name) const;

  // A chip as users name it (docs/topologies.md "Naming chips"): its id ("12"), "nic:<i>" (the
  // NIC index: the order of the file), its name, its description ("node018 HCA-1"), its GUID
  // name ("H-0002c90300500001") or its GUID ("0x2c90300500001"). A description that several
  // chips share is an error listing them; so is a name that matches nothing.
  Result<uint32_t> resolve(std::string_view text) const;

 private:
  static constexpr uint32_t kFree = UINT32_MAX;

  uint32_t slot(PortRef p) const { return first_port_[p.node] + p.port; }

  std::vector<NodeKind> kind_;
  std::vector<uint8_t> level_;
  std::vector<std::string> name_;
  std::vector<Location> location_;
  std::vector<Identity> identity_;  // empty, or one per node
  static const Identity kNoIdentity;
  std::vector<uint32_t> nic_index_;
  std::vector<uint32_t> nic_nodes_;
  std::vector<uint32_t> first_port_{0};  // node -> first slot; size num_nodes()+1
  // Per port slot: peer node (kFree if the port is unlinked) and peer port.
  std::vector<uint32_t> peer_node_;
  std::vector<uint8_t> peer_port_;
  uint32_t num_links_ = 0;
};

struct FabricStats {
  uint32_t nics = 0;
  uint32_t nrcs = 0;
  uint32_t links = 0;
  // Maximum over NIC pairs of the number of NRCs on a shortest path between them.
  uint32_t max_hops = 0;
  bool connected = true;  // every NIC reaches every other NIC
  // From the server NIC: hop_histogram[h] = number of NRCs with h NRCs strictly between the
  // server and them (the server's own NRC is h = 0). Feeds the status-scan model,
  // docs/system.md 2.8.
  std::vector<uint64_t> hop_histogram;
  uint32_t unreachable_nrcs = 0;  // NRCs the server cannot reach (not in the histogram)
};

// Whole-fabric figures. `server_nic` is a NIC index; out of range (or no NICs) leaves the
// histogram empty.
FabricStats analyze(const Topology& topology, uint32_t server_nic = 0);

// Only the histogram part of analyze(), from the NIC with node id `server_node`.
std::vector<uint64_t> hop_histogram(const Topology& topology, uint32_t server_node,
                                    uint32_t* unreachable_nrcs = nullptr);

}  // namespace galaxy::fabric
