// API: the daemon's status, the topology at a zoom level, the chip list and one chip, the
// traffic heat map, path trace and routing (docs/api.md).
#include <fmt/format.h>

#include "nm/routing.h"
#include "nmd/api.h"
#include "nmd/daemon.h"
#include "nmd/ops.h"

namespace galaxy::nmd {

namespace {

std::string query_or(const ApiRequest& r, const std::string& name, const std::string& fallback) {
  auto it = r.query.find(name);
  return it == r.query.end() || it->second.empty() ? fallback : it->second;
}

// A periodic job's runs: how many, how often, the last one's length and start.
void periodic_json(nlohmann::json& out, uint64_t count, double interval_s, double last_s,
                   int64_t last_us) {
  out["count"] = count;
  out["interval_s"] = interval_s;
  out["last_s"] = last_s;
  out["last_us"] = last_us;
}

Result<nlohmann::json> status(Daemon& d, const ApiRequest&) {
  auto v = d.view();
  const ConfigState c = d.config();
  const DaemonCounters k = d.counters();
  // Built member by member: the most polled answer, and a nested initializer list copies every
  // value once more.
  nlohmann::json j = nlohmann::json::object();
  j["fabric"] = d.options().session.fabric;
  j["kind"] = d.infiniband()                                      ? "ib"
              : d.options().session.fabric.rfind("live:", 0) == 0 ? "live"
                                                                  : "sim";
  j["chips"] = v->chips.size();
  const FabricView::LinkCounts links = v->link_counts();
  j["links"] = links.links;
  j["links_down"] = links.down;
  j["started_us"] = d.started_us();
  j["uptime_s"] = static_cast<double>(d.clock_us() - d.started_us()) / 1e6;
  j["routing_engine"] = c.routing_engine;
  j["region"] = d.region().text.empty() ? "whole fabric" : d.region().text;
  nlohmann::json& scan = j["scan"];
  periodic_json(scan, k.scans, c.scan_interval_s, k.last_scan_s, k.last_scan_us);
  scan["running"] = k.scan_running;
  scan["chips_done"] = k.scan_chips_done;
  scan["chips_total"] = k.scan_chips_total;
  periodic_json(j["sweep"], k.sweeps, c.sweep_interval_s, k.last_sweep_s, k.last_sweep_us);
  j["faults_received"] = k.faults;
  nlohmann::json& ledger = j["fault_ledger"];
  ledger["reports_merged"] = k.faults_merged;
  ledger["changes_inferred"] = k.faults_inferred;
  ledger["chips_checked"] = k.chips_checked;
  ledger["audits"] = k.audits;
  ledger["reroute_failures"] = k.reroute_failures;
  j["reroutes"] = k.reroutes;
  j["rerouting"] = k.rerouting;
  j["events_db"] = d.events().path();
  j["writes_need_token"] = true;
  uint32_t nics = 0, discovered = 0, silent = 0, managed = 0;
  for (const ChipView& cv : v->chips) {
    managed += cv.in_region;
    nics += cv.kind == fabric::NodeKind::kNic;
    discovered += cv.hops >= 0;
    silent += !cv.responding;
  }
  j["nics"] = nics;
  j["nrcs"] = v->chips.size() - nics;
  j["discovered"] = discovered;
  j["not_responding"] = silent;
  j["chips_in_region"] = managed;
  j["unacknowledged"] = d.open_fault_counts();
  // The protection this server places (never the key itself).
  const nm::MKeyPolicy& mk = d.options().mkey;
  j["mkey"] = mk.enabled() ? nlohmann::json{{"protected", true},
                                            {"per_chip", mk.per_chip},
                                            {"level", mk.level},
                                            {"lease_s", mk.lease_s}}
                           : nlohmann::json{{"protected", false}};
  // Galaxy fabrics: this server among the fabric's servers (master or standby, and the others).
  if (!d.infiniband()) j["sm"] = d.sm_json();
  return j;
}

Result<nlohmann::json> topology(Daemon& d, const ApiRequest& r) {
  return topology_json(*d.view(), query_or(r, "view", "physical"), query_or(r, "path", ""));
}

Result<nlohmann::json> traffic(Daemon& d, const ApiRequest& r) {
  return traffic_json(*d.view(), query_or(r, "group", "switch"));
}

Result<nlohmann::json> chips(Daemon& d, const ApiRequest& r) {
  auto v = d.view();
  const std::string q = query_or(r, "q", "");
  const std::string kind = query_or(r, "kind", "");
  if (!kind.empty() && kind != "nic" && kind != "nrc")
    return make_error(Code::kInvalidArgument, 8231,
                      fmt::format("kind = '{}' is not nic or nrc", kind));
  auto offset = query_int(r, "offset", 0, INT32_MAX, 0);
  if (!offset.ok()) return offset.error();
  auto limit = query_int(r, "limit", 1, 10000, 100);
  if (!limit.ok()) return limit.error();
  nlohmann::json list = nlohmann::json::array();
  int64_t total = 0;
  for (uint32_t n = 0; n < v->chips.size(); ++n) {
    const ChipView& c = v->chips[n];
    if (!kind.empty() && kind != fabric::node_kind_name(c.kind)) continue;
    if (!q.empty() && c.name.find(q) == std::string::npos &&
        location_text(c.location).find(q) == std::string::npos && std::to_string(n) != q)
      continue;
    if (total >= *offset && static_cast<int64_t>(list.size()) < *limit)
      list.push_back(chip_json(*v, n, false));
    ++total;
  }
  return nlohmann::json{{"total", total}, {"offset", *offset}, {"chips", list}};
}

// The console's history plots: the fabric's series, a chip's (chip=) or a port's (chip= and
// port=), points after since_us.
Result<nlohmann::json> history(Daemon& d, const ApiRequest& r) {
  auto v = d.view();
  std::optional<uint32_t> chip, port;
  if (auto it = r.query.find("chip"); it != r.query.end() && !it->second.empty()) {
    auto node = resolve_in_view(*v, it->second);
    if (!node.ok()) return node.error();
    chip = *node;
  }
  if (r.query.contains("port")) {
    auto p = query_int(r, "port", 0, 255, 0);
    if (!p.ok()) return p.error();
    port = static_cast<uint32_t>(*p);
  }
  auto since = query_int(r, "since_us", -1, INT64_MAX, -1);
  if (!since.ok()) return since.error();
  return d.history().query(*v, chip, port, *since);
}

Result<nlohmann::json> chip(Daemon& d, const ApiRequest& r) {
  auto v = d.view();
  auto node = resolve_in_view(*v, r.path.at("chip"));
  if (!node.ok()) return node.error();
  if (!d.in_region(*node))
    return make_error(Code::kNotFound, 8234,
                      fmt::format("chip = '{}' is outside this daemon's region ({})",
                                  r.path.at("chip"), d.region().text));
  nlohmann::json j = chip_json(*v, *node, true);
  EventQuery q{.acknowledged = false, .chip = *node, .limit = 50};
  auto open = d.events().query(q);
  nlohmann::json faults = nlohmann::json::array();
  if (open.ok())
    for (const Event& e : *open)
      if (e.kind == EventKind::kFault || e.kind == EventKind::kAlarm) faults.push_back(to_json(e));
  j["open_faults"] = faults;
  return j;
}

Result<nlohmann::json> trace(Daemon& d, const ApiRequest& r) {
  auto src = r.query.find("src"), dst = r.query.find("dst");
  if (src == r.query.end() || dst == r.query.end())
    return make_error(Code::kInvalidArgument, 8232, "trace needs ?src=<NIC>&dst=<NIC>");
  return d.trace(src->second, dst->second);
}

Result<nlohmann::json> routes_get(Daemon& d, const ApiRequest&) {
  nlohmann::json j = d.routes_json();
  nlohmann::json engines = nlohmann::json::array();
  for (const auto* e : nm::routing_engines().list()) engines.push_back(e->name);
  j["engines"] = engines;
  return j;
}

Result<nlohmann::json> routes_post(Daemon& d, const ApiRequest& r) {
  auto engine = body_string(r, "engine", true);
  if (!engine.ok()) return engine.error();
  return d.route_now(*engine, r.by);
}

}  // namespace

void add_fabric_routes(std::vector<ApiRoute>& routes) {
  routes.push_back({"GET",
                    "/api/status",
                    "Fabric, counts, sweep and scan counters, unacknowledged faults by severity",
                    {},
                    false,
                    status});
  routes.back().reads = ApiReads::kSnapshots;
  routes.push_back(
      {"GET",
       "/api/topology",
       "The fabric at one zoom level, aggregated (groups and bundles of links)",
       {{"view", "query", "string",
         "physical (cabinet/chassis/switch/chip) or logical (level/"
         "switch/chip); default physical"},
        {"path", "query", "string", "group values from the top, e.g. 3/1 (cabinet 3, chassis 1)"}},
       false,
       topology});
  routes.back().reads = ApiReads::kSnapshots;
  routes.back().cached_by = kCachedByView;
  routes.push_back({"GET",
                    "/api/chips",
                    "Chips of the fabric with location, level, discovery and fault counts",
                    {{"q", "query", "string", "substring of the name or location, or a chip id"},
                     {"kind", "query", "string", "nic or nrc"},
                     {"offset", "query", "integer", "first result (default 0)"},
                     {"limit", "query", "integer", "results at most, 1-10000 (default 100)"}},
                    false,
                    chips});
  routes.back().reads = ApiReads::kSnapshots;
  routes.back().cached_by = kCachedByView;
  routes.push_back({"GET",
                    "/api/chips/{chip}",
                    "One chip: location, ports with peers, link states, last scanned counters",
                    {{"chip", "path", "string", "chip id, name or nic:<index>"}},
                    false,
                    chip});
  routes.back().reads = ApiReads::kSnapshots;
  routes.back().cached_by = kCachedByView | kCachedByEvents;
  routes.push_back(
      {"GET",
       "/api/traffic",
       "Heat map cells: per-link utilisation and retransmission rates of the last two scans",
       {{"group", "query", "string", "chip, switch (default), chassis, cabinet or level"}},
       false,
       traffic});
  routes.back().reads = ApiReads::kSnapshots;
  routes.back().cached_by = kCachedByView;
  routes.push_back(
      {"GET",
       "/api/history",
       "Time series of the scans' rates (fabric, chip or port) and of the fault counts",
       {{"chip", "query", "string", "chip id, name or nic:<index>; absent: the whole fabric"},
        {"port", "query", "integer", "a port of that chip (on fabrics whose ports keep history)"},
        {"since_us", "query", "integer", "only points after this time (daemon clock, us)"}},
       false,
       history});
  routes.back().reads = ApiReads::kSnapshots;
  routes.push_back({"GET",
                    "/api/trace",
                    "Path trace between two NICs through the route tables (docs/system.md 2.5.4)",
                    {{"src", "query", "string", "source NIC", true},
                     {"dst", "query", "string", "destination NIC", true}},
                    false,
                    trace});
  routes.push_back({"GET",
                    "/api/metrics",
                    "The Prometheus metrics as JSON (families, samples, histogram buckets)",
                    {},
                    false,
                    [](Daemon& d, const ApiRequest&) -> Result<nlohmann::json> {
                      return d.metrics().to_json();
                    }});
  routes.back().reads = ApiReads::kSnapshots;
  routes.push_back(
      {"GET",
       "/api/openapi.json",
       "This API as an OpenAPI 3.0 document",
       {},
       false,
       [](Daemon&, const ApiRequest&) -> Result<nlohmann::json> { return openapi_json(); }});
  routes.back().reads = ApiReads::kSnapshots;
  routes.push_back(
      {"GET", "/api/routes", "The loaded routing and its verification", {}, false, routes_get});
  routes.back().reads = ApiReads::kSnapshots;
  routes.push_back({"POST",
                    "/api/routes",
                    "Compute, verify and load route tables with an engine now",
                    {{"engine", "body", "string", "routing engine spec, e.g. fattree", true}},
                    true,
                    routes_post});
}

}  // namespace galaxy::nmd
