// galaxy inject — fault injection on a simulated fabric (a test aid for docs/system.md 2.5.3): take
// a link or a whole chip down, bring a link up, or make a chip raise a fault code; then let 100 us
// of simulated time pass and report which links changed state (nmd/inject.h, the same operation
// as the daemon's POST /api/inject). Setting up active fault reporting is the faults module's
// job; fault reports that do arrive are counted.
#include <cstdio>

#include "base/json_text.h"
#include "chip/register_names.h"
#include "chip/registers.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/session.h"
#include "nmd/inject.h"

namespace galaxy::cli {

using chip::parse_u64;

namespace {

struct InjectOptions {
  SessionOptions session;
  std::string action;
  std::string target;
  uint32_t window_us = 100;
};

// CHIP[:PORT[:CODE]] split from the right (CHIP may be "nic:<i>" or a name with ':'):
// `fields` parts.
Result<std::vector<std::string>> split_target(const std::string& text, unsigned fields) {
  std::vector<std::string> parts;
  std::string chip = text;
  for (unsigned i = 1; i < fields; ++i) {
    auto c = chip.rfind(':');
    if (c == std::string::npos)
      return make_error(
          Code::kInvalidArgument, 9230,
          fmt::format("target = '{}' needs {} fields separated by ':'", text, fields));
    parts.insert(parts.begin(), chip.substr(c + 1));
    chip = chip.substr(0, c);
  }
  parts.insert(parts.begin(), chip);
  return parts;
}

unsigned fields_of(const std::string& action) {
  return action == "chip-down" ? 1 : action == "fault" ? 3 : 2;
}

// The request's port, code and window from the target's parts (the chip is the caller's).
Result<nmd::InjectRequest> request_of(const InjectOptions& o,
                                      const std::vector<std::string>& parts) {
  nmd::InjectRequest r;
  r.action = o.action;
  r.window_us = o.window_us;
  if (parts.size() >= 2) {
    auto p = parse_u64("target port", parts[1], 255);
    if (!p.ok()) return p.error();
    r.port = static_cast<int>(*p);
  }
  if (parts.size() >= 3) r.code = parts[2];
  return r;
}

void print_result(const nlohmann::json& j, const InjectOptions& o) {
  if (o.session.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  const auto& changed = j["links_changed"];
  std::printf("%s %s: %zu links changed state\n", o.action.c_str(), o.target.c_str(),
              changed.size());
  for (const auto& c : changed)
    std::printf("  %s <-> %s: %s -> %s\n", c["a"].get<std::string>().c_str(),
                c["b"].get<std::string>().c_str(), c["before"].get<std::string>().c_str(),
                c["after"].get<std::string>().c_str());
  if (j.contains("fault_status"))
    std::printf("  FAULT_STATUS = %s\n", j["fault_status"].get<std::string>().c_str());
  if (j.contains("fault_reports_received"))
    std::printf("  %llu fault reports received in %u us\n",
                static_cast<unsigned long long>(j["fault_reports_received"].get<uint64_t>()),
                o.window_us);
}

void run_inject(InjectOptions& o) {
  const bool json = o.session.json;
  if (Status a = nmd::check_inject_action(o.action); !a.ok()) return report_error(a.error(), json);
  auto parts = split_target(o.target, fields_of(o.action));
  if (!parts.ok()) return report_error(parts.error(), json);
  auto req = request_of(o, *parts);
  if (!req.ok()) return report_error(req.error(), json);
  if (is_remote()) {
    // The daemon runs the same operation (nmd/inject.h); its loop takes the reports.
    nlohmann::json body{{"action", o.action}, {"chip", (*parts)[0]}};
    if (req->port >= 0) body["port"] = req->port;
    if (!req->code.empty()) body["code"] = req->code;
    auto r = call_first("POST", "/api/inject", &body);
    if (!r.ok()) return report_error(r.error(), json);
    return print_result(*r, o);
  }
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return report_error(sess.error(), json);
  Session& s = *sess;
  // A chip id, nic:<i> or a described name; names only discovery gives need the map.
  auto chip = s.plan().resolve((*parts)[0]);
  if (!chip.ok()) {
    auto node = find_node(s, (*parts)[0]);
    if (!node.ok()) return report_error(chip.error(), json);
    chip = s.discovery.map.chip_id[*node];
  }
  req->chip = *chip;
  uint64_t reports = 0;
  s.requester->set_fault_handler([&](const wire::MgmtPacket&) { ++reports; });
  auto j = nmd::inject_op(s, *req);
  if (!j.ok()) return report_error(j.error(), json);
  (*j)["fault_reports_received"] = reports;
  print_result(*j, o);
}

void add_inject_command(CLI::App& app) {
  auto o = std::make_shared<InjectOptions>();
  auto* c = app.add_subcommand("inject", "Inject a fault into a simulated fabric");
  add_session_options(c, o->session);
  c->add_option("action", o->action, nmd::kInjectActions)->required();
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
