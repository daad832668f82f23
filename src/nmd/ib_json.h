// The JSON of InfiniBand answers, one shape whoever asks: the standalone CLI (`galaxy trace`,
// `galaxy scan` with --fabric ib:) and the daemon serving an IB subnet (GET /api/trace,
// POST /api/scans, GET /api/chips/{chip}/status).
#pragma once

#include <nlohmann/json.hpp>

#include "nm/ib_scan.h"
#include "nm/ib_sm.h"
#include "nm/ib_subnet.h"
#include "nm/ib_trace.h"

namespace galaxy::nmd {

// "S-0002c90200400001" / "H-...": the name ibnetdiscover gives a node.
std::string ib_node_id(const nm::IbSubnet& net, uint32_t node);

// A port as infiniband-diags users name it: ibnetdiscover's node name, GUID, description, port
// number and the LID it holds.
nlohmann::json ib_endpoint_json(const nm::IbSubnet& net, nm::IbEndpoint e);

// A trace: "fabric": "ib", both ends, the DLID, every switch with its in and out ports and the
// out port's state; an unreachable one with its failure, failed hop and reason.
nlohmann::json ib_trace_json(const nm::IbSubnet& net, const nm::IbTrace& trace);

// The counters of a PortCounters answer by their IBA names (the select fields left out).
nlohmann::json ib_counters_json(const wire::PortCounters& c);

// One port of a counters scan: node, port, LID, state and its counters (or why not read).
nlohmann::json ib_port_scan_json(const nm::IbSubnet& net, const nm::IbPortScan& p);

// A sweep's report: what was found, assigned, routed and programmed, the SMPs, the times, the
// problems and the routing fallback (`galaxy sm --json`, the daemon's sweeps).
nlohmann::json ib_sweep_json(const nm::IbSweepReport& r);

// Another SM as discovery found it: its port and LID, and its SMInfo (GUID, priority, state,
// activity count) or why it gave none.
nlohmann::json ib_sm_json(const nm::IbSmSeen& sm);

}  // namespace galaxy::nmd
