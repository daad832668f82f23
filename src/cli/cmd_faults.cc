// galaxy faults — enable active fault reporting on every chip, collect the reports (time,
// location, cause, severity), and on a link-down re-discover the region and recompute routes.
// On a simulated fabric, --inject makes something happen to report.
#include <chrono>
#include <cstdio>
#include <thread>

#include "base/json_text.h"
#include "base/spec.h"
#include "chip/register_names.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/session.h"
#include "nm/faults.h"
#include "nm/reroute.h"
#include "nm/route_load.h"
#include "nm/routing.h"
#include "nm/scan.h"

namespace galaxy::cli {

namespace {

struct FaultsOptions {
  SessionOptions session;
  std::vector<std::string> inject;  // link-down:CHIP:PORT | link-up:CHIP:PORT
  double watch_us = 100;
  std::string engine;  // route (and re-route after link-down) with this engine
  uint64_t mask = 0;
};

Result<fabric::PortRef> parse_end(const Session& s, const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos)
    return make_error(Code::kInvalidArgument, 9300,
                      fmt::format("'{}': expected CHIP:PORT (chip id or name)", text));
  auto chip = parse_int("chip", text.substr(0, colon), 0, 65534);
  uint32_t node = 0;
  if (chip.ok()) {
    node = static_cast<uint32_t>(*chip);
  } else if (auto n = s.plan().find_node(text.substr(0, colon))) {
    node = *n;
  } else {
    return make_error(Code::kNotFound, 9301,
                      fmt::format("'{}': no such chip", text.substr(0, colon)));
  }
  if (node >= s.plan().num_nodes())
    return make_error(Code::kNotFound, 9302, fmt::format("chip {} is not in the fabric", node));
  auto port = parse_int("port", text.substr(colon + 1), 0, s.plan().num_ports(node) - 1);
  if (!port.ok()) return port.error();
  return fabric::PortRef{node, static_cast<uint8_t>(*port)};
}

// Against daemons: --inject through POST /api/inject, then every daemon's stored faults and
// alarms (GET /api/faults), newest first.
void run_faults_remote(const FaultsOptions& o) {
  const bool json = o.session.json;
  if (!o.engine.empty() || o.mask)
    return report_error(make_error(Code::kUnsupported, 9304,
                                   "against a daemon, --engine and --mask are its configuration: "
                                   "PUT /api/config routing_engine / fault_mask"),
                        json);
  for (const auto& spec : o.inject) {
    auto c1 = spec.find(':'), c2 = spec.rfind(':');
    std::string what = spec.substr(0, c1);
    auto port = c2 == c1 ? Result<uint64_t>(make_error(Code::kInvalidArgument, 9305, "no port"))
                         : chip::parse_u64("port", spec.substr(c2 + 1), 255);
    if ((what != "link-down" && what != "link-up") || c1 == std::string::npos || !port.ok())
      return report_error(make_error(Code::kInvalidArgument, 9306,
                                     fmt::format("--inject '{}': use link-down:CHIP:PORT or "
                                                 "link-up:CHIP:PORT",
                                                 spec)),
                          json);
    const nlohmann::json body{
        {"action", what}, {"chip", spec.substr(c1 + 1, c2 - c1 - 1)}, {"port", *port}};
    auto r = call_first("POST", "/api/inject", &body);
    if (!r.ok()) return report_error(r.error(), json);
  }
  // The reports arrive as the daemon's fabric runs on: give them the watch time, at least 0.5 s.
  if (!o.inject.empty())
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::max<int64_t>(500, static_cast<int64_t>(o.watch_us / 1000))));
  print_all(call_all("GET", "/api/faults?limit=100"), json,
            [](const std::string& server, const nlohmann::json& j) {
              const auto& open = j["unacknowledged"];
              std::printf("%s: unacknowledged: %lld critical, %lld major, %lld minor\n",
                          server.c_str(), open.value("critical", 0LL), open.value("major", 0LL),
                          open.value("minor", 0LL));
              for (const auto& f : j["faults"])
                std::printf(
                    "  #%-6lld %-8s %-5s %-32s %s%s\n", f["id"].get<long long>(),
                    f["severity"].get<std::string>().c_str(), f["kind"].get<std::string>().c_str(),
                    f["location"].get<std::string>().c_str(), f["cause"].get<std::string>().c_str(),
                    f["acknowledged"].get<bool>() ? " (acknowledged)" : "");
            });
}

