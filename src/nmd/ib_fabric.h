// The daemon's InfiniBand subnet (`galaxy nmd --fabric ib:[<adapter>[:<port>]]`, docs/system.md 3):
// Galaxy is the subnet's SM (nm/ib_sm.h) and the daemon serves the subnet on the console and
// the API as it serves Galaxy's fabrics: heavy sweeps on the sweep schedule (discovery, LIDs,
// routes, forwarding tables, ports ACTIVE), PortCounters scans on the scan schedule, path traces
// and forwarding tables read from the switches. What IBA has no equivalent for (registers,
// EEPROM, BIST, injected link faults) is refused by the daemon with a clear error.
//
// The chips the console shows are the nodes ever found, by node GUID, in the order first found:
// a node a later sweep no longer finds stays, not discovered; a link it no longer finds stays,
// down. Ports are IBA's, from 1 (the view's port p is IB port p + 1).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ib/smp_port.h"
#include "nm/ib_scan.h"
#include "nm/ib_sm.h"
#include "nmd/event_store.h"
#include "nmd/fabric_view.h"

namespace galaxy::nmd {

class IbFabric {
 public:
  using NoteFn = std::function<void(Event)>;
  // Opens the management port; nothing is sent yet. `note` records what sweeps and scans find;
  // `sm` sets the SM's priority against other SMs (SMInfo, 0-15), its SM_Key and the M_Key it
  // places (its routing engine is the sweep's).
  static Result<std::unique_ptr<IbFabric>> open(const std::string& spec, NoteFn note,
                                                const nm::IbSmOptions& sm = {});
  // A port of the caller's (tests: a modelled subnet).
  IbFabric(std::unique_ptr<ib::SmpPort> port, NoteFn note, const nm::IbSmOptions& sm = {});

  // A heavy sweep routed by `engine` (nm::IbSubnetManager::sweep); "none": discovery and a check
  // of the tables the switches hold, nothing written (IbSubnetManager::audit). Nodes and links
  // gone or new since the previous sweep, ports not ACTIVE and a routing fallback are recorded.
  // -> the sweep's report (nmd/ib_json.h ib_sweep_json) with "changed".
  Result<nlohmann::json> sweep(const std::string& engine);
  // Every port's PortCounters (nm/ib_scan.h), with rates against the previous scan; error
  // counters that rose are recorded. -> the scan's summary.
  Result<nlohmann::json> scan();
  // GET /api/trace: two ports named as users name them (nmd/ib_json.h ib_trace_json).
  Result<nlohmann::json> trace(const std::string& src, const std::string& dst);
  // One node's PortCounters read now, with the changes since the previous read of it.
  Result<nlohmann::json> chip_status(const std::string& chip);
  // A switch's linear forwarding table as the SM wrote it (or, engine none, found it): runs of
  // LIDs with one output port.
  Result<nlohmann::json> chip_routes(const std::string& chip);

  // Makes the daemon's port an SM's (IsSM) that answers other SMs' SMInfo (nm::IbSubnetManager::
  // serve_sm_info), so that an OpenSM beside it finds a master and stands by.
  Status serve_sm_info() { return sm_.serve_sm_info(); }
  // Answers what other SMs asked meanwhile, waiting up to `timeout_ms`.
  void serve(int timeout_ms) { port_->serve(timeout_ms); }
  // Whether the scheduled sweep must be a heavy one: always before the first and after a
  // standby's; else a light sweep decides (nm::IbSubnetManager::light_sweep).
  bool heavy_sweep_due();
  // Another SM handed this one the subnet (SMInfo HANDOVER): the daemon sweeps at once.
  bool handover_received() const { return sm_.handover_received(); }
  // An SMInfo Set DISCOVER asked for a sweep now.
  bool discover_requested() const { return sm_.state() == wire::SmState::kDiscovering; }

  // The console's snapshot of the subnet now (the daemon adds its fault counts).
  std::shared_ptr<FabricView> view() const;
  // The last sweep's routing, as GET /api/routes shows it; null before the first sweep.
  const nlohmann::json& routes_summary() const { return routes_summary_; }
  // A chip named as fabric::Topology::resolve takes it (id, description, GUID, GUID name) or
  // as IbSubnet::find does (a LID) -> its chip id.
  Result<uint32_t> resolve(const std::string& text) const;
  const fabric::Topology& plan() const { return *plan_; }

 private:
  struct Chip {
    uint64_t guid = 0;
    bool is_switch = false;
    uint8_t ports = 0;              // IBA's NumPorts
    uint32_t node = nm::kNoIbNode;  // in the last sweep's subnet; kNoIbNode: not found by it
  };
  // A link between two chips' IB ports, the lower end first.
  using LinkKey = std::tuple<uint32_t, uint8_t, uint32_t, uint8_t>;
  struct PortRead {
    wire::PortCounters counters;
    int64_t at_us = 0;
  };
  struct PortRates {
    float utilisation = 0, recoveries_per_s = 0, errors_per_s = 0;
  };

  // Chips for the nodes of the last sweep (new GUIDs appended), the links it found; records
  // what changed since the previous sweep (none before the `first`). -> whether anything did.
  bool adopt_subnet(bool first);
  void rebuild_plan();
  Result<nm::IbEndpoint> endpoint(const std::string& text) const;
  uint32_t chip_of_node(uint32_t node) const;

  std::unique_ptr<ib::SmpPort> port_;
  NoteFn note_;
  nm::IbSubnetManager sm_;
  bool swept_ = false;
  std::vector<Chip> chips_;
  std::unordered_map<uint64_t, uint32_t> chip_of_guid_;
  std::vector<uint32_t> chip_of_node_;  // by node of the last sweep's subnet
  std::set<LinkKey> links_now_, links_ever_;
  std::shared_ptr<const fabric::Topology> plan_;
  std::vector<uint8_t> levels_;  // by chip: 0 a CA, else 1 + switches to the nearest CA
  nlohmann::json routes_summary_;
  std::map<std::pair<uint32_t, uint8_t>, PortRead> last_read_;  // (chip, IB port)
  std::map<std::pair<uint32_t, uint8_t>, PortRates> rates_;
  std::map<uint32_t, std::pair<nm::IbScan, int64_t>> chip_reads_;  // chip_status's previous
  uint64_t scans_ = 0;
  double scan_interval_s_ = 0;
};

}  // namespace galaxy::nmd
