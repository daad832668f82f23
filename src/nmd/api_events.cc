// API: faults and their acknowledgement, the event log, configuration, scans, BIST, bulk
// register writes, and fault injection on simulated fabrics (docs/api.md).
#include <fmt/format.h>

#include "base/json_text.h"
#include "nm/routing.h"
#include "nmd/api.h"
#include "nmd/daemon.h"
#include "nmd/ops.h"

namespace galaxy::nmd {

namespace {

// The filter shared by /api/faults and /api/log.
Result<EventQuery> event_query(const ApiRequest& r) {
  EventQuery q;
  auto since = query_int(r, "since_us", 0, INT64_MAX, INT64_MIN);
  if (!since.ok()) return since.error();
  auto until = query_int(r, "until_us", 0, INT64_MAX, INT64_MAX);
  if (!until.ok()) return until.error();
  auto chip = query_int(r, "chip", 0, wire::kMaxChipId, -1);
  if (!chip.ok()) return chip.error();
  auto limit = query_int(r, "limit", 1, 10000, 200);
  if (!limit.ok()) return limit.error();
  auto after = query_int(r, "after_id", 0, INT64_MAX, 0);
  if (!after.ok()) return after.error();
  q.since_us = *since;
  q.until_us = *until;
  q.chip = *chip;
  q.limit = static_cast<size_t>(*limit);
  q.after_id = *after;
  q.newest_first = q.after_id == 0;
  if (auto it = r.query.find("location"); it != r.query.end()) {
    if (it->second.size() > kMaxEventLocationChars)
      return make_error(Code::kInvalidArgument, 8250,
                        fmt::format("location filter of {} characters: at most {}",
                                    it->second.size(), kMaxEventLocationChars));
    q.location_contains = it->second;
  }
  if (auto it = r.query.find("min_severity"); it != r.query.end() && !it->second.empty()) {
    auto s = parse_event_severity(it->second);
    if (!s.ok()) return s.error();
    q.min_severity = *s;
  }
  if (auto it = r.query.find("kind"); it != r.query.end() && !it->second.empty()) {
    auto k = parse_event_kind(it->second);
    if (!k.ok()) return k.error();
    q.kind = *k;
  }
  if (auto it = r.query.find("acknowledged"); it != r.query.end() && !it->second.empty()) {
    if (it->second != "true" && it->second != "false")
      return make_error(Code::kInvalidArgument, 8251,
                        fmt::format("acknowledged = '{}' is not true or false", it->second));
    q.acknowledged = it->second == "true";
  }
  return q;
}

nlohmann::json event_list(const std::vector<Event>& events) {
  nlohmann::json out = nlohmann::json::array();
  for (const Event& e : events) out.push_back(to_json(e));
  return out;
}

Result<nlohmann::json> faults(Daemon& d, const ApiRequest& r) {
  auto q = event_query(r);
  if (!q.ok()) return q.error();
  if (q->kind && *q->kind != EventKind::kFault && *q->kind != EventKind::kAlarm)
    return make_error(Code::kInvalidArgument, 8252,
                      "kind: /api/faults lists fault and alarm events (see /api/log for others)");
  std::vector<Event> out;
  for (EventKind k : {EventKind::kFault, EventKind::kAlarm}) {
    if (q->kind && *q->kind != k) continue;
    EventQuery one = *q;
    one.kind = k;
    auto got = d.events().query(one);
    if (!got.ok()) return got.error();
    out.insert(out.end(), got->begin(), got->end());
  }
  std::sort(out.begin(), out.end(), [&](const Event& a, const Event& b) {
    return q->newest_first ? std::tie(a.time_us, a.id) > std::tie(b.time_us, b.id) : a.id < b.id;
  });
  if (out.size() > q->limit) out.resize(q->limit);
  nlohmann::json j{{"faults", event_list(out)}, {"unacknowledged", d.open_fault_counts()}};
  return j;
}

Result<nlohmann::json> ack(Daemon& d, const ApiRequest& r) {
  auto id = parse_int("id", r.path.at("id"), 1, INT64_MAX);
  if (!id.ok()) return id.error();
  auto by = body_string(r, "by", false);
  if (!by.ok()) return by.error();
  const std::string who = by->empty() ? r.by : *by;
  auto got = d.events().query(EventQuery{.limit = 1, .id = *id});
  if (!got.ok()) return got.error();
  if (got->empty() || got->front().id != *id)
    return make_error(Code::kNotFound, 8253, fmt::format("event id = {} does not exist", *id));
  if (got->front().kind != EventKind::kFault && got->front().kind != EventKind::kAlarm)
    return make_error(Code::kInvalidArgument, 8254,
                      fmt::format("event id = {} is a {}, not a fault or alarm", *id,
                                  event_kind_name(got->front().kind)));
  GALAXY_TRY(d.events().acknowledge(*id, who, d.clock_us()));
  d.refresh_fault_counts();
  auto after = d.events().query(EventQuery{.limit = 1, .id = *id});
  if (!after.ok() || after->empty()) return make_error(Code::kNotFound, 8255, "event vanished");
  return to_json(after->front());
}

Result<nlohmann::json> log(Daemon& d, const ApiRequest& r) {
  auto q = event_query(r);
  if (!q.ok()) return q.error();
  auto got = d.events().query(*q);
  if (!got.ok()) return got.error();
  // The store's running count: counting the rows would read every one of them.
  return nlohmann::json{{"events", event_list(*got)}, {"total", d.events().size()}};
}

// The routing engine registry as the API describes it (the registry is complete before main).
const nlohmann::json& engines_json() {
  static const nlohmann::json engines = [] {
    nlohmann::json out = nlohmann::json::array();
    for (const auto* e : nm::routing_engines().list()) {
      nlohmann::json params = nlohmann::json::array();
      for (const auto& p : e->params)
        params.push_back(
            {{"name", p.name}, {"type", p.type}, {"doc", p.doc}, {"default", p.default_value}});
      out.push_back({{"name", e->name}, {"doc", e->summary}, {"params", params}});
    }
    return out;
  }();
  return engines;
}

Result<nlohmann::json> config_get(Daemon& d, const ApiRequest&) {
  const ConfigState c = d.config();
  const nlohmann::json& engines = engines_json();
  return nlohmann::json{{"routing_engine", c.routing_engine},
                        {"scan_interval_s", c.scan_interval_s},
                        {"sweep_interval_s", c.sweep_interval_s},
                        {"fault_mask", c.fault_mask},
                        {"fault_mask_hex", fmt::format("0x{:x}", c.fault_mask)},
                        {"engines", engines}};
}

Result<nlohmann::json> config_put(Daemon& d, const ApiRequest& r) {
  if (!r.body.is_object())
    return make_error(Code::kInvalidArgument, 8256, "PUT /api/config needs a JSON object body");
  GALAXY_TRY(d.set_config(r.body, r.by));
  return config_get(d, r);
}

Result<nlohmann::json> config_writes(Daemon& d, const ApiRequest& r) {
  if (!r.body.is_object() || !r.body.contains("writes"))
    return make_error(Code::kInvalidArgument, 8257,
                      "the body needs 'writes': [{\"chip\", \"addr\", \"value\"}, ...]");
  GALAXY_TRY(d.require_galaxy("bulk register writes"));
  const std::string text = json_text(r.body);
  auto out = d.with_session([&](Session& s) { return config_apply_op(s, text); });
  if (out.ok()) {
    Event e;
    e.kind = EventKind::kConfigChange;
    e.cause = "bulk register writes";
    e.severity = (*out)["failed"].get<size_t>() ? EventSeverity::kMinor : EventSeverity::kInfo;
    e.detail = json_text(
        nlohmann::json{{"applied", (*out)["applied"]}, {"failed", (*out)["failed"]}, {"by", r.by}});
    (void)d.record(std::move(e));
  }
  return out;
}

Result<nlohmann::json> scans_get(Daemon& d, const ApiRequest& r) {
  auto limit = query_int(r, "limit", 1, 1000, 20);
  if (!limit.ok()) return limit.error();
  EventQuery q{.kind = EventKind::kScanSummary, .limit = static_cast<size_t>(*limit)};
  auto got = d.events().query(q);
  if (!got.ok()) return got.error();
  nlohmann::json out = nlohmann::json::array();
  for (const Event& e : *got) {
    nlohmann::json j = nlohmann::json::parse(e.detail, nullptr, false);
    if (j.is_discarded()) j = nlohmann::json::object();
    j["id"] = e.id;
    j["time_us"] = e.time_us;
    j["severity"] = event_severity_name(e.severity);
    out.push_back(std::move(j));
  }
  return nlohmann::json{{"scans", out}};
}

Result<nlohmann::json> scans_post(Daemon& d, const ApiRequest&) {
  return d.scan_now();
}

Result<nlohmann::json> discover_post(Daemon& d, const ApiRequest&) {
  return d.sweep_now();
}

Result<nlohmann::json> inject(Daemon& d, const ApiRequest& r) {
  auto action = body_string(r, "action", true);
  if (!action.ok()) return action.error();
  auto chip = body_string(r, "chip", true);
  if (!chip.ok()) return chip.error();
  int64_t port = -1;
  if (*action != "chip-down") {
    if (!r.body.contains("port") || !r.body["port"].is_number_integer())
      return make_error(Code::kInvalidArgument, 8258, "the body needs 'port': an integer");
    port = r.body["port"].get<int64_t>();
    if (port < 0 || port > 255)
      return make_error(Code::kOutOfRange, 8259, fmt::format("port = {} is out of range", port));
  }
  auto code = body_string(r, "code", *action == "fault");
  if (!code.ok()) return code.error();
  auto out = d.inject(*action, *chip, static_cast<int>(port), *code, r.by);
  if (!out.ok()) return out.error();
  (*out)["injected"] = *action;
  return out;
}

Result<nlohmann::json> bist(Daemon& d, const ApiRequest& r) {
  GALAXY_TRY(d.require_galaxy("BIST"));
  auto chip = body_string(r, "chip", true);
  if (!chip.ok()) return chip.error();
  nm::BistOptions o;
  auto num = [&](const char* k, double lo, double hi, double fallback) -> Result<double> {
    if (!r.body.contains(k)) return fallback;
    const auto& v = r.body[k];
    if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi)
      return make_error(
          Code::kOutOfRange, 8260,
          fmt::format("{} = {} must be a number in [{}, {}]", k, json_text(v), lo, hi));
    return v.get<double>();
  };
  auto duration = num("duration_us", 1, 65535, 100);
  if (!duration.ok()) return duration.error();
  auto intensity = num("intensity_percent", 0, 100, 50);
  if (!intensity.ok()) return intensity.error();
  auto port = num("port", -1, kMaxSwitchPorts - 1, -1);
  if (!port.ok()) return port.error();
  if (r.body.contains("port") && !r.body["port"].is_number_integer())
    return make_error(Code::kInvalidArgument, 8262,
                      fmt::format("port = {} must be an integer", json_text(r.body["port"])));
  o.duration_us = static_cast<uint32_t>(*duration);
  o.intensity_percent = static_cast<uint32_t>(*intensity);
  return d.with_session([&](Session& s) -> Result<nlohmann::json> {
    auto node = d.resolve(s, *chip);
    if (!node.ok()) return node.error();
    GALAXY_TRY(require_remote(s, *node, *chip));
    const nm::FabricMap& m = s.discovery.map;
    std::vector<nm::BistPort> ports;
    if (*port < 0) {
      ports = nm::bist_ports_of(m, *node);
    } else {
      const auto p = static_cast<uint8_t>(*port);
      if (p >= m.topology.num_ports(*node) || !m.topology.peer({*node, p}))
        return make_error(Code::kInvalidArgument, 8261,
                          fmt::format("port = {} of '{}' has no link to test", p, *chip));
      ports.push_back({*node, p});
    }
    return bist_op(s, ports, o);
  });
}

}  // namespace

