// What the console shows of the fabric, as one immutable snapshot rebuilt after discovery, each
// scan and each fault: every chip of the described fabric (its name, physical location, network
// level) with what the management server knows of it (discovered, answering), and every port
// with its link state and the rates of the last two scans. Readers (topology, traffic, metrics)
// take the snapshot without the session's lock.
//
// The topology answer is aggregated (docs/system.md 2.6: the operators zoom from the whole machine
// to one chip): at any zoom level the nodes are the groups one level below the path — cabinets,
// chassis, switches or network levels, then chips — and the links between two groups are one
// edge with counts, so a TH-2 answer has at most a few hundred nodes, never 70,000 edges.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/topology.h"
#include "wire/ib_perf.h"

namespace galaxy::nmd {

enum class LinkView : uint8_t { kDown, kTraining, kUp, kFree };
const char* link_view_name(LinkView l);  // "down", "training", "up", "free"

struct PortView {
  uint32_t peer = fabric::kNoNode;  // plan node at the other end (the described cabling)
  uint8_t peer_port = 0;
  LinkView link = LinkView::kFree;
  float utilisation = 0;  // TX flits x 198 bits / (interval x 112 Gbit/s), last two scans
  float retransmissions_per_s = 0;
  float crc_errors_per_s = 0;
  bool scanned = false;
  std::array<uint64_t, 10> registers{};  // the last scan's status registers (nm/scan.h order)
};

struct ChipView {
  std::string name;
  fabric::NodeKind kind = fabric::NodeKind::kNrc;
  fabric::Location location;
  uint8_t level = 0;
  uint32_t first_port = 0;
  uint8_t ports = 0;
  int hops = -1;  // NRCs between the server and the chip; -1: not discovered
  bool responding = true;
  bool in_region = true;  // managed by this daemon (--region)
  uint32_t faults = 0;    // unacknowledged faults and alarms
  // TEMPERATURE and VOLTAGE as the last scan read them; NaN before a scan read them.
  float temperature_c = std::numeric_limits<float>::quiet_NaN();
  float voltage_mv = std::numeric_limits<float>::quiet_NaN();
};

struct FabricView {
  std::vector<ChipView> chips;      // by plan node = chip id
  std::vector<PortView> ports;      // chips[n].first_port + p
  std::vector<uint32_t> nic_chips;  // the discovered NICs' chip ids, in discovery order
  // The described fabric, for names users give (descriptions, GUIDs) and identities; owned by
  // the daemon's session, which outlives every snapshot and the HTTP server that reads them.
  const fabric::Topology* plan = nullptr;
  // A plan the snapshot keeps alive itself (an InfiniBand subnet's, rebuilt by every sweep that
  // changes it); null when the daemon's session owns the plan.
  std::shared_ptr<const fabric::Topology> plan_owner;
  // The number users give a chip's first port: 0 on Galaxy's fabrics, 1 on InfiniBand (IBA
  // numbers ports from 1; a switch's port 0 is its management port, which has no link).
  uint8_t port_base = 0;
  // InfiniBand: the last scan's PortCounters by port slot (ports[] order); empty elsewhere.
  std::vector<wire::PortCounters> ib_counters;
  int64_t built_us = 0;
  uint64_t scans = 0;
  double scan_interval_s = 0;  // simulated/real seconds between the last two scans

  const PortView& port(uint32_t node, uint8_t p) const { return ports[chips[node].first_port + p]; }
  uint32_t links() const;       // linked port pairs of the plan
  uint32_t links_down() const;  // of those, down or not found by discovery
  struct LinkCounts {
    uint32_t links = 0, down = 0;
  };
  LinkCounts link_counts() const;  // both in one pass over the ports
};

// One ChipView per node of `plan` (name, kind, location, level, its slots in `ports`) and the
// ports, free; v.plan set. The caller adds what it knows (discovery, links, scans).
void init_from_plan(FabricView& v, const fabric::Topology& plan);

// The part of a fabric one daemon manages ("Several daemons may each manage one region"):
// "cabinet=0-71", "cabinet=3,chassis=0-1", "level=1" — every clause must hold; "" = everything.
struct Region {
  struct Clause {
    std::string key;  // cabinet, chassis, switch or level
    int64_t lo = 0, hi = 0;
  };
  std::vector<Clause> clauses;
  std::string text;
  bool contains(const fabric::Location& l, uint8_t level) const;
};
Result<Region> parse_region(const std::string& text);

// "cabinet 3/chassis 1/switch 12", the parts that apply; "" when none does.
std::string location_text(const fabric::Location& l);

// GET /api/topology: view "physical" or "logical", path "3/1" (group values).
Result<nlohmann::json> topology_json(const FabricView& v, const std::string& view,
                                     const std::string& path);
// GET /api/traffic: one cell per group ("link", "chip", "switch", "chassis", "cabinet",
// "level"); "link" is every link of the fabric (75,664 on TH-2: 10 MB), the others aggregate.
Result<nlohmann::json> traffic_json(const FabricView& v, const std::string& group);
// A chip named as fabric::Topology::resolve takes it (id, nic:<index> in the file's order, name,
// description, GUID) or by the name discovery gives ("nrc12"), without the session: the same
// names Daemon::resolve accepts.
Result<uint32_t> resolve_in_view(const FabricView& v, const std::string& text);
// One chip with its ports (GET /api/chips/{chip}).
nlohmann::json chip_json(const FabricView& v, uint32_t node, bool with_ports);

}  // namespace galaxy::nmd