void run_faults(FaultsOptions& o) {
  bool json = o.session.json;
  if (is_remote()) return run_faults_remote(o);
  auto s = open_session(o.session);
  if (!s.ok()) return report_error(s.error(), json);
  Status d = discover(*s, o.session);
  if (!d.ok()) return report_error(d.error(), json);
  nm::FabricMap& map = s->discovery.map;
  // Against the fabric as built: the reports of links that went down and of chips that went
  // away were sent when it happened, to whoever received them then (not this command), so what
  // discovery found missing is reported as the state it is.
  const fabric::Topology& plan = s->plan();
  const nm::Shortfall gone = nm::shortfall(map, plan);
  nm::RouteSet routes;
  if (!o.engine.empty()) {
    auto r = nm::compute_routes(map, o.engine);
    if (!r.ok()) return report_error(r.error(), json);
    routes = std::move(*r);
    auto load = nm::load_routes(*s->requester, map, routes);
    if (!load.ok()) return report_error(load.error(), json);
  }
  auto setup = nm::enable_fault_reporting(*s->requester, map, o.mask);
  if (!setup.ok()) return report_error(setup.error(), json);

  std::vector<nm::FaultRecord> faults;
  s->requester->set_fault_handler([&](const wire::MgmtPacket& p) {
    faults.push_back(nm::decode_fault(p, map, s->port->now()));
  });
  for (const auto& spec : o.inject) {
    auto c1 = spec.find(':');
    std::string what = spec.substr(0, c1);
    if ((what != "link-down" && what != "link-up") || c1 == std::string::npos)
      return report_error(make_error(Code::kInvalidArgument, 9303,
                                     fmt::format("--inject '{}': use link-down:CHIP:PORT or "
                                                 "link-up:CHIP:PORT",
                                                 spec)),
                          json);
    auto end = parse_end(*s, spec.substr(c1 + 1));
    if (!end.ok()) return report_error(end.error(), json);
    if (Status sim_only = require_simulated(*s, "--inject"); !sim_only.ok())
      return report_error(sim_only.error(), json);
    Status st = s->fabric->set_link(*end, what == "link-up");
    if (!st.ok()) return report_error(st.error(), json);
  }
  s->requester->drain_faults(static_cast<nm::Picoseconds>(o.watch_us * nm::kUs));

  nlohmann::json updates = nlohmann::json::array();
  std::vector<nm::FaultRecord> seen = faults;  // handling may receive more
  for (const auto& f : seen) {
    if (f.cause != "link_down") continue;
    auto upd = nm::rediscover_region(*s->requester, map, f.chip, f.port);
    if (!upd.ok()) return report_error(upd.error(), json);
    nlohmann::json down = nlohmann::json::array();
    for (auto [chip, port] : upd->links_down) down.push_back(fmt::format("{}:{}", chip, port));
    nlohmann::json u{{"after", f.location},
                     {"links_down", down},
                     {"requests", upd->requests},
                     {"routes_changed", upd->routes_changed},
                     {"unreachable", upd->unreachable}};
    if (!o.engine.empty()) {
      auto rr = nm::reroute(*s->requester, map, o.engine, routes);
      if (!rr.ok()) return report_error(rr.error(), json);
      u["reroute"] = {{"engine", o.engine},
                      {"nrcs_reloaded", rr->nrcs_reloaded},
                      {"load_packets", rr->load.packets},
                      {"reachable_pairs", rr->check.reachable_pairs},
                      {"nic_pairs", rr->check.nic_pairs},
                      {"deadlock_free", rr->check.deadlock_free}};
      routes = std::move(rr->routes);
    }
    updates.push_back(u);
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : faults)
    list.push_back({{"time_us", static_cast<double>(f.time) / nm::kUs},
                    {"chip", f.chip},
                    {"location", f.location},
                    {"cause", f.cause},
                    {"severity", f.severity},
                    {"detail", f.detail}});
  auto port_name = [&](fabric::PortRef p) {
    return fmt::format("{} port {}", plan.name(p.node), p.port);
  };
  nlohmann::json links_down = nlohmann::json::array(), unreached = nlohmann::json::array();
  for (const nm::PlannedLink& l : gone.links_down)
    links_down.push_back({{"chip", l.end.node},
                          {"port", l.end.port},
                          {"location", port_name(l.end)},
                          {"peer", port_name(l.peer)},
                          {"cause", "link_down"},
                          {"severity", "critical"}});
  for (uint16_t c : gone.unreached)
    unreached.push_back(
        {{"chip", c}, {"name", plan.name(c)}, {"cause", "not_responding"}, {"severity", "major"}});
  if (!gone.links_down.empty() || !gone.unreached.empty()) set_exit_code(1);
  nlohmann::json j{{"fabric", o.session.fabric},
                   {"links_down", links_down},
                   {"not_responding", unreached},
                   {"reporting_chips", setup->chips},
                   {"reporting_setup_requests", setup->requests},
                   {"reporting_setup_sim_us", static_cast<double>(setup->elapsed) / nm::kUs},
                   {"faults", list},
                   {"region_updates", updates}};
  if (json) {
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  std::printf("fault reporting enabled on %llu chips (%llu requests, %.1f us simulated)\n",
              static_cast<unsigned long long>(setup->chips),
              static_cast<unsigned long long>(setup->requests),
              static_cast<double>(setup->elapsed) / nm::kUs);
  for (const auto& f : faults)
    std::printf("%12.3f us  %-8s %-24s %s (detail %u)\n", static_cast<double>(f.time) / nm::kUs,
                f.severity.c_str(), f.location.c_str(), f.cause.c_str(), f.detail);
  for (const auto& u : updates) std::printf("region update: %s\n", json_text(u).c_str());
  for (const auto& l : links_down)
    std::printf("critical link down: %s (to %s), found down by discovery\n",
                l["location"].get<std::string>().c_str(), l["peer"].get<std::string>().c_str());
  if (!unreached.empty()) {
    std::string names;
    for (const auto& c : unreached)
      names += fmt::format("{}{}", names.empty() ? "" : ", ", c["name"].get<std::string>());
    std::printf("major    not responding: %zu chips not reached by discovery: %s\n",
                unreached.size(), names.c_str());
  }
}

void add_faults_command(CLI::App& app) {
  auto o = std::make_shared<FaultsOptions>();
  auto* c =
      app.add_subcommand("faults", "Enable active fault reports, collect them, react to link-down");
  add_session_options(c, o->session);
  c->add_option("--inject", o->inject,
                "simulated fabric: link-down:CHIP:PORT or link-up:CHIP:PORT (repeatable)");
  c->add_option("--watch-us", o->watch_us, "how long to collect reports (simulated us)")
      ->capture_default_str()
      ->check(real_in(0, 1e9));
  c->add_option("--engine", o->engine,
                "route with this engine first and re-route around link-down faults");
  c->add_option("--mask", o->mask, "FAULT_MASK to program (bit per fault code, 1 = not reported)")
      ->capture_default_str()
      ->check(any_uint64());
  c->callback([o]() { run_faults(*o); });
}

const CommandRegistrar kFaultsRegistrar("faults", add_faults_command, true);

}  // namespace
}  // namespace galaxy::cli
