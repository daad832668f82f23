// galaxy inject — fault injection on a simulated fabric (a test aid for SYSTEM.md 2.5.3): take a
// link or a whole chip down, bring a link up, or make a chip raise a fault code; then let 100 us
// of simulated time pass and report which links changed state. Setting up active fault
// reporting is the faults module's job; fault reports that do arrive are counted.
#include <cstdio>

#include "base/json_text.h"
#include "chip/register_names.h"
#include "chip/registers.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/session.h"

namespace galaxy::cli {

using chip::parse_register;
using chip::parse_u64;
using chip::register_name;

namespace {

struct InjectOptions {
  SessionOptions session;
  std::string action;
  std::string target;
  uint32_t window_us = 100;
};

struct Target {
  uint32_t node = 0;  // FabricMap node
  uint32_t sim = 0;   // engine node (= chip id)
  int port = -1;      // -1: none given
  int code = -1;      // fault code
};

// CHIP[:PORT[:CODE]], CHIP possibly "nic:<i>": the numeric fields are taken from the right.
Result<Target> parse_target(const Session& s, const std::string& text, unsigned fields) {
  std::vector<std::string> tail;
  std::string chip = text;
  for (unsigned i = 1; i < fields; ++i) {
    auto c = chip.rfind(':');
    if (c == std::string::npos)
      return make_error(
          Code::kInvalidArgument, 9230,
          fmt::format("target = '{}' needs {} fields separated by ':'", text, fields));
    tail.insert(tail.begin(), chip.substr(c + 1));
    chip = chip.substr(0, c);
  }
  auto node = find_node(s, chip);
  if (!node.ok()) return node.error();
  const nm::FabricMap& m = s.discovery.map;
  Target t;
  t.node = *node;
  t.sim = m.chip_id[*node];
  if (fields >= 2) {
    auto p = parse_u64("target port", tail[0], m.topology.num_ports(*node) - 1);
    if (!p.ok()) return p.error();
    t.port = static_cast<int>(*p);
  }
  if (fields >= 3) {
    for (uint8_t c = 0; c < chip::kFaultCodeCount; ++c)
      if (tail[1] == chip::fault_name(static_cast<chip::FaultCode>(c))) t.code = c;
    if (t.code < 0) {
      auto c = parse_u64("fault code", tail[1], chip::kFaultCodeCount - 1);
      if (!c.ok()) return c.error();
      t.code = static_cast<int>(*c);
    }
  }
  return t;
}

std::vector<chip::LinkState> link_states(sim::SimFabric& f) {
  std::vector<chip::LinkState> out;
  const auto& t = f.topology();
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint8_t p = 0; p < t.num_ports(v); ++p) out.push_back(f.chip(v).port(p).link);
  return out;
}

const char* link_state_name(chip::LinkState s) {
  switch (s) {
    case chip::LinkState::kDown:
      return "down";
    case chip::LinkState::kTraining:
      return "training";
    case chip::LinkState::kUp:
      return "up";
  }
  return "?";
}

// Against daemons: link-down / link-up through POST /api/inject (simulated fabrics).
void run_inject_remote(const InjectOptions& o) {
  const bool json = o.session.json;
  auto colon = o.target.rfind(':');
  if ((o.action != "link-down" && o.action != "link-up") || colon == std::string::npos)
    return report_error(make_error(Code::kUnsupported, 9233,
                                   fmt::format("against a daemon: link-down|link-up CHIP:PORT "
                                               "(got {} {})",
                                               o.action, o.target)),
                        json);
  auto port = parse_u64("target port", o.target.substr(colon + 1), 255);
  if (!port.ok()) return report_error(port.error(), json);
  const nlohmann::json body{
      {"action", o.action}, {"chip", o.target.substr(0, colon)}, {"port", *port}};
  auto r = call_first("POST", "/api/inject", &body);
  if (!r.ok()) return report_error(r.error(), json);
  if (json)
    std::printf("%s\n", r->dump(2).c_str());
  else
    std::printf("%s %s: done; the daemon reports what follows (galaxy --server ... faults)\n",
                o.action.c_str(), o.target.c_str());
}

void run_inject(InjectOptions& o) {
  const bool json = o.session.json;
  if (is_remote()) return run_inject_remote(o);
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return report_error(sess.error(), json);
  Session& s = *sess;
  unsigned fields = o.action == "chip-down" ? 1 : o.action == "fault" ? 3 : 2;
  if (o.action != "link-down" && o.action != "link-up" && o.action != "chip-down" &&
      o.action != "fault")
    return report_error(make_error(Code::kInvalidArgument, 9231,
                                   fmt::format("action = '{}' is not link-down, link-up, "
                                               "chip-down or fault",
                                               o.action)),
                        json);
  auto t = parse_target(s, o.target, fields);
  if (!t.ok()) return report_error(t.error(), json);
  if (Status sim_only = require_simulated(s, "galaxy inject"); !sim_only.ok())
    return report_error(sim_only.error(), json);
  sim::SimFabric& f = *s.fabric;
  const fabric::Topology& topo = f.topology();
  uint64_t reports = 0;
  s.requester->set_fault_handler([&](const wire::MgmtPacket&) { ++reports; });
  const auto before = link_states(f);
  const nm::Picoseconds t0 = s.port->now();

  nlohmann::json j{{"action", o.action},
                   {"chip", t->sim},
                   {"name", topo.name(t->sim)},
                   {"window_us", o.window_us}};
  if (t->port >= 0) j["port"] = t->port;
  if (o.action == "link-down" || o.action == "link-up") {
    Status st = f.set_link({t->sim, static_cast<uint8_t>(t->port)}, o.action == "link-up");
    if (!st.ok()) return report_error(st.error(), json);
  } else if (o.action == "chip-down") {
    for (uint8_t p = 0; p < topo.num_ports(t->sim); ++p)
      if (topo.peer({t->sim, p})) (void)f.set_link({t->sim, p}, false);
  } else {
    f.chip(t->sim).raise_fault(static_cast<chip::FaultCode>(t->code), static_cast<uint8_t>(t->port),
                               0);
    j["fault"] = chip::fault_name(static_cast<chip::FaultCode>(t->code));
  }
  s.requester->drain_faults(nm::Picoseconds{o.window_us} * nm::kUs);
  if (o.action == "fault") {
    // Reading FAULT_STATUS in-band shows the latched fault (and lets the chip's NMA send the
    // report when reporting is enabled).
    Result<uint64_t> status = make_error(Code::kNotFound, 9232, "");
    if (t->node == s.discovery.map.server_node) {
      status = s.port->read_local_register(chip::reg::kFaultStatus);
    } else {
      nm::MgmtReply got;
      s.requester->submit(
          nm::MgmtRequest::read(s.discovery.map.target[t->node], chip::reg::kFaultStatus),
          [&](const nm::MgmtReply& r) { got = r; });
      s.requester->run();
      if (got.status.ok())
        status = got.response.data.value[0];
      else
        status = got.status.error();
    }
    if (status.ok()) j["fault_status"] = fmt::format("0x{:02x}", *status);
  }

  const auto after = link_states(f);
  nlohmann::json changed = nlohmann::json::array();
  size_t slot = 0;
  std::vector<size_t> first_slot(topo.num_nodes() + 1, 0);
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    first_slot[v + 1] = first_slot[v] + topo.num_ports(v);
  for (uint32_t v = 0; v < topo.num_nodes(); ++v) {
    for (uint8_t p = 0; p < topo.num_ports(v); ++p, ++slot) {
      auto peer = topo.peer({v, p});
      if (before[slot] == after[slot]) continue;
      // One entry per link: from its lower end, or from the end that changed alone.
      if (peer) {
        size_t other = first_slot[peer->node] + peer->port;
        if (before[other] != after[other] && peer->node < v) continue;
      }
      changed.push_back(
          {{"a", fmt::format("{}:{}", topo.name(v), p)},
           {"b", peer ? fmt::format("{}:{}", topo.name(peer->node), peer->port) : "-"},
           {"before", link_state_name(before[slot])},
           {"after", link_state_name(after[slot])}});
    }
  }
  j["links_changed"] = changed;
  j["fault_reports_received"] = reports;
  j["sim_time_us"] = static_cast<double>(s.port->now() - t0) / nm::kUs;
  if (json) {
    std::printf("%s\n", json_text(j, 2).c_str());
  } else {
    std::printf("%s %s: %zu links changed state\n", o.action.c_str(), o.target.c_str(),
                changed.size());
    for (const auto& c : changed)
      std::printf("  %s <-> %s: %s -> %s\n", c["a"].get<std::string>().c_str(),
                  c["b"].get<std::string>().c_str(), c["before"].get<std::string>().c_str(),
                  c["after"].get<std::string>().c_str());
    if (j.contains("fault_status"))
      std::printf("  FAULT_STATUS = %s\n", j["fault_status"].get<std::string>().c_str());
    std::printf("  %llu fault reports received in %u us\n",
                static_cast<unsigned long long>(reports), o.window_us);
  }
}

void add_inject_command(CLI::App& app) {
  auto o = std::make_shared<InjectOptions>();
  auto* c = app.add_subcommand("inject", "Inject a fault into a simulated fabric");
  add_session_options(c, o->session);
  c->add_option("action", o->action, "link-down, link-up, chip-down or fault")->required();
  c->add_option("target", o->target,
                "CHIP:PORT (link-down, link-up), CHIP (chip-down), CHIP:PORT:CODE (fault; CODE a "
                "number 0-7 or a name such as crc_error_burst)")
      ->required();
  c->add_option("--window-us", o->window_us, "simulated time to wait after the injection")
      ->capture_default_str()
      ->check(integer_in(0, 10000000));
  c->callback([o]() { run_inject(*o); });
}

const CommandRegistrar kInjectRegistrar("inject", add_inject_command, true);

}  // namespace
}  // namespace galaxy::cli