void add_event_routes(std::vector<ApiRoute>& routes) {
  const std::vector<ApiParam> filter{
      {"since_us", "query", "integer", "time_us >= this (wall-clock us since the epoch)"},
      {"until_us", "query", "integer", "time_us < this"},
      {"location", "query", "string", "substring of the location (literal, case-insensitive)"},
      {"min_severity", "query", "string", "info, minor, major or critical"},
      {"acknowledged", "query", "string", "true or false"},
      {"chip", "query", "integer", "chip id"},
      {"kind", "query", "string", "fault, alarm, config_change, scan_summary or log"},
      {"limit", "query", "integer", "results at most, 1-10000 (default 200)"},
      {"after_id", "query", "integer", "only events with a larger id, oldest first"}};
  routes.push_back({"GET", "/api/faults", "Fault and alarm events, newest first, filtered", filter,
                    false, faults});
  routes.back().reads = ApiReads::kSnapshots;
  routes.back().cached_by = kCachedByEvents;
  routes.push_back({"POST",
                    "/api/faults/{id}/ack",
                    "Acknowledge a fault or alarm",
                    {{"id", "path", "integer", "event id"},
                     {"by", "body", "string",
                      "who acknowledges (default: the X-Galaxy-User "
                      "header, else api)"}},
                    true,
                    ack});
  routes.push_back({"GET", "/api/log",
                    "Every event (faults, alarms, configuration changes, scan "
                    "summaries, daemon log), filtered",
                    filter, false, log});
  routes.back().reads = ApiReads::kSnapshots;
  routes.back().cached_by = kCachedByEvents;
  routes.push_back({"GET",
                    "/api/config",
                    "Routing engine, scan and sweep intervals, fault mask; the engine registry",
                    {},
                    false,
                    config_get});
  routes.back().reads = ApiReads::kSnapshots;
  routes.push_back(
      {"PUT",
       "/api/config",
       "Change the routing engine (routes reloaded), intervals or fault mask",
       {{"routing_engine", "body", "string", "engine spec or none"},
        {"scan_interval_s", "body", "number", "seconds between scans, 0 = none, at most 86400"},
        {"sweep_interval_s", "body", "number", "seconds between sweeps, 0 = none, at most 86400"},
        {"fault_mask", "body", "string", "FAULT_MASK, bit per fault code (1 = not reported)"}},
       true,
       config_put});
  routes.push_back({"POST",
                    "/api/config/writes",
                    "Bulk register writes, as galaxy config apply",
                    {{"writes", "body", "array", "[{chip, addr, value}]", true}},
                    true,
                    config_writes});
  routes.push_back({"GET",
                    "/api/scans",
                    "Scan summaries, newest first",
                    {{"limit", "query", "integer", "1-1000 (default 20)"}},
                    false,
                    scans_get});
  routes.back().reads = ApiReads::kSnapshots;
  routes.back().cached_by = kCachedByEvents;
  routes.push_back({"POST", "/api/scans", "Scan the fabric now", {}, true, scans_post});
  routes.push_back({"POST",
                    "/api/discover",
                    "A discovery sweep now: chips and links gone or new; the map, fault reporting "
                    "and routing updated when the fabric changed",
                    {},
                    true,
                    discover_post});
  routes.push_back({"POST",
                    "/api/inject",
                    "Simulated fabrics: take a link down or up, a chip's links down, or make a "
                    "chip raise a fault code (the same operation as `galaxy inject`)",
                    {{"action", "body", "string", "link-down, link-up, chip-down or fault", true},
                     {"chip", "body", "string", "chip id, name or nic:<index>", true},
                     {"port", "body", "integer", "port of the chip (not for chip-down)"},
                     {"code", "body", "string", "fault: a fault name or number 0-7"}},
                    true,
                    inject});
  routes.push_back({"POST",
                    "/api/bist",
                    "Link built-in self-test of one port or every linked port of a chip",
                    {{"chip", "body", "string", "chip id, name or nic:<index>", true},
                     {"port", "body", "integer", "the port (default: every linked port)"},
                     {"duration_us", "body", "number", "1-65535 (default 100)"},
                     {"intensity_percent", "body", "number", "0-100 (default 50)"}},
                    true,
                    bist});
}

}  // namespace galaxy::nmd
