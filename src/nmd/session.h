// What every management function needs, in the CLI and in the daemon alike: a fabric (simulated,
// or attached to a live one), the management server's endpoint on NIC 0 (or --server-nic), and
// the fabric map found by discovery.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/live/live_spec.h"
#include "engine/sim/sim_fabric.h"
#include "glex/sim_device.h"
#include "nm/cooperative_port.h"
#include "nm/discovery.h"
#include "nm/glex_port.h"
#include "nm/requester.h"
#include "nm/route_loaded.h"

namespace galaxy::nmd {

struct SessionOptions {
  std::string fabric = "sim:th2";
  std::string host;  // live fabrics: the host whose NIC the server uses ("" = the first local)
  std::string load = "none";
  uint32_t server_nic = 0;
  uint64_t seed = 1;
  bool json = false;
  bool serial = false;  // paper mode: one request at a time
  std::string timing;   // simulated fabrics: the calibration file ("" = the default, TH-2)
  // A map saved by `galaxy discover --save-map` (nm/map_io.h): discover() takes it instead of
  // discovering the fabric, once it is checked against the fabric.
  std::string map_file;
  // Several servers on one simulated fabric in one thread (nmd/sm_campaign.h): the fabric is
  // this one, not built from `fabric`, and the server's waits let the others answer
  // (nm/cooperative_port.h).
  struct Shared {
    std::shared_ptr<sim::SimFabric> fabric;
    std::function<void()> serve_others;
    uint64_t slice_ps = 100'000'000;  // 100 us of simulated time between the others' turns
  } shared;
};

struct Session {
  std::shared_ptr<sim::SimFabric> fabric;       // null on a live fabric
  std::unique_ptr<fabric::Topology> live_plan;  // a live fabric's described topology
  std::vector<live::LiveHost> live_hosts;       // its hosts, and each node's host (monitor boards)
  std::vector<uint16_t> live_host_of;
  const fabric::Topology& plan() const { return fabric ? fabric->topology() : *live_plan; }
  std::unique_ptr<glex_device> device;
  std::unique_ptr<nm::GlexMgmtPort> port;
  std::unique_ptr<nm::CooperativePort> cooperative;  // on a shared fabric: the requester's port
  std::unique_ptr<nm::Requester> requester;
  nm::DiscoveryResult discovery;  // filled by discover()
  bool discovered = false;
};

// Builds the fabric (sim:, file:) or attaches to a running one (live:) and opens the server
// endpoint (no management traffic yet).
Result<Session> open_session(const SessionOptions& o);
// Runs discovery (pipelined unless o.serial) and keeps the map in the session; with
// o.map_file, reads that map instead: it must describe this fabric (E5708) as the server's NIC
// sees it (E5709).
Status discover(Session& s, const SessionOptions& o);
// open_session + pipelined discovery, the requester then set to the session's mode (serial or
// pipelined): what every command that acts on discovered chips starts with.
Result<Session> open_discovered_session(const SessionOptions& o);
// Requester options for the session's mode.
nm::RequesterOptions requester_options(bool serial);
// A chip named on the command line: a chip id, a node name, or "nic:<index>".
Result<uint32_t> find_node(const Session& s, const std::string& text);
// What the NRCs of a simulated fabric hold, read through the chip models and compared with
// `routes` over `map` (nm/route_loaded.h); nullopt on a live fabric, whose tables are in its
// daemons.
std::optional<nm::LoadedCheck> check_held_tables(const Session& s, const nm::FabricMap& map,
                                                 const nm::RouteSet& routes);
// Commands that change the simulated world itself (link errors, injected faults).
Status require_simulated(const Session& s, const char* what);

}  // namespace galaxy::nmd
