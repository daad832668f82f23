#include "nmd/ib_json.h"

#include <fmt/format.h>

#include "fabric/topology.h"

namespace galaxy::nmd {

std::string ib_node_id(const nm::IbSubnet& net, uint32_t node) {
  const nm::IbNode& n = net.nodes[node];
  return fabric::guid_name(n.is_switch() ? 'S' : 'H', n.info.node_guid);
}

nlohmann::json ib_endpoint_json(const nm::IbSubnet& net, nm::IbEndpoint e) {
  const nm::IbNode& n = net.nodes[e.node];
  return {{"name", ib_node_id(net, e.node)},
          {"guid", fmt::format("{:#018x}", n.info.node_guid)},
          {"description", n.description},
          {"port", e.port},
          {"lid", net.held_lid(e)}};
}

nlohmann::json ib_trace_json(const nm::IbSubnet& net, const nm::IbTrace& tr) {
  nlohmann::json hops = nlohmann::json::array();
  for (const auto& h : tr.hops) {
    nlohmann::json hop = ib_endpoint_json(net, {h.node, 0});
    hop.erase("port");
    hop["in_port"] = h.in_port;
    hop["out_port"] =
        h.out_port == wire::kLftNoPort ? nlohmann::json(nullptr) : nlohmann::json(h.out_port);
    hop["out_state"] = h.out_state ? wire::ib_port_state_name(h.out_state) : "";
    hops.push_back(std::move(hop));
  }
  nlohmann::json j{{"fabric", "ib"},
                   {"src", ib_endpoint_json(net, tr.src)},
                   {"dst", ib_endpoint_json(net, tr.dst)},
                   {"dlid", tr.dlid},
                   {"reachable", tr.reachable},
                   {"hops", hops},
                   {"hop_count", tr.hops.size()},
                   {"requests", tr.requests}};
  if (!tr.reachable) {
    j["failure"] = nm::trace_failure_name(tr.failure);
    j["failed_hop"] = tr.failed_hop;
    j["reason"] = tr.reason;
  }
  return j;
}

nlohmann::json ib_counters_json(const wire::PortCounters& c) {
  nlohmann::json counters = nlohmann::json::object();
  wire::for_each_port_counter_field(c, [&](const char* name, wire::CounterKind kind, size_t,
                                           unsigned, unsigned, unsigned, const auto& v) {
    if (kind != wire::CounterKind::kSelect) counters[name] = v;
  });
  return counters;
}

nlohmann::json ib_port_scan_json(const nm::IbSubnet& net, const nm::IbPortScan& p) {
  const auto& n = net.nodes[p.port.node];
  nlohmann::json j{{"name", ib_node_id(net, p.port.node)},
                   {"guid", fmt::format("{:#018x}", n.info.node_guid)},
                   {"description", n.description},
                   {"port", p.port.port},
                   {"lid", p.lid},
                   {"state", wire::ib_port_state_name(p.state)},
                   {"read", p.read}};
  if (!p.read) {
    j["error"] = p.error;
  } else {
    j["counters"] = ib_counters_json(p.counters);
    j["errors"] = p.errors();
  }
  return j;
}

nlohmann::json ib_sweep_json(const nm::IbSweepReport& r) {
  nlohmann::json j{{"subnet_up", r.subnet_up},
                   {"switches", r.switches},
                   {"ca_ports", r.ca_ports},
                   {"links", r.links},
                   {"lids_assigned", r.lids.assigned},
                   {"lids_kept", r.lids.kept},
                   {"max_lid", r.lids.max_lid},
                   {"sm_lid", r.sm_lid},
                   {"engine", r.engine},
                   {"lft_blocks", r.lft_blocks},
                   {"port_sets", r.port_sets},
                   {"ports_active", r.ports_active},
                   {"ports_not_active", r.ports_not_active},
                   {"unreachable_routes", r.unreachable},
                   {"max_paths_per_port", r.max_paths_per_port},
                   {"max_lids_per_port", r.max_lids_per_port},
                   {"smps_sent", r.smps.sent},
                   {"smps_answered", r.smps.answered},
                   {"smps_retried", r.smps.retries},
                   {"smps_failed", r.smps.failed},
                   {"smps_error_status", r.smps.error_status},
                   {"smp_window", r.window},
                   {"discover_s", r.discover_s},
                   {"route_s", r.route_s},
                   {"program_s", r.program_s},
                   {"activate_s", r.activate_s},
                   {"total_s", r.total_s},
                   {"problems", r.problems}};
  j["malformed_requests"] = r.malformed_requests;
  j["mkey_violations"] = r.mkey_violations;
  j["sa"] = {{"requests", r.sa.requests},     {"answered", r.sa.answered},
             {"refused", r.sa.refused},       {"truncated", r.sa.truncated},
             {"traps", r.sa.traps},           {"reports", r.sa.reports},
             {"suppressed", r.sa.suppressed}, {"subscriptions", r.subscriptions}};
  if (!r.fallback_from.empty())
    j["routing_fallback"] = {{"from", r.fallback_from}, {"reason", r.fallback_reason}};
  j["role"] = r.role;
  nlohmann::json sms = nlohmann::json::array();
  for (const nm::IbSmSeen& sm : r.sms) sms.push_back(ib_sm_json(sm));
  j["sms"] = std::move(sms);
  j["master"] = r.master ? ib_sm_json(*r.master) : nlohmann::json(nullptr);
  if (r.handed_over_to) j["handed_over_to"] = fmt::format("{:#018x}", r.handed_over_to);
  if (r.handed_over_by) j["handed_over_by"] = fmt::format("{:#018x}", r.handed_over_by);
  return j;
}

nlohmann::json ib_sm_json(const nm::IbSmSeen& sm) {
  nlohmann::json j{{"port", sm.port.port}, {"lid", sm.lid}, {"answered", sm.answered}};
  if (!sm.answered) {
    j["error"] = sm.error;
    return j;
  }
  j["guid"] = fmt::format("{:#018x}", sm.info.guid);
  j["priority"] = sm.info.priority;
  j["state"] = wire::sm_state_name(sm.info.sm_state);
  j["act_count"] = sm.info.act_count;
  return j;
}

}  // namespace galaxy::nmd
